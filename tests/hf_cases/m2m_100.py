"""M2M-100: pre-norm encoder-decoder, fairseq sinusoids numbered past the padding (the pad id occurs among the
random tokens, so numbering skips it), scaled embeddings; unscaled GELU with a pad id of 3 and a start token of 5."""

from __future__ import annotations

KIND = "seq2seq"

CONFIGS = {"m2m_100": "M2M100Config"}

CASES = {
    "m2m100-418m-style": {
        "family": "m2m_100",
        "hf_class": "M2M100ForConditionalGeneration",
        "config": dict(
            vocab_size=96,
            d_model=32,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            max_position_embeddings=64,
        ),
    },
    "m2m100-unscaled-gelu-pad3-start5": {
        "family": "m2m_100",
        "hf_class": "M2M100ForConditionalGeneration",
        "config": dict(
            vocab_size=80,
            d_model=48,
            encoder_layers=3,
            decoder_layers=2,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=80,
            decoder_ffn_dim=80,
            max_position_embeddings=40,
            scale_embedding=False,
            activation_function="gelu",
            pad_token_id=3,
            decoder_start_token_id=5,
        ),
    },
}

ZOO_MODELS = {
    "m2m100-tiny": ("m2m100-tiny", {}),
    "m2m100-tiny-unscaled-gelu-pad1": (
        "m2m100-tiny",
        {
            "pad_token_id": 1,
            "embedding.padding_idx": 1,
            "embedding.scale": False,
            "positional": {"type": "sinusoidal", "layout": "fairseq", "offset": 2, "padding_idx": 1},
            "ffn.activation": "gelu",
        },
    ),
}

PUBLISHED = {
    "m2m100-418m": (
        "M2M100Config",
        {
            "_name_or_path": "hf_models/m2m100_418M",
            "activation_dropout": 0.0,
            "activation_function": "relu",
            "architectures": ["M2M100ForConditionalGeneration"],
            "attention_dropout": 0.1,
            "bos_token_id": 0,
            "d_model": 1024,
            "decoder_attention_heads": 16,
            "decoder_ffn_dim": 4096,
            "decoder_layerdrop": 0.05,
            "decoder_layers": 12,
            "decoder_start_token_id": 2,
            "dropout": 0.1,
            "early_stopping": True,
            "encoder_attention_heads": 16,
            "encoder_ffn_dim": 4096,
            "encoder_layerdrop": 0.05,
            "encoder_layers": 12,
            "eos_token_id": 2,
            "gradient_checkpointing": False,
            "init_std": 0.02,
            "is_encoder_decoder": True,
            "max_length": 200,
            "model_type": "m2m_100",
            "num_beams": 5,
            "num_hidden_layers": 12,
            "pad_token_id": 1,
            "scale_embedding": True,
            "transformers_version": "4.4.0.dev0",
            "use_cache": True,
            "vocab_size": 128112,
        },
    ),
}
