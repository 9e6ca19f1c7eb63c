"""Whisper: log-mel frames into a pre-norm encoder-decoder. The published layout at a tiny size; then eight mel
channels, a deeper decoder, pad and start ids of its own and ReLU."""

from __future__ import annotations

KIND = "speech"

CONFIGS = {"whisper": "WhisperConfig"}

CASES = {
    "whisper-tiny-style": {
        "family": "whisper",
        "hf_class": "WhisperForConditionalGeneration",
        "config": dict(
            vocab_size=96,
            d_model=32,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            num_mel_bins=16,
            max_source_positions=12,
            max_target_positions=40,
            pad_token_id=95,
            bos_token_id=95,
            eos_token_id=95,
            decoder_start_token_id=94,
        ),
    },
    "whisper-8-mels-deep-decoder-relu": {
        "family": "whisper",
        "hf_class": "WhisperForConditionalGeneration",
        "config": dict(
            vocab_size=70,
            d_model=48,
            encoder_layers=1,
            decoder_layers=3,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=40,
            decoder_ffn_dim=40,
            num_mel_bins=8,
            max_source_positions=7,
            max_target_positions=30,
            activation_function="relu",
            pad_token_id=3,
            bos_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=4,
            scale_embedding=True,
        ),
    },
}


def _published(d_model: int, layers: int, heads: int, ffn: int) -> dict:
    """openai/whisper-tiny's and -base's config.json, which differ only in these sizes."""
    return {
        "activation_dropout": 0.0,
        "activation_function": "gelu",
        "architectures": ["WhisperForConditionalGeneration"],
        "attention_dropout": 0.0,
        "begin_suppress_tokens": [220, 50257],
        "bos_token_id": 50257,
        "d_model": d_model,
        "decoder_attention_heads": heads,
        "decoder_ffn_dim": ffn,
        "decoder_layerdrop": 0.0,
        "decoder_layers": layers,
        "decoder_start_token_id": 50258,
        "dropout": 0.0,
        "encoder_attention_heads": heads,
        "encoder_ffn_dim": ffn,
        "encoder_layerdrop": 0.0,
        "encoder_layers": layers,
        "eos_token_id": 50257,
        "init_std": 0.02,
        "is_encoder_decoder": True,
        "max_length": 448,
        "max_source_positions": 1500,
        "max_target_positions": 448,
        "model_type": "whisper",
        "num_hidden_layers": layers,
        "num_mel_bins": 80,
        "pad_token_id": 50257,
        "scale_embedding": False,
        "torch_dtype": "float32",
        "use_cache": True,
        "vocab_size": 51865,
    }


PUBLISHED = {
    "whisper-tiny": ("WhisperConfig", _published(384, 4, 6, 1536)),
    "whisper-base": ("WhisperConfig", _published(512, 6, 8, 2048)),
}
