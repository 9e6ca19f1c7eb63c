"""GLM-4-0414 (``Glm4ForCausalLM``): GLM-4's network with a norm after each sub-layer too (zoo's ``sandwich``
blocks), ``post_self_attn_layernorm`` and ``post_mlp_layernorm``.
"""

from __future__ import annotations

from .glm import FUSED_MLP, GLM
from .llama import BLOCK, COMMON, LAYER
from .mapping import Rule
from .table import Fixed

GLM4 = GLM.derive(
    "glm4",
    classes=("Glm4ForCausalLM",),
    rules=(
        *COMMON,
        Rule(f"{LAYER}.post_self_attn_layernorm.weight", f"{BLOCK}.attention_post_norm.weight"),
        Rule(f"{LAYER}.post_mlp_layernorm.weight", f"{BLOCK}.ffn_post_norm.weight"),
        *FUSED_MLP,
    ),
    recipes=("glm-4-9b-0414",),
    rows=(Fixed("block.norm_position", "sandwich"),),
)
