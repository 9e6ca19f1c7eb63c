"""HunYuan dense: Llama with a per-head q/k RMSNorm after RoPE, and the NTK-alpha rope (a fixed, larger base)."""

from __future__ import annotations

CONFIGS = {"hunyuan_v1_dense": "HunYuanDenseV1Config"}

CASES = {
    "hunyuan-gqa-qk-norm-after-rope": {
        "family": "hunyuan_v1_dense",
        "hf_class": "HunYuanDenseV1ForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            max_position_embeddings=64,
            rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
        ),
    },
    "hunyuan-ntk-alpha-biased-tied": {  # Hunyuan-7B's rope: "dynamic" with an alpha, a fixed base
        "family": "hunyuan_v1_dense",
        "hf_class": "HunYuanDenseV1ForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=6,
            head_dim=8,
            attention_bias=True,
            tie_word_embeddings=True,
            rms_norm_eps=1e-6,
            pad_token_id=3,
            max_position_embeddings=64,
            rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "alpha": 50.0, "factor": 1.0},
        ),
    },
}

PUBLISHED = {
    "hunyuan-7b": (
        "HunYuanDenseV1Config",
        {  # tencent/Hunyuan-7B-Instruct's config.json
            "architectures": ["HunYuanDenseV1ForCausalLM"],
            "attention_bias": False,
            "attention_dropout": 0.0,
            "attention_head_dim": 128,
            "bos_token_id": 1,
            "cla_share_factor": 2,
            "eod_token_id": 127967,
            "eos_token_id": 127960,
            "head_dim": 128,
            "hidden_act": "silu",
            "hidden_size": 4096,
            "initializer_range": 0.02,
            "intermediate_size": 14336,
            "max_position_embeddings": 262144,
            "mlp_bias": False,
            "model_type": "hunyuan_v1_dense",
            "norm_type": "rms",
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "num_key_value_heads": 8,
            "pad_token_id": 127961,
            "pretraining_tp": 1,
            "rms_norm_eps": 1e-05,
            "rope_scaling": {
                "alpha": 1000.0,
                "beta_fast": 32,
                "beta_slow": 1,
                "factor": 1.0,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
                "type": "dynamic",
            },
            "rope_theta": 10000.0,
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
            "use_cache": True,
            "use_cla": False,
            "use_qk_norm": True,
            "use_rotary_pos_emb": True,
            "vocab_size": 128167,
        },
    ),
}
