"""``zoo bench``: how fast a model prefills and decodes, per batch size and prompt length, beside its roofline.

Each cell of the grid generates ``new`` tokens greedily from random prompts (``zoo.generate``: the same code a
user's generation runs) and reports the time to the first token (TTFT: prefill and one sampled token), the time
per output token near the start and near the end of the decode (TPOT), the new tokens per second of all rows,
the prefill tokens per second and the cache memory. Beside the measured figures stand the limits of the device,
measured in the same run (:func:`measure_rates`):

- **decode** (one step at the end position): a step reads every weight and the whole cache, and multiplies
  every weight for each row, so it takes at least ``max(bytes / bandwidth, 2 · params · batch / matmul rate)``;
- **prefill**: at least the forward FLOPs of ``batch x prompt`` tokens (``zoo.analysis.flops``) over the matmul
  rate.

``efficiency`` is bound / measured: 1.0 would be a step at the hardware's limit. On a CPU, decoding a tiny model is
per-operation overhead, far from either bound; on a GPU a large model's decode should approach the bandwidth bound.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from zoo.errors import ArgumentError, TrainError

__all__ = ["BenchCell", "BenchReport", "DeviceRates", "bench", "measure_rates"]

MAX_BATCH = 4096
MAX_PROMPT = 1 << 20


@dataclass(frozen=True)
class DeviceRates:
    """What the device sustains, measured in this process."""

    device: str
    dtype: str
    bandwidth: float
    """Bytes per second of a large copy (read + write counted)."""
    matmul: float
    """FLOP/s of square matmuls in ``dtype``."""


def _timed(fn, *, device: torch.device, seconds: float) -> float:
    """The best time of one ``fn()`` over repeats filling about ``seconds``."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    fn()
    sync()
    best, spent = float("inf"), 0.0
    while spent < seconds:
        start = time.perf_counter()
        fn()
        sync()
        took = time.perf_counter() - start
        best, spent = min(best, took), spent + took
    return best


@torch.no_grad()
def measure_rates(
    device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32, *, seconds: float = 0.3
) -> DeviceRates:
    """The device's memory bandwidth (a copy of a buffer larger than the caches) and matmul rate (square
    matmuls in ``dtype``), each the best of repeats over about ``seconds``."""
    device = torch.device(device)
    elements = (256 << 20) // 4 if device.type == "cuda" else (64 << 20) // 4  # 256 / 64 MB of fp32
    src = torch.ones(elements, device=device)
    dst = torch.empty_like(src)
    copy = _timed(lambda: dst.copy_(src), device=device, seconds=seconds)
    n = 4096 if device.type == "cuda" else 1024
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    mm = _timed(lambda: a @ b, device=device, seconds=seconds)
    return DeviceRates(str(device), str(dtype).removeprefix("torch."), 2 * src.nbytes / copy, 2 * n**3 / mm)


@dataclass(frozen=True)
class BenchCell:
    """One batch size and prompt length: measured figures and the bounds beside them (seconds, bytes)."""

    batch: int
    prompt: int
    new: int
    ttft_s: float
    tpot_start_s: float
    start_position: int
    tpot_end_s: float
    end_position: int
    tokens_per_s: float
    """New tokens of all rows per second of the whole call."""
    prefill_tokens_per_s: float
    """Prompt tokens of all rows per second of the time to the first token."""
    cache_bytes: int
    decode_bound_s: float
    """The fastest a decode step at ``end_position`` could be on this device."""
    prefill_bound_s: float
    """The fastest the prefill could be on this device."""

    @property
    def decode_efficiency(self) -> float:
        return self.decode_bound_s / self.tpot_end_s if self.tpot_end_s > 0 else 0.0

    @property
    def prefill_efficiency(self) -> float:
        return self.prefill_bound_s / self.ttft_s if self.ttft_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "decode_efficiency": self.decode_efficiency,
            "prefill_efficiency": self.prefill_efficiency,
        }


