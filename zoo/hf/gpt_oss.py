"""gpt-oss (``GptOssForCausalLM``): Llama with biased projections, attention sinks, sliding layers, biased MoE."""

from ._moe import BLOCK, LAYER, clamped_experts, fused_experts, moe_rules, router_rows
from .llama import COMMON, LLAMA
from .mapping import Rule
from .rows_rope import rope_unless_given
from .table import Fixed, Refused
from .windows import layer_type_windows, sliding_first

SINKS = Rule(f"{LAYER}.self_attn.sinks", f"{BLOCK}.attention.sinks")  # a learned sink per query head
YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False}
YARN["original_max_position_embeddings"] = 4096  # GptOssConfig's rope without rope_parameters
unfuse, fuse = fused_experts("mlp", interleaved=True, biases=True)  # on disk: gate and up columns alternate

GPT_OSS = LLAMA.derive(
    "gpt_oss",
    classes=("GptOssForCausalLM",),
    rules=(*COMMON, SINKS, *moe_rules(router="router", kinds=("weight", "bias"))),
    layout=unfuse,
    hf_layout=fuse,
    recipes=("gpt-oss-20b", "gpt-oss-120b"),
    drop=("mlp_bias", "pretraining_tp", "sliding_window", "gated ffn", "hidden_act", "layers"),
    rows=(
        rope_unless_given(YARN),
        Fixed("attention.sinks", True),
        *layer_type_windows(128, fill=sliding_first),  # GptOssConfig has no use_sliding_window
        *router_rows("num_local_experts", 128, 4, fixed={"router_bias": True}),
        *clamped_experts("GptOssExperts", 2880, 1.702, 7.0),  # weighted by a softmax over the top-k router logits
        Refused(
            "quantization_config",
            lambda v: v is None,
            "the published experts are MXFP4 blocks and scales (gate_up_proj_blocks, ..._scales); zoo reads plain "
            "tensors: dequantise them first (transformers: Mxfp4Config(dequantize=True), then save_pretrained)",
        ),
    ),
    defaults={"vocab_size": 201088, "hidden_size": 2880, "num_hidden_layers": 36, "num_attention_heads": 64}
    | {"num_key_value_heads": 8, "head_dim": 64, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5}
    | {"attention_bias": True, "rope_theta": 150000.0},
)
