"""LED: BART whose encoder attends as Longformer. A window of 8 in one layer and 4 in the other (the 12-token
source is no multiple of 8: transformers pads it to 16), GELU, start token 2. Then three windows (4, 8, 4), ReLU,
pad 0, start 3, a deeper encoder, a decoder table shorter than the encoder's, and BART's ``scale_embedding``, which
LED's code never reads (nor does zoo's import).

transformers takes the global tokens per call: ``HF_INPUTS`` gives it the ``global_attention_mask`` of zoo's
model, the first ``global_tokens`` tokens (the import's: the first, ``<s>``; none for a recipe with 0)."""

from __future__ import annotations

from typing import Any

import torch

KIND = "seq2seq"

CONFIGS = {"led": "LEDConfig"}


def global_attention_mask(model: Any, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """transformers' ``global_attention_mask`` for zoo's ``model`` on source ``ids`` (N, S): its encoder's global
    tokens; nothing where it has none (transformers' default)."""
    tokens = max(block.attention.global_tokens for block in model.encoder.blocks)
    if not tokens:
        return {}
    mask = torch.zeros_like(ids)
    mask[:, :tokens] = 1
    return {"global_attention_mask": mask}


HF_INPUTS = {"led": global_attention_mask}

CASES = {
    "led-base-style-windows-8-4": {
        "family": "led",
        "hf_class": "LEDForConditionalGeneration",
        "config": dict(
            vocab_size=96,
            d_model=32,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            max_encoder_position_embeddings=64,
            max_decoder_position_embeddings=32,
            attention_window=[8, 4],
        ),
    },
    "led-three-windows-scaled-relu-pad0-start3": {
        "family": "led",
        "hf_class": "LEDForConditionalGeneration",
        "config": dict(
            vocab_size=80,
            d_model=48,
            encoder_layers=3,
            decoder_layers=2,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=80,
            decoder_ffn_dim=80,
            max_encoder_position_embeddings=40,
            max_decoder_position_embeddings=24,
            attention_window=[4, 8, 4],
            scale_embedding=True,
            activation_function="relu",
            pad_token_id=0,
            bos_token_id=4,
            eos_token_id=5,
            decoder_start_token_id=3,
        ),
    },
}

NO_GLOBAL_TOKENS = [
    {"select": i, "stack": "encoder", "attention": {"type": "longformer", "num_heads": 4, "window": w}}
    for i, w in enumerate((8, 4))
]

ZOO_MODELS = {
    "led-tiny": ("led-tiny", {}),
    "led-tiny-no-global-tokens-relu-no-logits-bias": (
        "led-tiny",
        {"layers": NO_GLOBAL_TOKENS, "ffn.activation": "relu", "head.logits_bias": False},
    ),
}

PUBLISHED = {
    "led-base-16384": (
        "LEDConfig",
        {
            "_name_or_path": "./",
            "activation_dropout": 0.0,
            "activation_function": "gelu",
            "architectures": ["LEDForConditionalGeneration"],
            "attention_dropout": 0.0,
            "attention_window": [1024, 1024, 1024, 1024, 1024, 1024],
            "bos_token_id": 0,
            "classif_dropout": 0.0,
            "classifier_dropout": 0.0,
            "d_model": 768,
            "decoder_attention_heads": 12,
            "decoder_ffn_dim": 3072,
            "decoder_layerdrop": 0.0,
            "decoder_layers": 6,
            "decoder_start_token_id": 2,
            "dropout": 0.1,
            "encoder_attention_heads": 12,
            "encoder_ffn_dim": 3072,
            "encoder_layerdrop": 0.0,
            "encoder_layers": 6,
            "eos_token_id": 2,
            "gradient_checkpointing": False,
            "id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"},
            "init_std": 0.02,
            "is_encoder_decoder": True,
            "label2id": {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2},
            "max_decoder_position_embeddings": 1024,
            "max_encoder_position_embeddings": 16384,
            "model_type": "led",
            "num_hidden_layers": 6,
            "pad_token_id": 1,
            "transformers_version": "4.2.0.dev0",
            "use_cache": True,
            "vocab_size": 50265,
        },
    ),
}
