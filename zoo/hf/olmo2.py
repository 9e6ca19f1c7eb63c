"""OLMo 2 (``Olmo2ForCausalLM``): Llama's network with its norms moved onto each sub-layer's output inside the
residual (``x + norm(f(x))``, no norm of the input: zoo's ``norm_position: output``) and QK-norm, one RMSNorm
over all of a projection's query features and one over the keys' (``qk_norm_scope: projection``), before RoPE.
One ``attention_bias`` for all four projections; a bias-free gated MLP; an untied head by default.
"""

from __future__ import annotations

from .llama import ATTENTION, BLOCK, COMMON, LAYER, LLAMA
from .mapping import Rule
from .opt import padding_is_pad
from .rows import ONE_BIAS, heads, qk_norm
from .table import Fixed, Require

RULES = (
    COMMON[0],  # the embeddings
    *ATTENTION,
    *(Rule(f"{LAYER}.self_attn.{p}_norm.weight", f"{BLOCK}.attention.{p}_norm.weight") for p in "qk"),
    Rule(f"{LAYER}.post_attention_layernorm.weight", f"{BLOCK}.attention_post_norm.weight"),
    *(Rule(f"{LAYER}.mlp.{p}_proj.weight", f"{BLOCK}.ffn.{p}_proj.weight") for p in ("gate", "up", "down")),
    Rule(f"{LAYER}.post_feedforward_layernorm.weight", f"{BLOCK}.ffn_post_norm.weight"),
    *COMMON[-2:],  # the final norm and the head (only when untied)
)

OLMO2 = LLAMA.derive(
    "olmo2",
    classes=("Olmo2ForCausalLM",),
    rules=RULES,
    recipes=("olmo-2-1b",),
    drop=("attention_bias", "mlp_bias", "pretraining_tp", "sliding_window"),
    rows=(
        heads(head_dim="unless implied"),  # Olmo2Attention reads a head_dim that config.json gives; no field
        Fixed("block.norm_position", "output"),
        ONE_BIAS,
        qk_norm("projection"),
        Fixed("ffn.bias", False),
        Require("embedding.padding_idx", padding_is_pad),
    ),
    defaults={"vocab_size": 50304, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "pad_token_id": 1},
)
