"""BART: post-norm encoder-decoder with learned positions two rows on, a LayerNorm on each stack's embeddings, a
tied head with final_logits_bias; scaled embeddings, ReLU, a pad id of 0 and a decoder start token of 3."""

from __future__ import annotations

KIND = "seq2seq"

CONFIGS = {"bart": "BartConfig"}

CASES = {
    "bart-base-style": {
        "family": "bart",
        "hf_class": "BartForConditionalGeneration",
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
    "bart-scaled-relu-pad0-start3": {
        "family": "bart",
        "hf_class": "BartForConditionalGeneration",
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
            scale_embedding=True,
            activation_function="relu",
            pad_token_id=0,
            bos_token_id=4,
            eos_token_id=5,
            decoder_start_token_id=3,
        ),
    },
}

ZOO_MODELS = {
    "bart-tiny": ("bart-tiny", {}),
    "bart-tiny-scaled-relu-no-logits-bias": (
        "bart-tiny",
        {"embedding.scale": True, "ffn.activation": "relu", "head.logits_bias": False, "decoder_start_token_id": 1},
    ),
}

PUBLISHED = {
    "bart-base": (
        "BartConfig",
        {
            "_name_or_path": "bart-base",
            "activation_dropout": 0.1,
            "activation_function": "gelu",
            "add_bias_logits": False,
            "add_final_layer_norm": False,
            "architectures": ["BartModel"],
            "attention_dropout": 0.1,
            "bos_token_id": 0,
            "classif_dropout": 0.1,
            "classifier_dropout": 0.0,
            "d_model": 768,
            "decoder_attention_heads": 12,
            "decoder_ffn_dim": 3072,
            "decoder_layerdrop": 0.0,
            "decoder_layers": 6,
            "decoder_start_token_id": 2,
            "dropout": 0.1,
            "early_stopping": True,
            "encoder_attention_heads": 12,
            "encoder_ffn_dim": 3072,
            "encoder_layerdrop": 0.0,
            "encoder_layers": 6,
            "eos_token_id": 2,
            "forced_bos_token_id": 0,
            "forced_eos_token_id": 2,
            "gradient_checkpointing": False,
            "id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"},
            "init_std": 0.02,
            "is_encoder_decoder": True,
            "label2id": {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2},
            "max_position_embeddings": 1024,
            "model_type": "bart",
            "no_repeat_ngram_size": 3,
            "normalize_before": False,
            "normalize_embedding": True,
            "num_beams": 4,
            "num_hidden_layers": 6,
            "pad_token_id": 1,
            "scale_embedding": False,
            "torch_dtype": "float32",
            "transformers_version": "4.12.0.dev0",
            "use_cache": True,
            "vocab_size": 50265,
        },
    ),
}
