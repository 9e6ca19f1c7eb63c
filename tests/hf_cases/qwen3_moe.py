"""Qwen3-MoE: per-head QK RMSNorm, top-k softmax experts (renormalised or not), dense layers, sliding window."""

from __future__ import annotations

CONFIGS = {"qwen3_moe": "Qwen3MoeConfig"}

CASES = {
    "qwen3-moe-4x2-normed": {
        "family": "qwen3_moe",
        "hf_class": "Qwen3MoeForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=48,
            moe_intermediate_size=16,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,  # 4 heads of 16 over a width of 32
            num_experts=4,
            num_experts_per_tok=2,
            norm_topk_prob=True,
            max_position_embeddings=128,
            rope_theta=1000000.0,
        ),
    },
    "qwen3-moe-dense-layers-sliding-biased-tied": {
        "family": "qwen3_moe",
        "hf_class": "Qwen3MoeForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=40,
            moe_intermediate_size=12,
            num_hidden_layers=4,
            num_attention_heads=6,
            num_key_value_heads=3,
            num_experts=6,
            num_experts_per_tok=3,
            decoder_sparse_step=2,  # layers 1 and 3 are MoE ...
            mlp_only_layers=[3],  # ... but 3 is dense too
            attention_bias=True,
            use_sliding_window=True,
            sliding_window=5,  # shorter than the 12-token test sequence
            tie_word_embeddings=True,
            rms_norm_eps=1e-5,
            max_position_embeddings=64,
        ),
    },
}

QWEN3_MOE_TINY = {
    "extends": "llama-tiny",
    "name": "qwen3-moe-tiny",
    "attention": {
        "type": "gqa",
        "num_heads": 4,
        "num_kv_heads": 2,
        "head_dim": 32,
        "bias": False,
        "qk_norm": {"type": "rmsnorm", "eps": 1e-5},
    },
    "ffn": {"type": "moe", "num_experts": 4, "top_k": 2, "expert": {"type": "swiglu", "hidden": 32}},
    "num_layers": 3,
    "layers": [{"select": [0], "ffn": {"type": "swiglu", "hidden": 96}}],
}

ZOO_MODELS = {"qwen3-moe-tiny": (QWEN3_MOE_TINY, {})}


def _published(hidden: int, layers: int, heads: int, intermediate: int, moe: int) -> dict:
    """Qwen/Qwen3-30B-A3B's and Qwen/Qwen3-235B-A22B's config.json: they differ in these widths only."""
    return {
        "architectures": ["Qwen3MoeForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "decoder_sparse_step": 1,
        "eos_token_id": 151645,
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": intermediate,
        "max_position_embeddings": 40960,
        "max_window_layers": layers,
        "mlp_only_layers": [],
        "model_type": "qwen3_moe",
        "moe_intermediate_size": moe,
        "norm_topk_prob": True,
        "num_attention_heads": heads,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "num_hidden_layers": layers,
        "num_key_value_heads": 4,
        "output_router_logits": False,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.001,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.51.0",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 151936,
    }


PUBLISHED = {
    "qwen3-30b-a3b": ("Qwen3MoeConfig", _published(2048, 48, 32, 6144, 768)),
    "qwen3-235b-a22b": ("Qwen3MoeConfig", _published(4096, 94, 64, 12288, 1536)),
}
