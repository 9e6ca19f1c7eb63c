"""mBART: pre-norm with both stack norms (on the embeddings and closing each stack), learned positions two rows on,
scaled embeddings, GELU, start token 2. Then unscaled ReLU, pad 3, no start token (decoding starts from the pad id),
a deeper decoder."""

from __future__ import annotations

KIND = "seq2seq"

CONFIGS = {"mbart": "MBartConfig"}

CASES = {
    "mbart-large-style": {
        "family": "mbart",
        "hf_class": "MBartForConditionalGeneration",
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
            scale_embedding=True,
            decoder_start_token_id=2,
        ),
    },
    "mbart-unscaled-relu-pad3-no-start": {
        "family": "mbart",
        "hf_class": "MBartForConditionalGeneration",
        "config": dict(
            vocab_size=80,
            d_model=48,
            encoder_layers=2,
            decoder_layers=3,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=80,
            decoder_ffn_dim=80,
            max_position_embeddings=40,
            activation_function="relu",
            pad_token_id=3,
        ),
    },
}

ZOO_MODELS = {
    "mbart-tiny": ("mbart-tiny", {}),
    "mbart-tiny-unscaled-relu-no-logits-bias": (
        "mbart-tiny",
        {"embedding.scale": False, "ffn.activation": "relu", "head.logits_bias": False},
    ),
}

PUBLISHED = {
    "mbart-large-50": (
        "MBartConfig",
        {
            "_name_or_path": "/home/suraj/projects/mbart-50/hf_models/mbart-50-large",
            "_num_labels": 3,
            "activation_dropout": 0.0,
            "activation_function": "gelu",
            "add_bias_logits": False,
            "add_final_layer_norm": True,
            "architectures": ["MBartForConditionalGeneration"],
            "attention_dropout": 0.0,
            "bos_token_id": 0,
            "classif_dropout": 0.0,
            "classifier_dropout": 0.0,
            "d_model": 1024,
            "decoder_attention_heads": 16,
            "decoder_ffn_dim": 4096,
            "decoder_layerdrop": 0.0,
            "decoder_layers": 12,
            "decoder_start_token_id": 2,
            "dropout": 0.1,
            "early_stopping": True,
            "encoder_attention_heads": 16,
            "encoder_ffn_dim": 4096,
            "encoder_layerdrop": 0.0,
            "encoder_layers": 12,
            "eos_token_id": 2,
            "forced_eos_token_id": 2,
            "gradient_checkpointing": False,
            "id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"},
            "init_std": 0.02,
            "is_encoder_decoder": True,
            "label2id": {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2},
            "max_length": 200,
            "max_position_embeddings": 1024,
            "model_type": "mbart",
            "normalize_before": True,
            "normalize_embedding": True,
            "num_beams": 5,
            "num_hidden_layers": 12,
            "output_past": True,
            "pad_token_id": 1,
            "scale_embedding": True,
            "static_position_embeddings": False,
            "tokenizer_class": "MBart50Tokenizer",
            "transformers_version": "4.4.0.dev0",
            "use_cache": True,
            "vocab_size": 250054,
        },
    ),
}
