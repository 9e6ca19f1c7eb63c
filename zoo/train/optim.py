"""The optimizer's side of a training step: AdamW parameter groups, the warmup-then-cosine learning-rate
schedule, and the autocast dtype a precision setting gives."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from zoo.dtypes import parse_dtype


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of a precision setting (None: plain fp32)."""
    if precision == "auto":
        if device.type != "cuda":
            return None
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    dtype = parse_dtype(precision)  # fp32, bf16, fp16: names of zoo.dtypes' table
    return None if dtype == torch.float32 else dtype


def autocast(device_type: str, dtype: torch.dtype, checkpointing: str = "none") -> torch.autocast:
    """Autocast to ``dtype``. With activation checkpointing, without autocast's cache of weight casts: the
    cache keeps a low-precision copy of every weight until the forward ends (2 bytes per parameter in bf16),
    which checkpointed blocks would otherwise not keep; without checkpointing the backward keeps those
    copies anyway, and the cache saves casting a weight twice."""
    return torch.autocast(device_type, dtype=dtype, cache_enabled=checkpointing == "none")


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups: decay the weights of Linear and Conv layers only; never norms, biases, embeddings.

    A tied LM head shares the embedding table, which therefore stays undecayed.
    """
    embedding_ids = {id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()}
    decay_ids = {
        id(m.weight)
        for m in model.modules()
        if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)) and id(m.weight) not in embedding_ids
    }
    decay = [p for p in model.parameters() if id(p) in decay_ids]
    rest = [p for p in model.parameters() if id(p) not in decay_ids]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def lr_factor(step: int, *, warmup: int, total: int, min_ratio: float) -> float:
    """Learning rate / peak for optimizer step ``step`` (0-based): linear warmup, then cosine to min_ratio."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
