"""PhiMoE (``PhimoeForCausalLM``, Phi-3.5-MoE): Mixtral with biased LayerNorms, one ``attention_bias``, an optional
``lm_head_bias``, LongRoPE's short factors scaled by an mscale, and the sparsemixer router (eval mode)."""

from ._moe import ROUTER_LOGITS
from .mapping import Option, Rule
from .mixtral import MIXTRAL
from .rows import ONE_BIAS
from .rows_neox import NORM_BIASES, head_bias
from .rows_rope import longrope
from .table import Fixed, Key, Unread

TYPE_WHY = (
    "PhimoeRotaryEmbedding scales cos and sin by short_mscale whatever the type: zoo computes default and longrope"
)

PHIMOE = MIXTRAL.derive(
    "phimoe",
    classes=("PhimoeForCausalLM", "PhiMoEForCausalLM"),  # transformers' and the remote code's
    rules=(*MIXTRAL.rules, *NORM_BIASES, Rule("lm_head.bias", "head.proj.bias")),
    recipes=("phi-3.5-moe",),
    drop=("attention.bias", "router_jitter_noise"),
    rows=(
        ONE_BIAS,
        *longrope("PhiMoE", TYPE_WHY, mscale=True),  # LongRoPE's short factors at every length, times short_mscale
        Fixed("norm.type", "layernorm"),
        head_bias("lm_head_bias", "PhiMoE"),
        # zoo's sparsemixer: two experts picked in turn, each weighted among those within 2 * router_jitter_noise
        Fixed("ffn.scoring", "sparsemixer"),
        Fixed("ffn.normalize", False),
        Key("router_jitter_noise", "ffn.sparsemixer_eps", 0.01),
        Option("num_experts_per_tok", lambda v: v == 2, "PhiMoE's sparsemixer picks two experts whatever it says"),
        Unread("input_jitter_noise", "noise on the router's input in training only (zoo computes the eval mode)"),
        ROUTER_LOGITS,
    ),
    defaults={"vocab_size": 32064, "hidden_size": 4096, "intermediate_size": 6400, "num_local_experts": 16}
    | {"max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 1000000.0, "sliding_window": None},
)
