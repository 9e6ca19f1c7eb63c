"""The CPU decoding backend: how ``generate`` runs a model on the CPU, chosen outside the model.

Three changes for the length of one call, each giving the same results as the model as built:

- the attention kernel ``cpu_decode`` (``zoo.components.kernels``): a masked single-query step written out;
- wide products with a few rows (:func:`few_row_products`): a vocabulary projection of 3-64 rows computed as
  ``(W @ h.T).T``;
- the decode layout (:func:`gemv_layout`): 1-2 rows decoding 64+ steps read wide weights stored column-major.

Each is measured against the plain computation on this CPU's MKL (the figures are in the docstrings) and
applies only to fp32 weights on the CPU, plain ``nn.Linear`` modules with plain (not sharded) parameters.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from zoo.components.kernels import Kernel, cpu_decode, use_kernel

GEMV_LAYOUT_MAX_ROWS, GEMV_LAYOUT_MIN_STEPS = 2, 64  # see gemv_layout
FEW_ROWS = (3, 64)
"""Rows (inclusive) for which a wide product is computed transposed (see :func:`few_row_products`)."""
WIDE = 8
"""A weight is wide when it has at least this many times more outputs than inputs (a vocabulary projection)."""


def _plain_cpu_fp32(m: nn.Module) -> bool:
    w = getattr(m, "weight", None)
    return (
        type(m) is nn.Linear  # not an adapter's or another subclass's forward
        and type(w) is nn.Parameter
        and type(w.data) is torch.Tensor  # not a sharded (DTensor) or other subclass weight
        and w.device.type == "cpu"
        and w.dtype == torch.float32
    )


class _FewRowProduct:
    """A wide ``nn.Linear``'s forward for the call: ``(W @ h.T).T`` for 3-64 rows without autograd.

    On this CPU, MKL's GEMM with few rows against a wide matrix is slow, and this form was measured 1.3-4.7x
    faster (8192x256 to 50257x768; at 32 rows of 8192x256, 5.0 -> 2.2 ms). It is the same product summed in
    another order; the logits come back as a transposed view, which a sampler's softmax or argmax reads more
    slowly: at 128 rows that costs what the product saves. Set as the instance's ``forward``, so the module's
    hooks still see the call (torchinfo's summary)."""

    def __init__(self, linear: nn.Linear) -> None:
        self.linear = linear

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        w, b = self.linear.weight, self.linear.bias
        rows = h.numel() // h.shape[-1] if h.shape[-1] else 0
        if not FEW_ROWS[0] <= rows <= FEW_ROWS[1] or torch.is_grad_enabled():
            return F.linear(h, w, b)
        flat = h.reshape(rows, h.shape[-1]).t()
        out = torch.mm(w, flat) if b is None else torch.addmm(b[:, None], w, flat)  # (V, rows)
        return out.t().reshape(*h.shape[:-1], w.shape[0])


@contextmanager
def few_row_products(model: nn.Module) -> Iterator[None]:
    """Within the block, the wide fp32 CPU linears of ``model`` (at least ``WIDE`` times more outputs than inputs:
    a vocabulary) compute 3-64 rows without autograd as ``(W @ h.T).T`` (:class:`_FewRowProduct`)."""
    wide = [
        m
        for m in model.modules()
        if _plain_cpu_fp32(m) and m.out_features >= WIDE * m.in_features and "forward" not in m.__dict__
    ]
    for m in wide:
        m.forward = _FewRowProduct(m)
    try:
        yield
    finally:
        for m in wide:
            del m.__dict__["forward"]


@contextmanager
def gemv_layout(model: nn.Module, rows: int, steps: int) -> Iterator[None]:
    """Within the block, fp32 CPU linear weights with more outputs than inputs are stored column-major, when
    ``rows`` sequences (at most 2) decode for ``steps`` (at least 64) steps.

    A decode step multiplies each weight by one row per sequence; on the CPU that is a GEMV, which streams
    along the weight's contiguous dimension, so stored along its longer one it runs 1.1-2.7x faster at 1 or 2
    rows (measured with MKL from 256x768 to 1024x32000), and 0.7-1.1x at 4 rows or more, a prefill's GEMM
    included. The transposing copies (both ways, about 1 GB/s) pay for themselves after some 20 steps. The
    values are the same, so are the results; the weights get their layout back on leaving and keep their
    identity, so optimizers and ties are untouched.
    """
    moved: list[nn.Parameter] = []
    if rows <= GEMV_LAYOUT_MAX_ROWS and steps >= GEMV_LAYOUT_MIN_STEPS:
        with torch.inference_mode(False):  # the new storage must not be an inference tensor
            for m in model.modules():
                if (
                    isinstance(m, nn.Linear)
                    and type(m.weight) is nn.Parameter
                    and type(m.weight.data) is torch.Tensor  # not a sharded (DTensor) or other subclass weight
                    and m.weight.device.type == "cpu"
                    and m.weight.dtype == torch.float32
                    and m.out_features > m.in_features
                    and m.weight.is_contiguous()
                    and all(m.weight is not seen for seen in moved)  # a tied weight once
                ):
                    m.weight.data = m.weight.data.t().contiguous().t()
                    moved.append(m.weight)
    try:
        yield
    finally:
        with torch.inference_mode(False):
            for w in moved:
                w.data = w.data.contiguous()


@contextmanager
def cpu_decoding(model: nn.Module, rows: int, steps: int, kernel: Kernel | None = None) -> Iterator[None]:
    """Within the block, ``model`` decodes as the CPU runs it fastest: ``kernel`` (default ``cpu_decode``), the
    few-row wide products and, for ``rows`` sequences decoding ``steps`` steps, the decode layout."""
    with use_kernel(model, kernel or cpu_decode), few_row_products(model), gemv_layout(model, rows, steps):
        yield
