"""Attention sinks (gpt-oss): a learned logit per query head that joins every softmax denominator, its value zero.

    out_h = Σ_j exp(s_hj) v_j / (exp(sink_h) + Σ_j exp(s_hj))

A query can thus attend to "nothing" (gpt-oss's layers give it part of their weight). No kernel takes such a
logit, so the sink enters every kernel (``zoo.components.kernels``) as one more key, exactly: each query gains a
feature 1 and each key a feature 0, which leaves every score as it was; a virtual key in front of the keys of
each query head holds ``sink / scale`` in that feature (its score is the sink) and a value of zeros; the scale
is passed explicitly, since the features are now ``D + 1``. Being first, the sink key is one every query sees
under the kernels' bottom-right causal alignment; a mask or score bias gains a column for it.

Sinks are per query head and the K/V heads are shared by groups of query heads, so the keys and values are
repeated to one head per query head (the price of an exact sink in every kernel).

Shapes: N batch, H query heads, Hkv key/value heads, L queries, S keys, D head_dim.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def with_sinks(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    bias: torch.Tensor | None,
    sinks: torch.Tensor,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """The kernel inputs that attend with ``sinks`` (H,) at score ``scale``: ``(q, k, v, mask, bias)`` with
    q (N, H, L, D + 1), k (N, H, 1 + S, D + 1), v (N, H, 1 + S, D), the sink key first.

    A query row that the ``mask`` lets see no key sees no sink either, so the kernel zeros it as before (with a
    sink its output would be the sink's zero value anyway)."""
    n, h, L, d = q.shape
    group = h // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (N, H, S, D)
    q = F.pad(q, (0, 1), value=1.0)  # (N, H, L, D + 1): the feature that meets the sink
    sink = F.pad((sinks.float() / scale).to(k.dtype)[:, None, None], (d, 0))  # (H, 1, D + 1): zeros, sink/scale
    k = torch.cat([sink.expand(n, h, 1, d + 1), F.pad(k, (0, 1))], dim=2)  # (N, H, 1 + S, D + 1)
    v = F.pad(v, (0, 0, 1, 0))  # (N, H, 1 + S, D): the sink's value is zero
    if mask is not None:
        mask = torch.cat([mask.any(-1, keepdim=True), mask], dim=-1)  # (..., L, 1 + S)
    if bias is not None:
        bias = F.pad(bias, (1, 0))  # (..., L, 1 + S): nothing added to the sink
    return q, k, v, mask, bias
