r"""RWKV-4 (Peng et al. 2023) as zoo components: the time mix where attention sits, the channel mix as the FFN.

An RWKV-4 block is a pre-norm block (``x + TimeMix(ln1(x))``, then ``x + ChannelMix(ln2(x))``) with one extra
LayerNorm on the first block's input (zoo's ``embed_norm``), so it is zoo's ``Block`` with these two mixers.
Both mix each token with the previous one (a *token shift*): ``mix(x, mu) = mu * x_t + (1 - mu) * x_(t-1)``.

Time mix: per channel c, a decaying weighted average of the values seen so far, the current token boosted::

    wkv_t = (sum_(i<t) e^(-(t-1-i) w + k_i) v_i + e^(u + k_t) v_t) / (same sums without v)
    out_t = W_o (sigmoid(r_t) * wkv_t),   k, v, r = W_k mix(x, mu_k), W_v mix(x, mu_v), W_r mix(x, mu_r)

with ``w = exp(time_decay) > 0`` and ``u = time_first``. Training uses the parallel form inside chunks of
``chunk_size`` tokens (an (L, L) weight matrix per channel, stabilised by its running maximum) and carries
the recurrent state ``(num, den, max)`` across chunks; decoding is the same function with chunks of one
token. The state is ``(N, A)`` three times plus the last input, whatever the length.

Channel mix: ``out_t = sigmoid(W_r mix(x, mu_r)) * W_v relu(W_k mix(x, mu_k))^2``; its state is the last input.

Padding: ``mask`` (True = real) is read as a key-padding mask: a padded token adds nothing to the state and is
not shifted into the next token, so left-padded prompts decode as if unpadded. Shapes: N batch, L length,
E d_model, A attention width, F channel-mix width.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.limits import MAX_WIDTH

__all__ = [
    "ChannelMix",
    "ChannelMixConfig",
    "ShiftState",
    "TimeMix",
    "TimeMixConfig",
    "TimeMixState",
    "wkv",
]

EMPTY = -1e38
"""The running maximum of an empty state (finite, so that ``exp(EMPTY - m)`` is 0, never NaN)."""


def wkv(
    time_decay: torch.Tensor,
    time_first: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    state: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    keep: torch.Tensor | None = None,
    chunk_size: int = 32,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """RWKV-4's weighted key-value average of ``L`` tokens after ``state``, in float32.

    Args:
        time_decay: ``(A,)``; each step multiplies the state by ``exp(-exp(time_decay))``.
        time_first: ``(A,)`` the bonus ``u`` of the current token.
        k, v: ``(N, L, A)`` keys and values.
        state: ``(num, den, max)`` each ``(N, A)``: ``num * e^max`` and ``den * e^max`` are the decayed sums of
            ``e^k v`` and ``e^k`` so far. None: nothing before (``num = den = 0``, ``max = EMPTY``).
        keep: ``(N|1, L)`` bool, False on padded tokens (they add nothing), or None.
        chunk_size: tokens per parallel chunk; memory is ``N * chunk_size^2 * A`` floats.

    Returns:
        ``(N, L, A)`` float32 outputs (0 where nothing real was seen yet), and the state after the tokens.
    """
    n, length, a = k.shape
    k, v = k.float(), v.float()
    w = -torch.exp(time_decay.float())  # (A,) log decay per step, < 0
    u = time_first.float()
    if state is None:
        zeros = k.new_zeros(n, a)
        num, den, top = zeros, zeros, torch.full_like(zeros, EMPTY)
    else:
        num, den, top = state
    outs = []
    for lo in range(0, length, chunk_size):
        kc, vc = k[:, lo : lo + chunk_size], v[:, lo : lo + chunk_size]  # (N, T, A)
        T = kc.size(1)
        j = torch.arange(T, device=k.device)
        lag = (j[:, None] - 1 - j[None, :]).to(k.dtype)  # (T, T): t - 1 - i
        seen = j[None, :] <= j[:, None]  # (T, T): key i is at or before query t
        valid = seen[None] if keep is None else seen[None] & keep[:, None, lo : lo + T]  # (N|1, T, T)
        # logits[n, t, i, c]: the log weight of key i in the output at t; the current token gets u instead of decay.
        logits = kc[:, None] + lag[None, :, :, None] * w  # (N, T, T, A)
        logits = torch.where((lag == -1)[None, :, :, None], kc[:, None] + u, logits)
        logits = logits.masked_fill(~valid[..., None], -math.inf)
        past = top[:, None] + j[None, :, None].to(k.dtype) * w  # (N, T, A): the state, decayed t times
        m = torch.maximum(past, logits.amax(dim=2)).detach()  # (N, T, A); the result does not depend on m
        ep, ek = torch.exp(past - m), torch.exp(logits - m[:, :, None])  # (N, T, A), (N, T, T, A)
        numer = ep * num[:, None] + (ek * vc[:, None]).sum(dim=2)  # (N, T, A)
        denom = ep * den[:, None] + ek.sum(dim=2)
        real = denom > 0  # False only before the first real token
        outs.append(torch.where(real, numer / torch.where(real, denom, 1.0), 0.0))
        # The state after the chunk: the old one decayed T times, key i decayed T - 1 - i times.
        old = top + T * w  # (N, A)
        into = (kc + (T - 1 - j)[None, :, None].to(k.dtype) * w).masked_fill(
            ~(keep[:, lo : lo + T, None] if keep is not None else torch.ones_like(kc, dtype=torch.bool)), -math.inf
        )  # (N, T, A)
        m = torch.maximum(old, into.amax(dim=1)).detach()  # (N, A)
        eo, ei = torch.exp(old - m), torch.exp(into - m[:, None])
        num = eo * num + (ei * vc).sum(dim=1)
        den = eo * den + ei.sum(dim=1)
        top = m
    return torch.cat(outs, dim=1), (num, den, top)


def token_shift(x: torch.Tensor, last: torch.Tensor | None, keep: torch.Tensor | None) -> torch.Tensor:
    """``(N, L, E)`` -> the previous token of each position: ``last`` (or zeros) before the first; padded
    tokens (``keep`` False) shift in as zeros."""
    if keep is not None:
        x = x * keep[..., None].to(x.dtype)
    first = x.new_zeros(x[:, :1].shape) if last is None else last[:, None].to(x.dtype)
    return torch.cat([first, x[:, :-1]], dim=1)


def key_padding(mask: torch.Tensor | None, length: int) -> torch.Tensor | None:
    """The ``(N|1, L)`` real tokens of this call from zoo's ``(N|1, 1, L, S)`` attention mask (its last row)."""
    return None if mask is None else mask[:, 0, -1, -length:]


