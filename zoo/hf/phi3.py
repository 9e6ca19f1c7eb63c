"""Phi-3 and Phi-4-mini (``Phi3ForCausalLM``): Mistral's table with q/k/v fused into one ``qkv_proj`` (queries, keys,
then values), gate and up into one ``gate_up_proj``, RoPE over the first ``partial_rotary_factor`` of each head, and
the 128k models' LongRoPE (``longrope``, formerly ``su`` and ``yarn``): zoo's ``longrope`` scaling."""

from ._common import stacked_qkv
from .glm import FUSED_MLP
from .gpt2 import QKV_WEIGHTS
from .llama import BLOCK, COMMON, LAYER
from .mapping import Rule
from .mistral import MISTRAL
from .rope import PHI3_ROPE_TYPES
from .rows_neox import sublayer_dropout
from .rows_rope import longrope

RULES = (
    *COMMON[:2],  # the embeddings, the attention's input norm
    Rule(f"{LAYER}.self_attn.qkv_proj.weight", QKV_WEIGHTS, stacked_qkv),
    Rule(f"{LAYER}.self_attn.o_proj.weight", f"{BLOCK}.attention.o_proj.weight"),
    COMMON[-3],  # the FFN's input norm
    *FUSED_MLP,  # GLM's: gate_up_proj, gate then up
    *COMMON[-2:],  # the final norm and the head (only when untied)
)
ROPE_TYPE_WHY = "Phi3Config takes an unscaled rope or LongRoPE ('longrope', formerly 'su' and 'yarn') only"

PHI3 = MISTRAL.derive(
    "phi3",
    classes=("Phi3ForCausalLM",),
    rules=RULES,
    recipes=("phi-3-mini-4k",),
    drop=("rope_parameters.partial_rotary_factor",),
    rows=(
        # LongRoPE switches to its long factors past the top-level original_max_position_embeddings, where Phi-3's
        # generate recomputes its cache under the long factors, as zoo's does (the rope's stale_after)
        *longrope("Phi-3", ROPE_TYPE_WHY, partial=True, legacy=PHI3_ROPE_TYPES, original=4096),
        *sublayer_dropout("resid_pdrop", "embd_pdrop"),  # Phi3MLP has none: resid_pdrop is the recipe's dropout
    ),
    defaults={"vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192, "num_key_value_heads": None}
    | {"max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "pad_token_id": 32000, "sliding_window": None},
)
