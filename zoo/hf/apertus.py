"""Apertus (``ApertusForCausalLM``, the Swiss AI models): Llama's attention with per-head QK-norm (before RoPE)
and one ``attention_bias``, and a two-layer MLP whose activation is xIELU (two learned scalars per layer, zoo's
MLP with ``activation: xielu``); its norms are named ``attention_layernorm`` and ``feedforward_layernorm``.
"""

from __future__ import annotations

from ._common import renamed
from .llama import BLOCK, IGNORED, LAYER, LLAMA
from .mapping import Rule
from .qwen3 import QK_NORM, QWEN3_RULES
from .rows import ONE_BIAS, PLAIN_ACTIVATION, heads, plain_mlp
from .table import Fixed

NORMS = {".input_layernorm.": ".attention_layernorm.", ".post_attention_layernorm.": ".feedforward_layernorm."}
LLAMA3_DEFAULT = {"rope_type": "llama3", "rope_theta": 12000000.0, "factor": 8.0}
LLAMA3_DEFAULT |= {"original_max_position_embeddings": 8192, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
"""What ApertusConfig sets when config.json has no rope_parameters, whatever its rope_theta says."""

RULES = (
    *renamed(QWEN3_RULES, parts=NORMS),
    *(Rule(f"{LAYER}.mlp.act_fn.{p}", f"{BLOCK}.ffn.act.{p}") for p in ("alpha_p", "alpha_n", "beta", "eps")),
)

APERTUS = LLAMA.derive(
    "apertus",
    classes=("ApertusForCausalLM",),
    rules=RULES,
    ignored=IGNORED,
    recipes=("apertus-8b",),
    drop=("attention_bias", "mlp_bias", "pretraining_tp", "sliding_window"),
    rows=(heads(head_dim="unless implied"), ONE_BIAS, QK_NORM, plain_mlp(), PLAIN_ACTIVATION, Fixed("ffn.bias", False)),
    defaults={"vocab_size": 131072, "intermediate_size": 14336, "max_position_embeddings": 65536, "pad_token_id": 3}
    | {"rms_norm_eps": 1e-5, "hidden_act": "xielu", "rope_theta": 12000000.0, "rope_parameters": LLAMA3_DEFAULT},
)
