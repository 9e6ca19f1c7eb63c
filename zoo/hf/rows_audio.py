"""Rows of an audio encoder's front end (Whisper's): the log-mel convolutions and their sinusoidal table, read as
zoo's ``encoder_embedding: {type: audio}``, and the config keys of speech models that leave the network alone."""

from typing import Any

from .bart import fairseq_layers
from .mapping import Rule
from .rows_neox import linear_rules
from .table import Computed, Unread


def front_end_rules(prefix: str = "model.encoder.") -> tuple[Rule, ...]:
    """``conv1``, ``conv2`` (weights and biases) and the frozen ``embed_positions`` table of the encoder."""
    return (
        *linear_rules(prefix, "encoder.", "conv1 embedding.conv1", "conv2 embedding.conv2"),
        Rule(f"{prefix}embed_positions.weight", "encoder.embedding.position"),
    )


def keys_without_bias(rules: tuple[Rule, ...] = fairseq_layers()) -> tuple[Rule, ...]:
    """Fairseq-style block rows whose key projections have no bias (Whisper's ``k_proj``)."""
    return tuple(r for r in rules if not (isinstance(r.hf, str) and r.hf.endswith("k_proj.bias")))


def speech_rules() -> tuple[Rule, ...]:
    """A Whisper-style checkpoint: the decoder's token table and positions, the encoder's front end, fairseq blocks
    without key biases, and a final ``layer_norm`` per stack."""
    return (
        Rule("model.decoder.embed_tokens.weight", "embedding.token.weight"),
        Rule("model.decoder.embed_positions.weight", "decoder.positional.embedding.weight"),
        *front_end_rules(),
        *keys_without_bias(),
        *(r for s in ("encoder", "decoder") for r in linear_rules(f"model.{s}.", f"{s}.", "layer_norm final_norm")),
    )


def _read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    frames, mels = config["max_source_positions"], config["num_mel_bins"]
    return {"encoder_embedding": {"type": "audio", "num_mel_bins": mels, "frames": frames}}


def _write(recipe: Any, weights: Any) -> dict[str, Any]:
    audio = recipe.encoder_embedding
    return {"num_mel_bins": audio.num_mel_bins, "max_source_positions": audio.frames}


FRONT_END = Computed(
    "audio front end",
    keys={"num_mel_bins": 80, "max_source_positions": 1500},
    paths=("encoder_embedding",),
    read=_read,
    write=_write,
)
"""``num_mel_bins`` and ``max_source_positions``: the audio embedding's mel channels and position rows."""

SPEC_AUGMENT = tuple(
    Unread(key, "SpecAugment masks features in training only; inference is unaffected")
    for key in ("apply_spec_augment", "mask_time_prob", "mask_time_length", "mask_time_min_masks")
    + ("mask_feature_prob", "mask_feature_length", "mask_feature_min_masks")
)
GENERATION = tuple(
    Unread(key, "a generation setting (generation_config.json), not part of the network")
    for key in ("suppress_tokens", "begin_suppress_tokens", "median_filter_width")
)
UNREAD = (
    Unread("scale_embedding", "transformers' Whisper computes embed_scale and never applies it"),
    Unread("use_weighted_layer_sum", "WhisperForAudioClassification's pooling, a class zoo does not import"),
    Unread("classifier_proj_size", "WhisperForAudioClassification's head, a class zoo does not import"),
    *SPEC_AUGMENT,
    *GENERATION,
)
"""The speech config keys that leave the network as zoo builds it."""
