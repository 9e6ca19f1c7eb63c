r"""Attention kernels: the function that turns queries, keys and values into attention outputs.

A kernel is a registered kind like any other component, so a plugin can add one (a fused GPU kernel) through
``register_components``. Every attention calls its ``kernel`` attribute with one signature::

    kernel(q, k, v, *, mask=None, bias=None, causal=False, scale=None, softcap=None, dropout_p=0.0) -> out

    q (N, H, L, D)     k, v (N, Hkv, S, D)     H a multiple of Hkv: a K/V head serves H // Hkv query heads
    mask  bool, True = may attend, broadcastable to (N, H, L, S)
    bias  float score bias broadcastable to (N, H, L, S), added before the softmax (ALiBi, T5 buckets)
    causal  with no mask, query i sees keys up to S - L + i (the queries are the last L of the S keys)
    out (N, H, L, D); a query row with nothing to attend gives zeros, never NaN

The kernel is chosen when the model is built (``zoo.build(..., kernel="eager")``) or for a call of
``zoo.generate.generate(..., kernel=...)``, never by a device or shape test inside a model's ``forward``:

    sdpa            torch's scaled_dot_product_attention (the default)
    eager           the reference math, written out; what every other kernel is tested against
    cpu_decode      sdpa, but a masked single-query step (decoding a padded batch) written out, which
                    the CPU runs faster; generate() uses it on the CPU
    flex_attention  torch's flex_attention, with the mask and bias as a score modification

Shapes: N batch, H query heads, Hkv key/value heads, L queries, S keys, D head_dim.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ClassVar, Literal, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from zoo.config import ComponentConfig
from zoo.hookspecs import hookimpl

__all__ = [
    "Kernel",
    "KernelConfig",
    "causal_mask",
    "cpu_decode",
    "eager",
    "flex_attention",
    "sdpa",
    "set_kernel",
    "use_kernel",
]


class Kernel(Protocol):
    """What an attention calls: see the module docstring for the shapes."""

    def __call__(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        *,
        mask: torch.Tensor | None = None,
        bias: torch.Tensor | None = None,
        causal: bool = False,
        scale: float | None = None,
        softcap: float | None = None,
        dropout_p: float = 0.0,
    ) -> torch.Tensor: ...


def causal_mask(query_len: int, key_len: int, device: torch.device | None = None) -> torch.Tensor:
    """``(L, S)`` boolean mask, True where a query may see a key; the last query sees every key."""
    return torch.ones(query_len, key_len, dtype=torch.bool, device=device).tril(key_len - query_len)


def _resolve_causal(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, causal: bool, spell_out: bool):
    """``(mask, causal)`` as a kernel applies them: one query (the newest position) sees every key, and where the
    fused causal flag cannot serve (``spell_out``, or queries that are not all the keys) the mask is spelled out."""
    query_len, key_len = q.size(-2), k.size(-2)
    if not causal or mask is not None or query_len == 1:
        return mask, False
    if spell_out or query_len != key_len:  # SDPA's is_causal aligns the diagonal top-left
        return causal_mask(query_len, key_len, q.device), False
    return None, True


def eager(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
    softcap: float | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """The reference math, written out (soft-capped scores, the softmax in fp32).

    Scores are (N, Hkv, G, L, S), the K/V heads not repeated; a ``softcap`` caps them before bias and mask
    (Gemma 2)."""
    mask, _ = _resolve_causal(q, k, mask, causal, spell_out=True)
    n, h, L, d = q.shape
    hkv, S = k.size(1), k.size(2)
    scale = d**-0.5 if scale is None else scale
    scores = q.view(n, hkv, h // hkv, L, d) @ k.unsqueeze(2).transpose(-2, -1) * scale  # (N, Hkv, G, L, S)
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)
    scores = scores.view(n, h, L, S)  # (N, H, L, S)
    if bias is not None:
        scores = scores + bias.to(scores.dtype)
    keep = None
    if mask is not None:
        keep = mask.any(-1, keepdim=True)  # (..., L, 1): a row that sees nothing gives zeros, not NaN
        scores = scores.masked_fill(~(mask | ~keep), float("-inf"))
    weights = scores.float().softmax(-1).to(q.dtype)
    if dropout_p > 0:
        weights = F.dropout(weights, dropout_p)
    out = (weights.view(n, hkv, h // hkv, L, S) @ v.unsqueeze(2)).view(n, h, L, v.size(-1))  # (N, H, L, Dv)
    return out if keep is None else out * keep


def sdpa(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
    softcap: float | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """torch's scaled_dot_product_attention, K/V heads not repeated (the default kernel).

    No fused kernel takes a score soft-cap, so a ``softcap`` computes the scores explicitly (:func:`eager`)."""
    if softcap is not None:
        return eager(q, k, v, mask=mask, bias=bias, causal=causal, scale=scale, softcap=softcap, dropout_p=dropout_p)
    mask, causal = _resolve_causal(q, k, mask, causal, spell_out=bias is not None)
    gqa = k.size(1) != q.size(1)
    if mask is None and bias is None:
        return F.scaled_dot_product_attention(
            q, k, v, is_causal=causal, scale=scale, dropout_p=dropout_p, enable_gqa=gqa
        )
    keep = None
    if mask is not None:
        # A row that may see nothing would softmax over -inf only (NaN in some kernels, and NaN gradients):
        # let it see everything instead, then zero its output.
        keep = mask.any(-1, keepdim=True)  # (..., L, 1)
        mask = mask | ~keep
    attn_mask = mask
    if bias is not None:
        bias = bias.to(q.dtype)
        attn_mask = bias if mask is None else torch.where(mask, bias, float("-inf"))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale, dropout_p=dropout_p, enable_gqa=gqa)
    return out if keep is None else out * keep


def cpu_decode(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, mask: torch.Tensor | None = None, **options
) -> torch.Tensor:
    """sdpa, with a masked single-query step written out: the CPU's decoding kernel.

    SDPA's masked CPU kernel tiles for many queries, and a padded batch's decoding step ran 1.16x faster written
    out (:func:`eager`; 1.05x compiled over a static cache, batch 32). ``zoo.generate`` decodes with it on the
    CPU. The other options (``bias``, ``causal``, ...) pass on to the kernel it chooses."""
    kernel = eager if mask is not None and q.size(-2) == 1 else sdpa
    return kernel(q, k, v, mask=mask, **options)


def flex_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
    softcap: float | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """torch's flex_attention, with the mask, bias and soft-cap as one score modification.

    Unfused (and slow) unless the model runs under ``torch.compile``; it has no attention dropout, and on the
    CPU no backward."""
    from torch.nn.attention.flex_attention import flex_attention as flex

    if dropout_p > 0:
        raise ValueError("the flex_attention kernel has no attention dropout: train with kernel 'sdpa' or 'eager'")
    mask, _ = _resolve_causal(q, k, mask, causal, spell_out=True)
    n, h, L, _ = q.shape
    S = k.size(2)
    keep = None
    if mask is not None:
        keep = mask.any(-1, keepdim=True)
        mask = (mask | ~keep).expand(n, h, L, S)
    if bias is not None:
        bias = bias.to(q.dtype).expand(n, h, L, S)

    def score_mod(score, b, head, qi, ki):
        if softcap is not None:
            score = softcap * torch.tanh(score / softcap)
        if bias is not None:
            score = score + bias[b, head, qi, ki]
        if mask is not None:
            score = torch.where(mask[b, head, qi, ki], score, -float("inf"))
        return score

    out = flex(q, k, v, score_mod=score_mod, scale=scale, enable_gqa=k.size(1) != h)
    return out if keep is None else out * keep


def _has_flex_attention() -> bool:
    try:
        from torch.nn.attention import flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


class KernelConfig(ComponentConfig):
    """Base of kernel configs: a kernel's options, bound to its function when a model takes it (the built-in
    kernels have none)."""

    differentiable_on_cpu: ClassVar[bool] = True
    """False for a kernel without a backward on the CPU (the contract suite then checks no gradients)."""


class SDPAConfig(KernelConfig):
    type: Literal["sdpa"] = "sdpa"


class EagerConfig(KernelConfig):
    type: Literal["eager"] = "eager"


class CPUDecodeConfig(KernelConfig):
    type: Literal["cpu_decode"] = "cpu_decode"


class FlexAttentionConfig(KernelConfig):
    type: Literal["flex_attention"] = "flex_attention"
    differentiable_on_cpu: ClassVar[bool] = False  # torch's flex_attention has no CPU backward


def make_kernel(factory: Callable[..., torch.Tensor], config: ComponentConfig) -> Kernel:
    """The kernel a registered ``factory`` and its ``config`` give: the function itself, or with the config's
    options bound."""
    options = config.arguments()
    return functools.partial(factory, **options) if options else factory


def set_kernel(model: nn.Module, kernel: Kernel) -> dict[nn.Module, Kernel]:
    """Make every attention of ``model`` (each module with a ``kernel``) compute with ``kernel``; returns the
    kernels they had, by module."""
    before = {m: m.kernel for m in model.modules() if callable(getattr(m, "kernel", None)) and m is not model}
    for m in before:
        m.kernel = kernel
    return before


@contextmanager
def use_kernel(model: nn.Module, kernel: Kernel | None) -> Iterator[None]:
    """Within the block, every attention of ``model`` computes with ``kernel`` (None: as it was built)."""
    before = set_kernel(model, kernel) if kernel is not None else {}
    try:
        yield
    finally:
        for m, k in before.items():
            m.kernel = k


@hookimpl
def register_components(register):
    register("kernel", "sdpa", sdpa, SDPAConfig)
    register("kernel", "eager", eager, EagerConfig)
    register("kernel", "cpu_decode", cpu_decode, CPUDecodeConfig)
    if _has_flex_attention():
        register("kernel", "flex_attention", flex_attention, FlexAttentionConfig)
