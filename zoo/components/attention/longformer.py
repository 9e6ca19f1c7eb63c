r"""Longformer attention (LED's encoder): a sliding window in both directions, plus global tokens.

Each query sees the keys at most ``window / 2`` sequence indices away on either side (``window`` is the
Longformer's ``attention_window``, even: 2 × the one-sided radius). The first ``global_tokens`` tokens of each
sequence are global: every query sees them, and they see every key, through projections of their own
(``q_global``, ``k_global``, ``v_global``)::

    window = 4, global_tokens = 1     keys ->  0 1 2 3 4 5 6
                                     query 0   G G G G G G G    global row: q_global · k_global, v_global
                                     query 1   x x x x
                                     query 2   x x x x x
                                     query 3   x x x x x x
                                     query 4   x   x x x x x
                                     query 5   x     x x x x
                                     query 6   x       x x x

The band is the key-mask seam's ``SlidingWindow`` (``window / 2 + 1``: keys less than that far away), the global
columns are added to it, and padding is masked on top. The other rows score ``q · k`` with the layer's q/k/v
projections over the keys they see, each key once (a global key inside the band is not counted twice), in query
chunks of ``window`` that look at ``2 × window`` keys and the global ones: the cost grows with the length, not its
square. The global rows attend over every unpadded key and replace those rows before the output projection.

Transformers' ``LEDEncoderSelfAttention`` pads the sequence to a multiple of the window and computes the band in
overlapping chunks; the keys each query sees are the same (tests/test_hf_led.py checks it key for key). Its
``global_attention_mask`` is an input of each call; here it is the recipe's ``global_tokens`` (LED's summarisation
puts global attention on the first token, ``<s>``: ``global_tokens: 1``; 0: none, as transformers without a mask).
A padding token among the first ``global_tokens`` stays padding: no query sees it.

Shapes: N batch, L length, E d_model, H heads, D head_dim, G global tokens.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import nn

from zoo.components.kernels import Kernel, sdpa
from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.init import residual_output
from zoo.label import SKIP_OPTIONS, Label, attention_label
from zoo.limits import MAX_HEAD_DIM, MAX_HEADS, MAX_POSITIONS

from .base import _Attention, _indivisible, _resolve_head_dim
from .masks import SlidingWindow

ENCODER_ONLY = (
    "longformer attention is an encoder's bidirectional self-attention (LED's encoder): give it to the encoder "
    "stack only (layers: [{{select: ':', stack: encoder, attention: ...}}]), not to a {what}"
)


def odd_window(window: int) -> str:
    return (
        f"window ({window}) must be even: the band reaches window / 2 keys on either side (Longformer's "
        "attention_window)"
    )


class LongformerAttention(_Attention):
    """Sliding-window self-attention with global tokens (Longformer, LED's encoder); see the module docstring.

    Args:
        d_model: width E of the input and output.
        num_heads: heads H.
        window: the band's width, even: a query sees the keys at most ``window // 2`` indices away.
        global_tokens: the first this many tokens attend to every key and every query attends to them.
        head_dim: features per head D; None means ``d_model // num_heads``.
        bias: biases in every projection (Longformer's).
        kernel, dropout: the attention kernel and the dropout on its weights.
    """

    adaptable: ClassVar[dict[str, str]] = dict.fromkeys(("q_proj", "k_proj", "v_proj", "o_proj"), "attention")

    def __init__(
        self,
        d_model: int,
        *,
        num_heads: int,
        window: int,
        global_tokens: int = 0,
        head_dim: int | None = None,
        bias: bool = True,
        kernel: Kernel = sdpa,
        dropout: float = 0.0,
        causal: bool = False,
        cross: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        if causal or cross:
            raise ValueError(ENCODER_ONLY.format(what="causal or cross-attention"))
        if window < 2 or window % 2:
            raise ValueError(odd_window(window))
        super().__init__(kernel=kernel, dropout=dropout, key_mask=SlidingWindow(window // 2 + 1))
        self.num_heads = self.num_kv_heads = num_heads
        self.head_dim = _resolve_head_dim(d_model, num_heads, head_dim, "num_heads")
        self.attention_window = window
        self.global_tokens = global_tokens
        factory = {"device": device, "dtype": dtype}
        width = num_heads * self.head_dim
        self.q_proj = nn.Linear(d_model, width, bias=bias, **factory)
        self.k_proj = nn.Linear(d_model, width, bias=bias, **factory)
        self.v_proj = nn.Linear(d_model, width, bias=bias, **factory)
        self.o_proj = residual_output(nn.Linear(width, d_model, bias=bias, **factory))
        self.q_global = nn.Linear(d_model, width, bias=bias, **factory)
        self.k_global = nn.Linear(d_model, width, bias=bias, **factory)
        self.v_global = nn.Linear(d_model, width, bias=bias, **factory)

    def key_mask(self, query_index: torch.Tensor, key_index: torch.Tensor) -> torch.Tensor:
        """The band of the ``SlidingWindow`` pattern, and every query sees the global keys: (L, S) bool."""
        band = self.pattern(query_index, key_index, False)
        return band | (key_index < self.global_tokens)[None, :]

    def _local(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """Every query over the band and the global keys, in chunks of ``window`` queries: (N, H, L, D)."""
        L, g, reach, p = q.size(2), self.global_tokens, self.attention_window // 2, self.dropout
        chunk, out = self.attention_window, []
        index = torch.arange(L, device=q.device)
        for start in range(0, L, chunk):
            end = min(start + chunk, L)
            lo, hi = max(start - reach, 0), min(end + reach, L)
            keys = index[: max(hi, g)] if lo <= g else torch.cat([index[:g], index[lo:hi]])  # each key once
            seen = self.key_mask(index[start:end], keys)  # (l, s)
            if mask is not None:
                rows = mask if mask.size(-2) == 1 else mask[..., start:end, :]
                seen = seen & rows.index_select(-1, keys)  # (N, 1, l, s)
            kk, vv = k.index_select(2, keys), v.index_select(2, keys)
            out.append(self.kernel(q[:, :, start:end], kk, vv, mask=seen, scale=None, dropout_p=p))
        return torch.cat(out, dim=2) if len(out) > 1 else out[0]

    def forward(
        self,
        x: torch.Tensor,
        *,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        pos: Any = None,
        cache: Any = None,
    ) -> torch.Tensor:
        """``x`` (N, L, E) -> (N, L, E); ``mask`` boolean padding (True = may attend), broadcastable to (N, 1, L, L).
        No cache: an encoder's attention does not decode."""
        if cache is not None or context is not None:
            raise ValueError("longformer attention is an encoder's self-attention: no cache, no context")
        n, L, _ = x.shape
        p = self.dropout if self.training else 0.0
        q = self._heads(self.q_proj, x, self.num_heads)  # (N, H, L, D)
        k, v = self._heads(self.k_proj, x, self.num_heads), self._heads(self.v_proj, x, self.num_heads)
        y = self._local(q, k, v, mask)  # (N, H, L, D)
        g = min(self.global_tokens, L)
        if g:  # the global rows: their own projections, over every (unpadded) key
            qg = self._heads(self.q_global, x[:, :g], self.num_heads)  # (N, H, G, D)
            kg, vg = self._heads(self.k_global, x, self.num_heads), self._heads(self.v_global, x, self.num_heads)
            rows = None if mask is None else mask if mask.size(-2) == 1 else mask[..., :g, :]
            yg = self.kernel(qg, kg, vg, mask=rows, scale=None, dropout_p=p)  # (N, H, G, D)
            y = torch.cat([yg, y[:, :, g:]], dim=2)
        return self.o_proj(y.transpose(1, 2).reshape(n, L, self.num_heads * self.head_dim))

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, head_dim={self.head_dim}, window={self.attention_window}, "
            f"global_tokens={self.global_tokens}"
        )


class LongformerConfig(ComponentConfig):
    """Longformer's sliding-window attention with global tokens (``zoo.components.attention.longformer``)."""

    type: Literal["longformer"] = "longformer"
    supports_cross: ClassVar[bool] = False
    positional_styles: ClassVar[frozenset[str]] = frozenset({"embed", "none"})

    num_heads: int = Field(ge=1, le=MAX_HEADS, description="Heads.")
    window: int = Field(
        ge=2,
        le=MAX_POSITIONS,
        description="The band's width (Longformer's attention_window, even): a query sees the keys at most "
        "window / 2 tokens away on either side (LED-base: 1024).",
    )
    global_tokens: int = Field(
        0,
        ge=0,
        le=MAX_POSITIONS,
        description="The first this many tokens of each sequence are global: they attend to every token and every "
        "token attends to them, through q_global / k_global / v_global (transformers' global_attention_mask on "
        "them; LED summarisation: 1, the <s> token); 0: none.",
    )
    head_dim: int | None = Field(
        None, ge=1, le=MAX_HEAD_DIM, description="Features per head; default d_model // num_heads."
    )
    bias: bool = Field(True, description="Biases in every projection (Longformer's).")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout on the attention weights (training).")

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"num_heads": 4, "window": 4},
        {"num_heads": 4, "window": 2, "global_tokens": 1},
        {"num_heads": 2, "head_dim": 8, "window": 6, "global_tokens": 3, "bias": False},
    )

    def head_dim_for(self, d_model: int) -> int:
        """The head width this config gives in a model of width ``d_model``."""
        return self.head_dim if self.head_dim is not None else d_model // self.num_heads

    @property
    def num_kv_heads(self) -> int:
        return self.num_heads

    def check(self, ctx: BuildContext) -> list[str]:
        problems = []
        if self.head_dim is None and ctx.d_model % self.num_heads:
            problems.append(_indivisible(ctx.d_model, self.num_heads, "num_heads"))
        if self.window % 2:
            problems.append(odd_window(self.window))
        if ctx.causal or ctx.cross:
            problems.append(ENCODER_ONLY.format(what="causal stack or cross-attention"))
        return problems

    def cost(self, ctx: BuildContext) -> Cost:
        # Seven projections: q, k, v, o and the global q, k, v, each E·H·D. Every token meets q, k, v and o, and,
        # with global tokens, k_global and v_global (the global rows' keys and values); q_global serves the G
        # global tokens only (per sequence, left out of matmul). A query scores window + 1 band keys and the G
        # global ones.
        E, H, D = ctx.d_model, self.num_heads, self.head_dim_for(ctx.d_model)
        weights = 7 * E * H * D
        biases = 6 * H * D + E if self.bias else 0
        per_token = (4 + (2 if self.global_tokens else 0)) * E * H * D
        return Cost(
            params=weights + biases,
            matmul=per_token,
            score_width=H * D,
            kv_width=H * D,
            window=self.window + 1 + self.global_tokens,
            acts=E + 4 * H * D + (2 * H * D if self.global_tokens else 0),
        )

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        """Its heads, its band and its global tokens."""
        words = f"sliding window {self.window} ({self.window // 2} keys each side)"
        if self.global_tokens:
            first = "the first token" if self.global_tokens == 1 else f"the first {self.global_tokens} tokens"
            words += f"; {first} global, with q/k/v of their own"
        shown = f"{words}; {note}" if note else words
        skip = SKIP_OPTIONS | {"window", "global_tokens"}
        return attention_label(self, ctx, note=shown, heads=self.num_heads, skip=skip)