def mixing(width: int, power: float) -> torch.Tensor:
    """RWKV's initial token-shift mix ``(i / E) ** power`` across the channels (transformers' init)."""
    return (torch.arange(width, dtype=torch.float32) / width).pow(power)


class ShiftState:
    """A channel mix's decoding cache: the last input of each sequence, ``(N, E)``, at every length."""

    def __init__(self) -> None:
        self.last: torch.Tensor | None = None
        self.length = 0

    def update(self, x: torch.Tensor, keep: torch.Tensor | None) -> None:
        last = x[:, -1] if keep is None else x[:, -1] * keep[:, -1:].to(x.dtype)
        self.last = last.clone() if self.last is None else self.last.copy_(last)
        self.length += x.size(1)

    def reset(self) -> None:
        self.length = 0
        self.last = None

    def select(self, rows: torch.Tensor) -> None:
        """Keep only these batch rows (sequences that stopped leave the batch)."""
        if self.last is not None:
            self.last = self.last.index_select(0, rows)

    @property
    def nbytes(self) -> int:
        return 0 if self.last is None else self.last.nbytes


class TimeMixState(ShiftState):
    """A time mix's decoding cache: the last input ``(N, E)`` and ``(num, den, max)`` ``(N, A)`` in float32."""

    def __init__(self) -> None:
        super().__init__()
        self.wkv: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    def reset(self) -> None:
        super().reset()
        self.wkv = None

    def select(self, rows: torch.Tensor) -> None:
        super().select(rows)
        if self.wkv is not None:
            self.wkv = tuple(t.index_select(0, rows) for t in self.wkv)

    @property
    def nbytes(self) -> int:
        return super().nbytes + (0 if self.wkv is None else sum(t.nbytes for t in self.wkv))


