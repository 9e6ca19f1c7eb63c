"""HunYuan dense (``HunYuanDenseV1ForCausalLM``, Hunyuan-0.5B to 7B): Llama's network with a per-head RMSNorm
(``query_layernorm``, ``key_layernorm``) on the queries and keys after RoPE. A ``dynamic`` rope with an ``alpha``
is a fixed NTK stretch of the base, imported (and exported) as that base, unscaled."""

from ._common import renamed
from .llama import LLAMA
from .qwen3 import QWEN3_RULES
from .rows import head_qk_norm
from .rows_rope import ntk_alpha_rope
from .table import Refused, Unread

HUNYUAN_V1_DENSE = LLAMA.derive(
    "hunyuan_v1_dense",
    classes=("HunYuanDenseV1ForCausalLM",),
    rules=renamed(QWEN3_RULES, parts={".q_norm.": ".query_layernorm.", ".k_norm.": ".key_layernorm."}),
    recipes=("hunyuan-7b",),
    drop=("mlp_bias", "sliding_window"),
    rows=(
        ntk_alpha_rope(),
        head_qk_norm(
            "attention.qk_norm must be an rmsnorm of norm.eps after rope, per head (HunYuan's query/key_layernorm)",
            position="after_rope",
        ),
        Unread("eod_token_id", "the end-of-document token: a generation setting, not part of the network"),
        # Keys of Tencent's own configs that transformers' class ignores: refused where they would change the network.
        Refused("use_cla", lambda v: not v, "HunYuanDenseV1 shares no keys and values across layers (CLA)"),
        Refused("use_qk_norm", lambda v: v in (None, True), "HunYuanDenseV1 normalises queries and keys whatever"),
        Refused("use_rotary_pos_emb", lambda v: v in (None, True), "HunYuanDenseV1 always rotates by RoPE"),
        Refused("norm_type", lambda v: v in (None, "rms"), "HunYuanDenseV1's norms are RMSNorms"),
        Refused("mlp_bias", lambda v: not v, "HunYuanDenseV1's MLP has no biases"),
    ),
    defaults={"vocab_size": 290943, "rms_norm_eps": 1e-5, "pad_token_id": 0},
)
