"""DeepSeek-V3 (``DeepseekV3ForCausalLM``, V3 / R1): DeepSeek-V2's network with a sigmoid router whose correction bias
chooses (not weights) among the best ``topk_group`` of ``n_group`` groups, renormalised; the MTP module is dropped."""

from dataclasses import replace

from ._moe import FIRST_K, experts, fits_moe, split_fused_experts
from .deepseek_v2 import DEEPSEEK_V2
from .rows_mla import NOAUX_ROUTER
from .rows_rope import rope_interleaved_by
from .table import Unread

EXPERTS = experts(2048, 18432, FIRST_K, shared=("n_shared_experts", 1), per_expert=True, fits=fits_moe)


def drop_mtp_modules(state: dict) -> dict:
    """The state without the multi-token-prediction layers (an ``eh_proj``'s), which transformers builds neither."""
    mtp = tuple(name.removesuffix("eh_proj.weight") for name in state if name.endswith(".eh_proj.weight"))
    return split_fused_experts({n: t for n, t in state.items() if not (mtp and n.startswith(mtp))})


DEEPSEEK_V3 = DEEPSEEK_V2.derive(
    "deepseek_v3",
    classes=("DeepseekV3ForCausalLM",),
    layout=drop_mtp_modules,
    recipes=("deepseek-v3",),
    drop=("router", "ffn.normalize", "norm_topk_prob", "mlp_bias"),  # V2's greedy router
    rows=(
        rope_interleaved_by("rope_interleave"),
        replace(
            EXPERTS, write=lambda recipe, weights: {**EXPERTS.write(recipe, weights), "num_nextn_predict_layers": 0}
        ),
        *NOAUX_ROUTER,
        Unread("num_nextn_predict_layers", "multi-token-prediction modules, which transformers builds none of"),
    ),
    defaults={"vocab_size": 129280, "hidden_size": 7168, "num_hidden_layers": 61, "max_position_embeddings": 4096}
    | {"num_attention_heads": 128, "n_routed_experts": 256, "num_experts_per_tok": 8, "routed_scaling_factor": 2.5}
    | {"first_k_dense_replace": 3},
)
