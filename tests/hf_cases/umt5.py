"""UMT5: a relative position bias table in every self-attention, tied heads that rescale (transformers 5 builds
every UMT5 tied; scale_decoder_outputs follows tie_word_embeddings) or not, a pad id other than 0."""

from __future__ import annotations

KIND = "seq2seq"

CONFIGS = {"umt5": "UMT5Config"}

CASES = {
    "umt5-gated-gelu-rescaled": {
        "family": "umt5",
        "hf_class": "UMT5ForConditionalGeneration",
        "config": dict(vocab_size=96, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4),
    },
    "umt5-unscaled-relu-pad2": {
        "family": "umt5",
        "hf_class": "UMT5ForConditionalGeneration",
        "config": dict(
            vocab_size=80,
            d_model=48,
            d_kv=16,
            d_ff=72,
            num_layers=3,
            num_decoder_layers=2,
            num_heads=2,
            relative_attention_num_buckets=16,
            relative_attention_max_distance=32,
            feed_forward_proj="relu",
            tie_word_embeddings=False,  # scale_decoder_outputs: false
            pad_token_id=2,
            decoder_start_token_id=2,
        ),
    },
}

ZOO_MODELS = {
    "umt5-tiny": ("umt5-tiny", {}),
    "umt5-tiny-tied-rescaled": ("umt5-tiny", {"head.tie_embeddings": True, "head.rescale": True}),
}

PUBLISHED = {
    "umt5-small": (
        "UMT5Config",
        {
            "architectures": ["UMT5ForConditionalGeneration"],
            "d_ff": 1024,
            "d_kv": 64,
            "d_model": 512,
            "decoder_start_token_id": 0,
            "dense_act_fn": "gelu_new",
            "dropout_rate": 0.1,
            "eos_token_id": 1,
            "feed_forward_proj": "gated-gelu",
            "initializer_factor": 1.0,
            "is_encoder_decoder": True,
            "is_gated_act": True,
            "layer_norm_epsilon": 1e-06,
            "model_type": "umt5",
            "num_decoder_layers": 8,
            "num_heads": 6,
            "num_layers": 8,
            "output_past": True,
            "pad_token_id": 0,
            "relative_attention_max_distance": 128,
            "relative_attention_num_buckets": 32,
            "scalable_attention": True,
            "tie_word_embeddings": False,
            "tokenizer_class": "T5Tokenizer",
            "transformers_version": "4.31.0.dev0",
            "use_cache": True,
            "vocab_size": 256384,
        },
    ),
}
