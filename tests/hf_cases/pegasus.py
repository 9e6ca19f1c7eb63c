"""Pegasus: pre-norm with a final LayerNorm per stack, Marian's sinusoids saved in the checkpoint, scaled
embeddings, ReLU, the pad id (0) starts decoding. Then unscaled GELU, pad 2, start 3, a deeper decoder."""

from __future__ import annotations

KIND = "seq2seq"

CONFIGS = {"pegasus": "PegasusConfig"}

CASES = {
    "pegasus-large-style": {
        "family": "pegasus",
        "hf_class": "PegasusForConditionalGeneration",
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
            activation_function="relu",
            scale_embedding=True,
        ),
    },
    "pegasus-unscaled-gelu-pad2-start3": {
        "family": "pegasus",
        "hf_class": "PegasusForConditionalGeneration",
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
            activation_function="gelu",
            pad_token_id=2,
            decoder_start_token_id=3,
        ),
    },
}

ZOO_MODELS = {
    "pegasus-tiny": ("pegasus-tiny", {}),
    "pegasus-tiny-unscaled-gelu": ("pegasus-tiny", {"embedding.scale": False, "ffn.activation": "gelu"}),
}

PUBLISHED = {
    "pegasus-large": (
        "PegasusConfig",
        {
            "activation_dropout": 0.1,
            "activation_function": "relu",
            "add_bias_logits": False,
            "add_final_layer_norm": True,
            "architectures": ["PegasusForConditionalGeneration"],
            "attention_dropout": 0.1,
            "bos_token_id": 0,
            "classif_dropout": 0.0,
            "d_model": 1024,
            "decoder_attention_heads": 16,
            "decoder_ffn_dim": 4096,
            "decoder_layerdrop": 0.0,
            "decoder_layers": 16,
            "decoder_start_token_id": 0,
            "dropout": 0.1,
            "encoder_attention_heads": 16,
            "encoder_ffn_dim": 4096,
            "encoder_layerdrop": 0.0,
            "encoder_layers": 16,
            "eos_token_id": 1,
            "extra_pos_embeddings": 1,
            "force_bos_token_to_be_generated": False,
            "id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"},
            "init_std": 0.02,
            "is_encoder_decoder": True,
            "label2id": {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2},
            "length_penalty": 0.8,
            "max_length": 256,
            "max_position_embeddings": 1024,
            "model_type": "pegasus",
            "normalize_before": True,
            "normalize_embedding": False,
            "num_beams": 8,
            "num_hidden_layers": 16,
            "pad_token_id": 0,
            "scale_embedding": True,
            "static_position_embeddings": True,
            "vocab_size": 96103,
        },
    ),
}
