"""Marian: post-norm with no stack norm, Marian's sinusoids (frozen parameters transformers does not save), scaled
embeddings, swish; the pad id (the vocabulary's last) starts decoding. Then unscaled GELU, pad 1, start 3, a
deeper encoder."""

from __future__ import annotations

KIND = "seq2seq"

CONFIGS = {"marian": "MarianConfig"}

CASES = {
    "opus-mt-style": {
        "family": "marian",
        "hf_class": "MarianMTModel",
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
            activation_function="swish",
            scale_embedding=True,
            pad_token_id=95,
            decoder_start_token_id=95,
        ),
    },
    "marian-unscaled-gelu-pad1-start3": {
        "family": "marian",
        "hf_class": "MarianMTModel",
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
            activation_function="gelu",
            pad_token_id=1,
            decoder_start_token_id=3,
        ),
    },
}

ZOO_MODELS = {
    "marian-tiny": ("marian-tiny", {}),
    "marian-tiny-unscaled-gelu": ("marian-tiny", {"embedding.scale": False, "ffn.activation": "gelu"}),
}

PUBLISHED = {
    "opus-mt-en-de": (
        "MarianConfig",
        {
            "_name_or_path": "/tmp/Helsinki-NLP/opus-mt-en-de",
            "_num_labels": 3,
            "activation_dropout": 0.0,
            "activation_function": "swish",
            "add_bias_logits": False,
            "add_final_layer_norm": False,
            "architectures": ["MarianMTModel"],
            "attention_dropout": 0.0,
            "bad_words_ids": [[58100]],
            "bos_token_id": 0,
            "classif_dropout": 0.0,
            "classifier_dropout": 0.0,
            "d_model": 512,
            "decoder_attention_heads": 8,
            "decoder_ffn_dim": 2048,
            "decoder_layerdrop": 0.0,
            "decoder_layers": 6,
            "decoder_start_token_id": 58100,
            "decoder_vocab_size": 58101,
            "dropout": 0.1,
            "encoder_attention_heads": 8,
            "encoder_ffn_dim": 2048,
            "encoder_layerdrop": 0.0,
            "encoder_layers": 6,
            "eos_token_id": 0,
            "forced_eos_token_id": 0,
            "gradient_checkpointing": False,
            "id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"},
            "init_std": 0.02,
            "is_encoder_decoder": True,
            "label2id": {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2},
            "max_length": 512,
            "max_position_embeddings": 512,
            "model_type": "marian",
            "normalize_before": False,
            "normalize_embedding": False,
            "num_beams": 4,
            "num_hidden_layers": 6,
            "pad_token_id": 58100,
            "scale_embedding": True,
            "share_encoder_decoder_embeddings": True,
            "static_position_embeddings": True,
            "transformers_version": "4.22.0.dev0",
            "use_cache": True,
            "vocab_size": 58101,
        },
    ),
}