@dataclass(frozen=True)
class BenchReport:
    model: str
    parameters: int
    weight_bytes: int
    rates: DeviceRates
    cells: list[BenchCell] = field(default_factory=list)
    compiled: bool = False
    """Decoded with the compiled step over a static cache."""
    kernel: str | None = None
    """The attention kernel decoding used, where one was named (None: the device's default)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "parameters": self.parameters,
            "weight_bytes": self.weight_bytes,
            "compiled": self.compiled,
            "kernel": self.kernel,
            "rates": asdict(self.rates),
            "cells": [c.to_dict() for c in self.cells],
        }


def _check_grid(batches: Sequence[int], prompts: Sequence[int], new: int) -> None:
    if not batches or not prompts:
        raise ArgumentError("give at least one batch size and one prompt length")
    for b in batches:
        if not 1 <= b <= MAX_BATCH:
            raise ArgumentError(f"batch size {b} is outside 1 .. {MAX_BATCH}")
    for p in prompts:
        if not 1 <= p <= MAX_PROMPT:
            raise ArgumentError(f"prompt length {p} is outside 1 .. {MAX_PROMPT}")
    if new < 2:
        raise ArgumentError(f"--new is {new}: at least 2 new tokens are needed to time a decode step")


def _weights(model: nn.Module) -> tuple[int, int]:
    """(parameters, bytes) of every stored tensor once (a tied head is its embedding)."""
    seen: dict[int, torch.Tensor] = {}
    for p in model.parameters():
        seen.setdefault(id(p), p)
    return sum(p.numel() for p in seen.values()), sum(p.nbytes for p in seen.values())


@torch.no_grad()
def bench(
    model: nn.Module,
    *,
    batches: Sequence[int] = (1,),
    prompts: Sequence[int] = (128,),
    new: int = 128,
    rates: DeviceRates | None = None,
    seed: int = 0,
    compile: bool | str = False,
    kernel: str | None = None,
) -> BenchReport:
    """Time greedy generation of ``new`` tokens from random prompts for every (batch, prompt length) of the grid.

    ``compile`` decodes with the compiled step over a static cache (see ``zoo.generate.generate``); each cell's
    warm-up call pays its compilation, so the timed call does not. ``kernel`` names the attention kernel to decode
    with (default: the model's own, the CPU backend's on the CPU).

    Raises:
        ArgumentError: an empty grid, a batch size or prompt length out of range, fewer than 2 new tokens.
        TrainError: a prompt and its new tokens that do not fit the model's positions, or a model that does
            not generate.
    """
    from zoo.generate import generate
    from zoo.recipe import position_limit

    _check_grid(batches, prompts, new)
    if kernel is not None:
        from zoo.builder import resolve_kernel

        resolve_kernel(kernel)  # an unknown name is refused before any timing
    if not hasattr(model, "new_cache"):
        raise TrainError(f"{type(model).__name__} does not generate: zoo bench times decoders and encoder-decoders")
    recipe = getattr(model, "recipe", None)
    limit = position_limit(recipe) if recipe is not None else None
    if limit is not None and max(prompts) + new > limit:
        raise TrainError(
            f"a prompt of {max(prompts)} and {new} new tokens make {max(prompts) + new} positions; "
            f"'{recipe.name}' has {limit} (lower --prompt or --new, or raise max_len with --set max_len=...)"
        )
    param = next(model.parameters())
    if rates is None:
        rates = measure_rates(param.device, param.dtype)
    from zoo.analysis.flops import flop_estimate
    from zoo.analysis.parts import model_parts

    parameters, weight_bytes = _weights(model)
    parts = model_parts(model)  # the components' declared costs, read once for every cell's prefill FLOPs
    vocab = recipe.vocab_size if recipe is not None else model.config.vocab_size
    g = torch.Generator().manual_seed(seed)
    cells = []
    for p in prompts:
        for b in batches:
            ids = torch.randint(1, vocab, (b, p), generator=g).tolist()
            # Warm-up: the first calls of each shape; compiled, the compilation (its cache is sized by ``new``)
            # and the first run of the compiled code.
            for _ in range(2 if compile else 1):
                generate(model, ids, max_new_tokens=new if compile else 2, compile=compile, kernel=kernel)
            st = generate(model, ids, max_new_tokens=new, compile=compile, kernel=kernel).stats
            step_bytes = weight_bytes + st.cache_bytes  # near the end the cache is (nearly) all read each step
            decode_bound = max(step_bytes / rates.bandwidth, 2 * parameters * b / rates.matmul)
            cells.append(
                BenchCell(
                    batch=b,
                    prompt=p,
                    new=st.new_tokens,
                    ttft_s=st.ttft_s,
                    tpot_start_s=st.tpot_start_s,
                    start_position=st.start_position,
                    tpot_end_s=st.tpot_end_s,
                    end_position=st.end_position,
                    tokens_per_s=st.tokens_per_s,
                    prefill_tokens_per_s=b * p / st.ttft_s if st.ttft_s > 0 else 0.0,
                    cache_bytes=st.cache_bytes,
                    decode_bound_s=decode_bound,
                    prefill_bound_s=flop_estimate(parts, seq_len=p, batch=b).forward_per_batch / rates.matmul,
                )
            )
    name = recipe.name if recipe is not None else type(model).__name__
    return BenchReport(name, parameters, weight_bytes, rates, cells, compiled=compile is not False, kernel=kernel)