class TimeMix(nn.Module):
    """RWKV-4 time mixing: a per-channel decaying average of values, gated by a receptance (linear attention).

    Args:
        d_model: width E.
        attention_hidden: width A of keys, values and the state; None means E.
        chunk_size: tokens per parallel chunk in training and prefill.
        layer_idx, num_layers: where the layer sits (the initial decays and mixes depend on it).
        causal, cross: what the stack asks for; the time mix is causal self-mixing only.
    """

    def __init__(
        self,
        d_model: int,
        *,
        attention_hidden: int | None = None,
        chunk_size: int = 32,
        layer_idx: int = 0,
        num_layers: int = 1,
        causal: bool = True,
        cross: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if cross or not causal:
            raise ValueError(f"the RWKV time mix is causal self-mixing only (got causal={causal}, cross={cross})")
        a = attention_hidden or d_model
        self.d_model, self.attention_hidden, self.chunk_size = d_model, a, chunk_size
        self.layer_idx, self.num_layers = layer_idx, num_layers
        factory = {"device": device, "dtype": dtype}
        self.time_decay = nn.Parameter(torch.empty(a, **factory))
        self.time_first = nn.Parameter(torch.empty(a, **factory))
        self.time_mix_key = nn.Parameter(torch.empty(1, 1, d_model, **factory))
        self.time_mix_value = nn.Parameter(torch.empty(1, 1, d_model, **factory))
        self.time_mix_receptance = nn.Parameter(torch.empty(1, 1, d_model, **factory))
        self.key = nn.Linear(d_model, a, bias=False, **factory)
        self.value = nn.Linear(d_model, a, bias=False, **factory)
        self.receptance = nn.Linear(d_model, a, bias=False, **factory)
        self.output = nn.Linear(a, d_model, bias=False, **factory)
        if self.time_decay.device.type != "meta":
            self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """transformers' RWKV init of the decays and mixes; N(0, 0.02) projections, the output scaled by depth."""
        a, e = self.attention_hidden, self.d_model
        early = self.layer_idx / max(self.num_layers - 1, 1)  # 0 -> 1 with depth
        late = 1.0 - self.layer_idx / self.num_layers  # 1 -> ~0
        h = torch.arange(a, dtype=torch.float32) / max(a - 1, 1)
        self.time_decay.copy_(-5 + 8 * h.pow(0.7 + 1.3 * early))
        zigzag = torch.tensor([(i + 1) % 3 - 1 for i in range(a)], dtype=torch.float32) * 0.5
        self.time_first.copy_(math.log(0.3) + zigzag)
        self.time_mix_key.copy_(mixing(e, late).view(1, 1, e))
        self.time_mix_value.copy_((mixing(e, late) + 0.3 * early).view(1, 1, e))
        self.time_mix_receptance.copy_(mixing(e, 0.5 * late).view(1, 1, e))
        for linear in (self.key, self.value, self.receptance):
            nn.init.normal_(linear.weight, 0.0, 0.02)
        nn.init.normal_(self.output.weight, 0.0, 0.02 / math.sqrt(2 * self.num_layers))

    def new_cache(self, batch_size: int, max_len: int) -> TimeMixState:
        """The recurrent state (its size depends on neither ``max_len`` nor the tokens decoded)."""
        return TimeMixState()

    def forward(
        self,
        x: torch.Tensor,
        *,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        pos: Any = None,
        cache: TimeMixState | None = None,
    ) -> torch.Tensor:
        """``x`` (N, L, E) -> (N, L, E); ``mask`` (N|1, 1, L, S) read for key padding; ``cache`` from
        :meth:`new_cache`. ``positions`` and ``pos`` are not used: the decay is RWKV's only notion of position."""
        keep = key_padding(mask, x.size(1))
        shifted = token_shift(x, cache.last if cache is not None else None, keep)
        k = self.key(x * self.time_mix_key + shifted * (1 - self.time_mix_key))
        v = self.value(x * self.time_mix_value + shifted * (1 - self.time_mix_value))
        r = torch.sigmoid(self.receptance(x * self.time_mix_receptance + shifted * (1 - self.time_mix_receptance)))
        state = cache.wkv if cache is not None else None
        y, state = wkv(self.time_decay, self.time_first, k, v, state, keep, self.chunk_size)
        if cache is not None:
            cache.wkv = state
            cache.update(x, keep)
        return self.output(r * y.to(r.dtype))

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, attention_hidden={self.attention_hidden}, chunk_size={self.chunk_size}"


class ChannelMix(nn.Module):
    """RWKV-4 channel mixing: a squared-ReLU MLP over the token-shifted input, gated by a receptance.

    A stateful FFN (it has ``new_cache``): zoo's ``Block`` passes it ``mask`` and its decoding cache.

    Args:
        d_model: width E.
        hidden: width F of the key; None means 4 E.
        layer_idx, num_layers: where the layer sits (the initial mixes depend on it).
    """

    def __init__(
        self,
        d_model: int,
        *,
        hidden: int | None = None,
        layer_idx: int = 0,
        num_layers: int = 1,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        f = hidden or 4 * d_model
        self.d_model, self.hidden = d_model, f
        self.layer_idx, self.num_layers = layer_idx, num_layers
        factory = {"device": device, "dtype": dtype}
        self.time_mix_key = nn.Parameter(torch.empty(1, 1, d_model, **factory))
        self.time_mix_receptance = nn.Parameter(torch.empty(1, 1, d_model, **factory))
        self.key = nn.Linear(d_model, f, bias=False, **factory)
        self.receptance = nn.Linear(d_model, d_model, bias=False, **factory)
        self.value = nn.Linear(f, d_model, bias=False, **factory)
        if self.key.weight.device.type != "meta":
            self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """transformers' RWKV init of the mixes; N(0, 0.02) projections, the output scaled by depth."""
        e, late = self.d_model, 1.0 - self.layer_idx / self.num_layers
        self.time_mix_key.copy_(mixing(e, late).view(1, 1, e))
        self.time_mix_receptance.copy_(mixing(e, late).view(1, 1, e))
        nn.init.normal_(self.key.weight, 0.0, 0.02)
        nn.init.normal_(self.receptance.weight, 0.0, 0.02)
        nn.init.normal_(self.value.weight, 0.0, 0.02 / math.sqrt(2 * self.num_layers))

    def new_cache(self, batch_size: int, max_len: int) -> ShiftState:
        """The last input of each sequence (a fixed size)."""
        return ShiftState()

    def forward(
        self, x: torch.Tensor, *, mask: torch.Tensor | None = None, cache: ShiftState | None = None
    ) -> torch.Tensor:
        """``x`` (N, L, E) -> (N, L, E); ``mask`` (N|1, 1, L, S) as the block's attention gets it."""
        keep = key_padding(mask, x.size(1))
        shifted = token_shift(x, cache.last if cache is not None else None, keep)
        k = torch.square(torch.relu(self.key(x * self.time_mix_key + shifted * (1 - self.time_mix_key))))
        r = torch.sigmoid(self.receptance(x * self.time_mix_receptance + shifted * (1 - self.time_mix_receptance)))
        if cache is not None:
            cache.update(x, keep)
        return r * self.value(k)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, hidden={self.hidden}"


class TimeMixConfig(ComponentConfig):
    """Recipe options of ``rwkv_time_mix``: RWKV-4's time mixing (decoder stacks only)."""

    type: Literal["rwkv_time_mix"] = "rwkv_time_mix"
    requires_causal: ClassVar[bool] = True
    supports_cross: ClassVar[bool] = False
    # The decay is its own notion of position: no rotation or score bias (embedded positions may be added).
    positional_styles: ClassVar[frozenset[str]] = frozenset({"none", "embed"})
    attention_hidden: int | None = Field(
        None, ge=1, le=MAX_WIDTH, description="Width of keys, values and the state; default d_model."
    )
    chunk_size: int = Field(32, ge=1, le=4096, description="Tokens per parallel chunk (memory N·chunk²·A).")

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"attention_hidden": 48, "chunk_size": 3})

    def cost(self, ctx: BuildContext) -> Cost:
        """k, v, r (E·A each), output (A·E), decay and bonus (A each), three mixes (E each); a state of the last
        input (E) and num, den, max (A each) per sequence (kept in float32 whatever the model's dtype)."""
        e, a = ctx.d_model, self.attention_hidden or ctx.d_model
        return Cost(params=4 * e * a + 2 * a + 3 * e, matmul=4 * e * a, state=e + 3 * a, acts=4 * e + 5 * a)


class ChannelMixConfig(ComponentConfig):
    """Recipe options of ``rwkv_channel_mix``: RWKV-4's channel mixing, the FFN of an RWKV block."""

    type: Literal["rwkv_channel_mix"] = "rwkv_channel_mix"
    requires_causal: ClassVar[bool] = True  # the token shift reads the previous token
    hidden: int | None = Field(None, ge=1, le=MAX_WIDTH, description="Width of the key; default 4 * d_model.")

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"hidden": 40})

    def cost(self, ctx: BuildContext) -> Cost:
        """key (E·F), value (F·E), receptance (E·E), two mixes (E each); the last input (E) per sequence."""
        e, f = ctx.d_model, self.hidden or 4 * ctx.d_model
        return Cost(params=2 * e * f + e * e + 2 * e, matmul=2 * e * f + e * e, state=e, acts=4 * e + 2 * f)
