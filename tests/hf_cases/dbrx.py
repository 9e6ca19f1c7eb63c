"""DBRX: bias-free LayerNorms, a fused Wqkv clamped to ±clip_qkv, GQA, and experts stacked on disk whose top-k
softmax weights are renormalised (or not)."""

from __future__ import annotations

CONFIGS = {"dbrx": "DbrxConfig"}

CASES = {
    "dbrx-gqa-clipped-top2": {  # a clamp the random projections reach
        "family": "dbrx",
        "hf_class": "DbrxForCausalLM",
        "config": dict(
            vocab_size=96,
            d_model=32,
            n_heads=4,
            n_layers=2,
            max_seq_len=64,
            attn_config={"kv_n_heads": 2, "clip_qkv": 0.05, "rope_theta": 1000.0},
            ffn_config={"ffn_hidden_size": 24, "moe_num_experts": 4, "moe_top_k": 2},
            rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
        ),
    },
    "dbrx-mha-unnormalised-top1": {
        "family": "dbrx",
        "hf_class": "DbrxForCausalLM",
        "config": dict(
            vocab_size=80,
            d_model=48,
            n_heads=6,
            n_layers=3,
            max_seq_len=64,
            pad_token_id=3,
            attn_config={"kv_n_heads": 6, "clip_qkv": 8.0, "rope_theta": 10000.0},
            ffn_config={
                "ffn_hidden_size": 16,
                "moe_num_experts": 3,
                "moe_top_k": 1,
                "moe_normalize_expert_weights": None,
                "moe_loss_weight": 0.05,
            },
        ),
    },
}

PUBLISHED = {
    "dbrx-base": (  # databricks/dbrx-base's config.json (auto_map left out) with its base in rope_parameters too
        "DbrxConfig",
        {
            "architectures": ["DbrxForCausalLM"],
            "attn_config": {"clip_qkv": 8, "kv_n_heads": 8, "model_type": "", "rope_theta": 500000},
            "d_model": 6144,
            "emb_pdrop": 0.0,
            "ffn_config": {
                "ffn_hidden_size": 10752,
                "model_type": "",
                "moe_jitter_eps": 0,
                "moe_loss_weight": 0.05,
                "moe_num_experts": 16,
                "moe_top_k": 4,
            },
            "initializer_range": 0.02,
            "max_seq_len": 32768,
            "model_type": "dbrx",
            "n_heads": 48,
            "n_layers": 40,
            "output_router_logits": False,
            "resid_pdrop": 0.0,
            "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},  # transformers 5 reads it here
            "router_aux_loss_coef": 0.05,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.38.2",
            "use_cache": True,
            "vocab_size": 100352,
        },
    ),
}
