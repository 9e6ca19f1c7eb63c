"""Memory a model needs: weights, optimizer state, KV cache and activations, from the components' declared costs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .parts import Part

__all__ = [
    "ACTIVATION_FORMULA",
    "ADAMW_NOTE",
    "KV_CACHE_FORMULA",
    "MemoryEstimate",
    "memory_estimate",
]

from zoo.dtypes import bytes_per_element  # noqa: E402 (the one dtype table)

WEIGHT_BYTES = {name: bytes_per_element(name) for name in ("fp32", "bf16", "fp8")}
KV_BYTES = 2  # bf16 cache
ACTIVATION_BYTES = 2  # bf16 activations

ADAMW_NOTE = (
    "AdamW keeps 2 fp32 moments per parameter (8 B); bf16 mixed-precision training adds an fp32 master copy "
    "(12 B). Training totals add the weights and their gradients: fp32 4 + 4 + 8 = 16 B/param, "
    "bf16 mixed 2 + 2 + 12 = 16 B/param."
)
KV_CACHE_FORMULA = (
    "2 (K and V) · Σ_causal self-attention layers num_kv_heads · head_dim · 2 B (bf16) per token (a sliding "
    "window caps the tokens held); encoder-decoders also cache cross-attention K/V once per source token"
)
ACTIVATION_FORMULA = (
    "2 B (bf16) · batch · seq_len · Σ_components the tensors each keeps for backward, per token: "
    "norm E; attention E + 2·H·D + 2·Hkv·D (input, q, k, v, output); MLP E + 2·hidden; gated FFN E + 4·hidden; "
    "MoE E + num_experts + top_k experts'; LM head E + V (logits). Fused attention (no L×L scores kept), "
    "no dropout masks, no recomputation"
)


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes, for ``parameters`` parameters at ``batch`` x ``seq_len`` tokens."""

    parameters: int
    batch: int
    seq_len: int
    max_len: int | None
    kv_bytes_per_token: int | None
    """None for models without a causal stack (nothing to cache)."""
    kv_bytes_at_max_len: int | None
    """One sequence of ``max_len`` tokens (a sliding-window layer holds at most its window)."""
    kv_bytes_for_batch: int | None
    """``batch`` sequences of ``seq_len`` tokens."""
    cross_kv_bytes_per_source_token: int | None
    activation_bytes: int
    state_bytes_per_sequence: int | None = None
    """Fixed-size decoding state (recurrent mixers) of one sequence, whatever its length; None if there is none."""

    @property
    def weights(self) -> dict[str, int]:
        return {name: self.parameters * size for name, size in WEIGHT_BYTES.items()}

    @property
    def adamw_state(self) -> dict[str, int]:
        return {"fp32": 8 * self.parameters, "bf16_mixed": 12 * self.parameters}

    @property
    def training(self) -> dict[str, int]:
        """Weights + gradients + AdamW state (activations not included)."""
        return {"fp32": (4 + 4 + 8) * self.parameters, "bf16_mixed": (2 + 2 + 12) * self.parameters}

    def to_dict(self) -> dict[str, Any]:
        return {
            "weights": self.weights,
            "adamw_state": self.adamw_state,
            "training": self.training,
            "adamw_note": ADAMW_NOTE,
            "kv_cache": {
                "dtype": "bfloat16",
                "bytes_per_token": self.kv_bytes_per_token,
                "bytes_at_max_len": self.kv_bytes_at_max_len,
                "max_len": self.max_len,
                "bytes_for_batch": self.kv_bytes_for_batch,
                "cross_bytes_per_source_token": self.cross_kv_bytes_per_source_token,
                "state_bytes_per_sequence": self.state_bytes_per_sequence,
                "formula": KV_CACHE_FORMULA,
            },
            "activations": {
                "bytes": self.activation_bytes,
                "batch": self.batch,
                "seq_len": self.seq_len,
                "formula": ACTIVATION_FORMULA,
            },
        }


def memory_estimate(
    plan: Iterable[Part], *, parameters: int, batch: int, seq_len: int, max_len: int | None
) -> MemoryEstimate:
    """Memory of the planned model holding ``parameters`` parameters (the true count, tied weights once)."""
    plan = [p for p in plan if p.cost is not None]
    cached = [p for p in plan if p.causal and not p.cross]

    def kv_bytes(length: int) -> int | None:
        if not cached:
            return None
        return sum(p.cost.cached_per_token * KV_BYTES * min(length, p.cost.window or length) for p in cached)

    cross = [p.cost.cached_per_token * KV_BYTES for p in plan if p.cross]
    state = sum(p.cost.state * KV_BYTES for p in cached)
    acts_per_token = sum(p.cost.acts for p in plan if not p.cost.per_sequence and p.tokens is None)
    acts_per_sequence = sum(p.cost.acts * p.tokens for p in plan if not p.cost.per_sequence and p.tokens is not None)
    return MemoryEstimate(
        parameters=parameters,
        batch=batch,
        seq_len=seq_len,
        max_len=max_len,
        kv_bytes_per_token=kv_bytes(1),
        kv_bytes_at_max_len=kv_bytes(max_len) if max_len else None,
        kv_bytes_for_batch=None if not cached else batch * kv_bytes(seq_len),
        cross_kv_bytes_per_source_token=sum(cross) if cross else None,
        activation_bytes=ACTIVATION_BYTES * batch * (seq_len * acts_per_token + acts_per_sequence),
        state_bytes_per_sequence=state or None,
    )
