r"""The Hyena operator (Poli et al. 2023) as a token mixer of zoo's attention kind.

Hyena replaces attention by long convolutions whose filters are *implicit* (a small MLP of the position makes
them, so their size does not grow with the sequence) interleaved with elementwise gates that depend on the
data. Of order ``o`` (Hyena-2 is ``o = 2``)::

    x_0, ..., x_(o-1), v = split(ShortConv(W_in X))       each (N, L, E); ShortConv is depthwise and causal
    for j = 1 .. o-1:   v = h_j * (x_(o-j) . v) + D_j . (x_(o-j) . v)     (* is a causal long convolution)
    Hyena(X) = W_out (x_0 . v)

    h_j(t) = MLP_j(z(t)) . exp(-|delta| t / max_len)      z(t) = [t, cos(2 pi b t), sin(2 pi b t)]_(b=1..bands)

Training and prefill convolve through the FFT in O(L log L) (zero-padded to 2L, so the convolution is linear and
causal); decoding keeps every earlier input of each long convolution and convolves directly for the new token.
That cache **grows with the sequence**: ``(o - 1) * E`` elements per token (plus a fixed ``(K - 1)`` rows of the
short convolution), like a KV cache of ``(o - 1) E / 2`` key-value width. A constant-size state would need the
filters distilled into a recurrence, which this package does not do.

Padding: ``mask`` (True = real) is read as a key-padding mask: a padded token's inputs are zeroed, so it adds
nothing to any convolution, and left-padded prompts act as if unpadded (convolutions are shift-invariant).
Shapes: N batch, L length, E d_model, C = (o + 1) E, K short kernel.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.init import residual_output
from zoo.limits import MAX_WIDTH

__all__ = ["HyenaCache", "HyenaConfig", "HyenaFilter", "HyenaOperator", "direct_conv", "fft_conv"]


def fft_conv(u: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """Causal convolution ``y[t] = sum_(s<=t) h[t-s] u[s]`` of ``u`` (N, L, E) with ``h`` (L, E), by the FFT."""
    L = u.size(1)
    n = 2 * L  # zero padding: the circular convolution of 2L points is the linear one on the first L
    y = torch.fft.irfft(torch.fft.rfft(u.float(), n=n, dim=1) * torch.fft.rfft(h.float(), n=n, dim=0), n=n, dim=1)
    return y[:, :L].to(u.dtype)


def direct_conv(u: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """The same causal convolution summed directly, O(L^2): the reference of :func:`fft_conv`."""
    L = u.size(1)
    lag = torch.arange(L)[:, None] - torch.arange(L)[None, :]  # (L, L): t - s
    weights = torch.where((lag >= 0)[..., None], h[lag.clamp(min=0)], 0.0)  # (L, L, E)
    return torch.einsum("tse,nse->nte", weights, u)


class Sin(nn.Module):
    """``sin(freq * x)`` with a learned frequency per feature (the activation of Hyena's filter MLP)."""

    def __init__(self, width: int, freq: float = 1.0, device=None, dtype=None) -> None:
        super().__init__()
        self.init = freq
        self.freq = nn.Parameter(torch.full((width,), freq, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(self.freq * x)


class HyenaFilter(nn.Module):
    """The implicit long filters: an MLP of position features, times an exponential decay per channel.

    Args:
        width: channels of all filters together, ``(order - 1) * d_model``.
        max_len: the length positions are measured against (a filter is the same function of the lag at any
            sequence length).
        bands: sine/cosine pairs of the position features (their width is ``1 + 2 * bands``).
        hidden, layers: the MLP's width and its number of hidden-to-hidden layers.
        freq: the initial frequency of the sine activations.
        fast_decay, slow_decay, target: the channels decay to ``target`` within ``fast_decay`` ..
            ``slow_decay`` of ``max_len`` (Hyena's modulation).
    """

    def __init__(
        self,
        width: int,
        *,
        max_len: int,
        bands: int = 1,
        hidden: int = 64,
        layers: int = 1,
        freq: float = 1.0,
        fast_decay: float = 0.3,
        slow_decay: float = 1.5,
        target: float = 1e-2,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.width, self.max_len, self.bands = width, max_len, bands
        self.decay = (math.log(target) / fast_decay, math.log(target) / slow_decay)
        mlp: list[nn.Module] = [nn.Linear(1 + 2 * bands, hidden, **factory), Sin(hidden, freq, **factory)]
        for _ in range(layers):
            mlp += [nn.Linear(hidden, hidden, **factory), Sin(hidden, freq, **factory)]
        mlp.append(nn.Linear(hidden, width, bias=False, **factory))
        self.mlp = nn.Sequential(*mlp)

    def forward(self, length: int) -> torch.Tensor:
        """The filters at lags ``0 .. length - 1``: ``(length, width)``."""
        weight = self.mlp[0].weight
        t = torch.arange(length, device=weight.device, dtype=weight.dtype)[:, None] / self.max_len  # (L, 1)
        b = torch.arange(1, self.bands + 1, device=weight.device, dtype=weight.dtype)  # (bands,)
        z = torch.cat([t, torch.cos(2 * math.pi * b * t), torch.sin(2 * math.pi * b * t)], dim=-1)  # (L, 1 + 2b)
        deltas = torch.linspace(*self.decay, self.width, device=weight.device, dtype=weight.dtype).abs()  # (W,)
        return self.mlp(z) * torch.exp(-t * deltas)  # (L, W)


class HyenaCache:
    """The decoding cache of one Hyena layer: every earlier input of its long convolutions, which **grows** with
    the sequence (preallocated ``(N, max_len, (o - 1) E)``), the last ``K - 1`` rows of the short convolution,
    and the filters at lags ``0 .. max_len - 1`` (made once per sequence, not per token)."""

    def __init__(self, max_len: int) -> None:
        self.max_len = max_len
        self.length = 0
        self.history: torch.Tensor | None = None
        self.short: torch.Tensor | None = None
        self.filters: torch.Tensor | None = None

    def reset(self) -> None:
        self.length = 0
        self.short = None
        self.filters = None

    def select(self, rows: torch.Tensor) -> None:
        """Keep only these batch rows (sequences that stopped leave the batch); the filters have no batch."""
        if self.history is not None:
            self.history = self.history.index_select(0, rows)
        if self.short is not None:
            self.short = self.short.index_select(0, rows)

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in (self.history, self.short, self.filters) if t is not None)


class HyenaOperator(nn.Module):
    """The Hyena operator: implicit long convolutions and data-controlled gates, causal, subquadratic.

    Args:
        d_model: width E.
        order: gates and convolutions (``order - 1`` long convolutions); Hyena-2 is 2.
        short_kernel: width K of the depthwise causal convolution after the input projection.
        filter_hidden, filter_layers, bands, freq: the filter MLP (see :class:`HyenaFilter`).
        bias: biases in the input and output projections.
        max_len: the model's length, which the filter positions are measured against.
        causal, cross: what the stack asks for; Hyena is causal self-mixing only.
    """

    def __init__(
        self,
        d_model: int,
        *,
        order: int = 2,
        short_kernel: int = 3,
        filter_hidden: int = 64,
        filter_layers: int = 1,
        bands: int = 1,
        freq: float = 1.0,
        bias: bool = True,
        max_len: int = 1024,
        causal: bool = True,
        cross: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if cross or not causal:
            raise ValueError(f"Hyena is causal self-mixing only (got causal={causal}, cross={cross})")
        if order < 2:
            raise ValueError(f"Hyena's order must be at least 2 (one long convolution), got {order}")
        factory = {"device": device, "dtype": dtype}
        self.d_model, self.order, self.short_kernel, self.max_len = d_model, order, short_kernel, max(max_len, 1)
        channels = (order + 1) * d_model
        self.in_proj = nn.Linear(d_model, channels, bias=bias, **factory)
        self.short_filter = nn.Conv1d(channels, channels, short_kernel, groups=channels, **factory)
        self.filter = HyenaFilter(
            (order - 1) * d_model,
            max_len=self.max_len,
            bands=bands,
            hidden=filter_hidden,
            layers=filter_layers,
            freq=freq,
            **factory,
        )
        self.filter_bias = nn.Parameter(torch.empty(order - 1, d_model, **factory))  # D_j
        self.out_proj = residual_output(nn.Linear(d_model, d_model, bias=bias, **factory))
        if self.filter_bias.device.type != "meta":
            self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Projections N(0, 0.02) (the output scaled down), PyTorch's default init of the short convolution and
        of the filter MLP (a sine MLP needs its fan-in scaled init), ``freq`` in the sines, D ~ N(0, 1)."""
        for linear in (self.in_proj, self.out_proj):
            nn.init.normal_(linear.weight, 0.0, 0.02)
            if linear.bias is not None:
                nn.init.zeros_(linear.bias)
        self.short_filter.reset_parameters()
        for m in self.filter.mlp:
            if isinstance(m, nn.Linear):
                m.reset_parameters()
            else:
                m.freq.fill_(m.init)
        nn.init.normal_(self.filter_bias)

    def new_cache(self, batch_size: int, max_len: int) -> HyenaCache:
        """Room for ``max_len`` tokens of history (it grows with the sequence: see :class:`HyenaCache`)."""
        return HyenaCache(max_len)

    def _short_conv(self, u: torch.Tensor, before: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Depthwise causal convolution of ``u`` (N, L, C) after ``before`` (N, K - 1, C); the new last K - 1."""
        K = self.short_kernel
        if before is None:
            before = u.new_zeros(u.size(0), K - 1, u.size(2))
        padded = torch.cat([before, u], dim=1)  # (N, K - 1 + L, C)
        y = F.conv1d(padded.transpose(1, 2), self.short_filter.weight, self.short_filter.bias, groups=u.size(2))
        return y.transpose(1, 2), padded[:, padded.size(1) - (K - 1) :]

    def forward(
        self,
        x: torch.Tensor,
        *,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        pos: Any = None,
        cache: HyenaCache | None = None,
    ) -> torch.Tensor:
        """``x`` (N, L, E) -> (N, L, E); ``mask`` (N|1, 1, L, S) read for key padding; ``cache`` from
        :meth:`new_cache`. ``positions`` and ``pos`` are not used: the filters are Hyena's positions."""
        n, L, E = x.shape
        keep = None if mask is None else mask[:, 0, -1, -L:, None].to(x.dtype)  # (N|1, L, 1)
        u = self.in_proj(x)  # (N, L, C)
        if keep is not None:
            u = u * keep
        u, short = self._short_conv(u, cache.short if cache is not None else None)
        *gates, v = u.split(E, dim=-1)  # order gates, then v: (N, L, E) each
        start = 0 if cache is None else cache.length
        if cache is None:
            h = self.filter(L)  # (L, (o - 1) E)
        else:
            if cache.filters is None:
                cache.filters = self.filter(max(cache.max_len, start + L))
            h = cache.filters
        for j, gate in enumerate(reversed(gates[1:])):
            v = v * gate
            if keep is not None:
                v = v * keep
            hj = h[:, j * E : (j + 1) * E]  # (L', E)
            if cache is None:
                y = fft_conv(v, hj)
            else:
                y = self._cached_conv(cache, j, v, hj, start)
            v = y + v * self.filter_bias[j]
        if cache is not None:
            cache.short = short
            cache.length = start + L
        return self.out_proj(v * gates[0])

    def _cached_conv(self, cache: HyenaCache, j: int, v: torch.Tensor, h: torch.Tensor, start: int) -> torch.Tensor:
        """The long convolution at tokens ``start .. start + L - 1``, over every input since the start."""
        n, L, E = v.shape
        end = start + L
        if end > cache.max_len:
            raise ValueError(f"Hyena cache full: {start} tokens cached, {L} more do not fit (max_len {cache.max_len})")
        if cache.history is None:
            cache.history = v.new_zeros(n, cache.max_len, (self.order - 1) * E)
        history = cache.history[:, :, j * E : (j + 1) * E]
        history[:, start:end] = v
        if L == 1:  # decoding: one direct sum over the history
            return torch.einsum("nse,se->ne", history[:, :end], h[:end].flip(0))[:, None]
        return fft_conv(history[:, :end], h[:end])[:, start:]

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, order={self.order}, short_kernel={self.short_kernel}, max_len={self.max_len}"


class HyenaConfig(ComponentConfig):
    """Recipe options of ``hyena``: the Hyena operator (decoder stacks only)."""

    type: Literal["hyena"] = "hyena"
    requires_causal: ClassVar[bool] = True
    supports_cross: ClassVar[bool] = False
    positional_styles: ClassVar[frozenset[str]] = frozenset({"none", "embed"})
    order: int = Field(2, ge=2, le=8, description="Gates; order - 1 long convolutions (Hyena-2: 2).")
    short_kernel: int = Field(3, ge=1, le=64, description="Width of the depthwise causal short convolution.")
    filter_hidden: int = Field(64, ge=1, le=MAX_WIDTH, description="Width of the filter MLP.")
    filter_layers: int = Field(1, ge=0, le=16, description="Hidden-to-hidden layers of the filter MLP.")
    bands: int = Field(1, ge=1, le=256, description="Sine/cosine pairs of the filter's position features.")
    freq: float = Field(1.0, gt=0, description="Initial frequency of the filter MLP's sine activations.")
    bias: bool = Field(True, description="Biases in the input and output projections.")

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"order": 3, "short_kernel": 2, "filter_hidden": 16, "filter_layers": 2, "bands": 4, "bias": False},
    )

    def cost(self, ctx: BuildContext) -> Cost:
        """in (E·C), short conv (C·K + C), filter MLP, D ((o-1)·E), out (E·E); the decoding cache keeps
        (o - 1)·E inputs per token (it grows with the sequence) and (K - 1)·C short-conv rows per sequence.

        Decoding convolves directly, 2·(o - 1)·E·L FLOPs per token at length L: ``score_width`` (o - 1)·E / 2."""
        E, o, K, H = ctx.d_model, self.order, self.short_kernel, self.filter_hidden
        C, W = (o + 1) * E, (o - 1) * E
        mlp = (1 + 2 * self.bands) * H + H + self.filter_layers * (H * H + H) + H * W + H * (1 + self.filter_layers)
        biases = C + E if self.bias else 0
        return Cost(
            params=E * C + C * K + C + mlp + W + E * E + biases,
            matmul=E * C + E * E,
            score_width=W // 2,
            cache_width=W,
            state=(K - 1) * C,
            acts=3 * C + 2 * W + E,
        )
