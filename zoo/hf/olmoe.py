"""OLMoE (``OlmoeForCausalLM``, OLMoE-1B-7B): Mixtral's network with OLMo 2's QK-norm (over whole projections,
before RoPE), one ``attention_bias`` and experts renormalised only with ``norm_topk_prob``."""

from ._moe import router_rows
from .mapping import default_head_dim
from .mixtral import MIXTRAL
from .qwen3_moe import QWEN3_MOE
from .rows import ONE_BIAS, qk_norm
from .table import Refused, Require

OLMOE = MIXTRAL.derive(
    "olmoe",
    classes=("OlmoeForCausalLM",),
    rules=QWEN3_MOE.rules,  # Llama's names, q_norm and k_norm, the router and the experts
    layout=QWEN3_MOE.layout,
    recipes=("olmoe-1b-7b",),
    drop=("sliding_window", "router_jitter_noise", "num_local_experts", "attention.bias"),
    rows=(
        ONE_BIAS,
        qk_norm("projection", family="OLMoE"),  # OLMo 2's, sized for heads of hidden_size / heads
        Require("attention.head_dim", default_head_dim),
        *router_rows("num_experts", 64, 8, normalize=False),
        Refused(
            "clip_qkv",
            lambda v: v is None,
            "OLMoE clamps the queries and keys after their norms; zoo's attention clip_qkv clamps the projections",
            export=None,
        ),
    ),
    defaults={"vocab_size": 50304, "hidden_size": 2048, "intermediate_size": 2048, "num_hidden_layers": 16}
    | {"num_attention_heads": 16, "num_key_value_heads": None, "max_position_embeddings": 4096, "rope_theta": 10000.0}
    | {"pad_token_id": 1, "router_aux_loss_coef": 0.01},
)
