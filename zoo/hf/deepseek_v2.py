"""DeepSeek-V2 (``DeepseekV2ForCausalLM``, V2, V2-Lite, Coder-V2): Llama's stack with multi-head latent attention,
dense then MoE layers, and a softmax router: the top-k greedy or within the best ``topk_group`` of ``n_group`` groups
by their best score (``group_scoring: max``), never renormalised, scaled by ``routed_scaling_factor``."""

from ._moe import FIRST_K, ROUTER_LOGITS, experts, fits_moe, router_rows, split_fused_experts
from .llama import LLAMA
from .rows import rope
from .rows_mla import DEEPSEEK_ROWS, GREEDY_ROUTER, RULES, mla_heads
from .table import Fixed, Key, Refused

DEEPSEEK_V2 = LLAMA.derive(
    "deepseek_v2",
    classes=("DeepseekV2ForCausalLM",),
    rules=RULES,
    layout=split_fused_experts,
    recipes=("deepseek-v2-lite", "deepseek-v2"),
    drop=("mlp_bias", "sliding_window", "gated ffn", "layers"),
    rows=(
        mla_heads(32),
        rope(interleaved=True),  # DeepseekV2's complex rotation, on the qk_rope_head_dim dims
        *router_rows("n_routed_experts", 64, None, aux="aux_loss_alpha"),  # DeepSeek's own configs carry aux_loss_alpha
        Key("routed_scaling_factor", "ffn.routed_scaling_factor", 1.0, read=float),
        Fixed("ffn.normalize", False),
        *GREEDY_ROUTER,
        experts(1407, 11008, FIRST_K, shared=("n_shared_experts", 2), per_expert=True, fits=fits_moe),
        Refused("mlp_bias", lambda v: not v, "DeepSeek-V2's gated FFNs in zoo have no biases", export=False),
        *DEEPSEEK_ROWS,
        ROUTER_LOGITS,
    ),
    defaults={"vocab_size": 102400, "hidden_size": 4096, "num_hidden_layers": 32, "max_position_embeddings": 2048}
    | {"rms_norm_eps": 1e-6},
)
