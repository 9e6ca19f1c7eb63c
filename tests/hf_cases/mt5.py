"""mT5: T5 v1.1's layout whose head never rescales the decoder output, tied (transformers 5 ties every mT5 built
from a config) with gated-GELU or plain ReLU FFNs, a pad id other than 0 and a decoder start token of its own."""

from __future__ import annotations

KIND = "seq2seq"

CONFIGS = {"mt5": "MT5Config"}

CASES = {
    "mt5-gated-gelu": {
        "family": "mt5",
        "hf_class": "MT5ForConditionalGeneration",
        "config": dict(vocab_size=96, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4),
    },
    "mt5-relu-pad3-start5": {
        "family": "mt5",
        "hf_class": "MT5ForConditionalGeneration",
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
            pad_token_id=3,
            decoder_start_token_id=5,
        ),
    },
}

ZOO_MODELS = {
    "mt5-tiny": ("mt5-tiny", {}),
    "mt5-tiny-tied-gated-silu": ("mt5-tiny", {"ffn": {"type": "swiglu", "hidden": 96}, "head.tie_embeddings": True}),
}

PUBLISHED = {
    "mt5-small": (
        "MT5Config",
        {
            "_name_or_path": "/home/patrick/hugging_face/t5/mt5-small",
            "architectures": ["MT5ForConditionalGeneration"],
            "d_ff": 1024,
            "d_kv": 64,
            "d_model": 512,
            "decoder_start_token_id": 0,
            "dropout_rate": 0.1,
            "eos_token_id": 1,
            "feed_forward_proj": "gated-gelu",
            "initializer_factor": 1.0,
            "is_encoder_decoder": True,
            "layer_norm_epsilon": 1e-06,
            "model_type": "mt5",
            "num_decoder_layers": 8,
            "num_heads": 6,
            "num_layers": 8,
            "pad_token_id": 0,
            "relative_attention_num_buckets": 32,
            "tie_word_embeddings": False,
            "tokenizer_class": "T5Tokenizer",
            "transformers_version": "4.10.0.dev0",
            "use_cache": True,
            "vocab_size": 250112,
        },
    ),
}
