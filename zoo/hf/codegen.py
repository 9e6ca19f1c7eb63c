"""CodeGen (``CodeGenForCausalLM``): GPT-2's config keys around GPT-J's network (``rotary_dim``, parallel blocks,
a biased untied head). The fused ``qkv_proj`` is laid out for the 4 devices CodeGen was trained on (``mp_num``):
four blocks of ``[q | v | k]`` (value before key), E/4 rows of each."""

import torch

from .gpt2 import BLOCK, GPT2, GPT2_ONLY, LAYER
from .gptj import RULES
from .mapping import Rule, Transform
from .rows_classic import biases, defers_to
from .rows_neox import PARALLEL_SHARED, biased_head, rotary_dim
from .table import Require, Unread

MP = 4  # CodeGen's mp_num, a constant of its code
MP_QKV = Transform(
    "split 4 blocks of q|v|k",
    lambda t: [t[0].unflatten(0, (MP, 3, -1))[:, i].flatten(0, 1) for i in (0, 2, 1)],
    lambda t: [torch.stack([t[i].unflatten(0, (MP, -1)) for i in (0, 2, 1)], dim=1).flatten(0, 2)],
)
QKV = Rule(f"{LAYER}.attn.qkv_proj.weight", tuple(f"{BLOCK}.attention.{p}_proj.weight" for p in "qkv"), MP_QKV)

CODEGEN = GPT2.derive(
    "codegen",
    classes=("CodeGenForCausalLM",),
    rules=(RULES[0], QKV, *RULES[4:]),  # GPT-J's, its q, k and v fused
    ignored=(f"{LAYER}.attn.causal_mask", f"{LAYER}.attn.masked_bias"),  # mask buffers of the checkpoints
    recipes=("codegen-350m-mono", "codegen-2b-mono"),
    drop=("positional.type", "tie_word_embeddings", "add_cross_attention", *GPT2_ONLY),
    rows=(
        *PARALLEL_SHARED,
        Require("d_model", lambda r: None if r.d_model % MP == 0 else f"d_model is {r.d_model}, needs a multiple of 4"),
        defers_to("gptj", "codegen"),
        *rotary_dim("rotary_dim=None is not supported: with n_head={heads} no head is n_embd wide"),
        biases(False),
        *biased_head("CodeGen", "CodeGen's LM head has a bias, zoo's tied head none"),
        Unread("n_ctx", "unused by CodeGen (kept for older checkpoints); n_positions sizes the model"),
    ),
    defaults={"vocab_size": 50400, "n_positions": 2048, "n_embd": 4096, "n_layer": 28, "n_head": 16}
    | {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0},
)
