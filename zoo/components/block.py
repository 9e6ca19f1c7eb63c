"""The Transformer block: how attention, cross-attention and the FFN meet the residual stream.

One block class with its layouts as options (``block:`` in a recipe; ``norm_position`` at the top of a
recipe is short for ``block.norm_position``). ``f`` is a sub-layer (attention, FFN), ``n`` a norm::

    pre       x + f(n(x))            GPT-2, Llama, ViT, T5
    post      n(x + f(x))            the original Transformer, BERT
    sandwich  x + n'(f(n(x)))        Gemma 2/3: a second norm on each sub-layer's output
    output    x + n(f(x))            OLMo 2: each sub-layer's output normalised, its input not
    parallel  x + a(n(x)) + m(n2(x))  GPT-NeoX, Pythia; with shared_norm x + a(n(x)) + m(n(x)): GPT-J, Falcon, Phi

Each sub-layer has its own norms, built from the recipe's ``norm`` at the model's width.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal

import torch
from pydantic import ConfigDict, Field, model_validator
from torch import nn

from zoo.cache import static_cache
from zoo.config import StrictNumbers

__all__ = ["Block", "BlockCache", "BlockConfig", "NormPosition"]

NormPosition = Literal["pre", "post", "sandwich", "output"]


class BlockConfig(StrictNumbers):
    """How a block arranges its sub-layers; the recipe's ``block:`` section."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    norm_position: NormPosition = Field(
        "pre",
        description="pre: x + f(n(x)); post: n(x + f(x)); sandwich: x + n'(f(n(x))); output: x + n(f(x)) (OLMo 2).",
    )

    parallel: bool = Field(False, description="Attention and FFN both read the block's input; outputs are added.")
    shared_norm: bool = Field(False, description="parallel: one norm feeds attention and FFN (GPT-J, Falcon).")
    first_attention_norm: bool = Field(
        True,
        description="The first block normalises its attention input; false: it reads the (normalised) embeddings "
        "as they are (ModernBERT).",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"norm_position": "post"},
        {"norm_position": "sandwich"},
        {"norm_position": "output"},
        {"parallel": True},
        {"parallel": True, "shared_norm": True},
        {"first_attention_norm": False, "norm_position": "pre"},
    )
    """Layouts the contract tests of ``zoo.testing`` build a model with."""

    @model_validator(mode="after")
    def _parallel_is_pre_norm(self) -> BlockConfig:
        if self.parallel and self.norm_position != "pre":
            raise ValueError(
                f"a parallel block normalises its input (pre-norm), not norm_position {self.norm_position}"
            )
        if self.shared_norm and not self.parallel:
            raise ValueError("shared_norm needs parallel: true (a sequential block normalises each input anew)")
        if not self.first_attention_norm and (self.parallel or self.norm_position not in ("pre", "sandwich")):
            raise ValueError("first_attention_norm: false needs a sequential pre or sandwich block (the norm it drops)")
        return self

    @property
    def pre_norm(self) -> bool:
        """The stream itself is never normalised inside the blocks, so the stack ends with a final norm."""
        return self.norm_position != "post"

    def arguments(self, layer_idx: int = 0) -> dict[str, Any]:
        """The keyword arguments of :class:`Block` that this config sets, for the block at ``layer_idx``."""
        out = self.model_dump()
        out["attention_norm"] = out.pop("first_attention_norm") or layer_idx > 0
        return out


class BlockCache:
    """The decoding cache of a block whose FFN is stateful (RWKV's channel mix reads the previous token).

    An FFN module with a ``new_cache(batch_size, max_len)`` method is stateful: the block then builds this
    pair, hands ``attention`` to its self-attention and ``ffn`` to the FFN, which it calls as
    ``ffn(h, mask=mask, cache=cache)`` (``cache`` None outside decoding). Blocks of stateless FFNs keep the
    attention's own cache, so nothing changes for them.
    """

    def __init__(self, attention: Any, ffn: Any) -> None:
        self.attention = attention
        self.ffn = ffn

    @property
    def length(self) -> int:
        return self.attention.length

    @property
    def nbytes(self) -> int:
        return getattr(self.attention, "nbytes", 0) + getattr(self.ffn, "nbytes", 0)

    def reset(self) -> None:
        self.attention.reset()
        self.ffn.reset()

    @property
    def select(self) -> Any:
        """``select(rows)`` where both caches can drop batch rows, else None."""
        a, f = getattr(self.attention, "select", None), getattr(self.ffn, "select", None)
        if not (callable(a) and callable(f)):
            return None

        def select(rows: torch.Tensor) -> None:
            a(rows)
            f(rows)

        return select


class Block(nn.Module):
    """One Transformer block: self-attention, optional cross-attention, feed-forward, each residual.

    Args:
        attention: the self-attention module.
        ffn: the feed-forward module.
        norm: builds one norm (called once per norm the layout needs).
        cross_attention: attention over the encoder output (encoder-decoder decoders), or None.
        norm_position: ``pre``, ``post``, ``sandwich`` or ``output`` (see the module docstring); ``output``
            has no ``attention_norm`` / ``ffn_norm``, only the ``*_post_norm`` of each sub-layer.
        parallel: every sub-layer reads the block's input ``x`` (through its own norm) and their outputs are
            added to ``x`` together; pre-norm only.
        shared_norm: with ``parallel``, the attention's norm feeds the FFN too (there is no ``ffn_norm``).
        attention_norm: False: no ``attention_norm`` (a sequential pre or sandwich block's attention reads ``x``
            itself: ModernBERT's first layer).
            An ``ffn`` whose ``adds_nothing`` is True (no FFN sub-layer: zoo-mamba's ``ffn: {type: none}``, as in
            Mamba's mixer-only blocks) gets no norms and is skipped: the block is its attention alone.
        dropout: on each sub-layer's output, before it joins the stream.
    """

    def __init__(
        self,
        *,
        attention: nn.Module,
        ffn: nn.Module,
        norm: Callable[[], nn.Module],
        cross_attention: nn.Module | None = None,
        norm_position: NormPosition = "pre",
        parallel: bool = False,
        shared_norm: bool = False,
        attention_norm: bool = True,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if norm_position not in ("pre", "post", "sandwich", "output"):
            raise ValueError(f"norm_position must be pre, post, sandwich or output, not {norm_position!r}")
        BlockConfig(norm_position=norm_position, parallel=parallel, shared_norm=shared_norm)  # the same rules
        self.norm_position = norm_position
        self.parallel = parallel
        before = norm_position != "output"  # a norm on each sub-layer's input
        after = norm_position in ("sandwich", "output")  # a norm on each sub-layer's output
        if not attention_norm and (parallel or norm_position not in ("pre", "sandwich")):
            raise ValueError("attention_norm=False needs a sequential pre or sandwich block")
        self.attention_norm = norm() if before and attention_norm else None
        self.attention = attention
        self.attention_post_norm = norm() if after else None
        self.cross_attention_norm = norm() if before and cross_attention is not None else None
        self.cross_attention = cross_attention
        self.cross_attention_post_norm = norm() if after and cross_attention is not None else None
        self.skip_ffn = bool(getattr(ffn, "adds_nothing", False))
        self.ffn_norm = norm() if before and not (shared_norm or self.skip_ffn) else None
        self.ffn = ffn
        self.stateful_ffn = hasattr(ffn, "new_cache")  # it needs earlier tokens: see new_cache
        self.ffn_post_norm = norm() if after and not self.skip_ffn else None
        self.dropout = nn.Dropout(dropout)

    def new_cache(self, batch_size: int, max_len: int, static: bool = False) -> Any:
        """The self-attention's decoding cache, paired with the FFN's in a ``BlockCache`` when it has one;
        ``static``: a KV cache of fixed shapes (``zoo.cache.static_cache``), which a decode step compiles with."""
        cache = self.attention.new_cache(batch_size, max_len)
        if static:
            cache = static_cache(cache, max_len)
        return BlockCache(cache, self.ffn.new_cache(batch_size, max_len)) if self.stateful_ffn else cache

    def _residual(
        self,
        x: torch.Tensor,
        norm: nn.Module | None,
        post_norm: nn.Module | None,
        f: Callable[[torch.Tensor], torch.Tensor],
    ) -> torch.Tensor:
        if self.norm_position == "post":
            return norm(x + self._dropout(f(x)))
        y = f(x if norm is None else norm(x))  # no input norm: the output layout
        if post_norm is not None:
            y = post_norm(y)
        return x + self._dropout(y)

    def _dropout(self, y: torch.Tensor) -> torch.Tensor:
        return self.dropout(y) if self.training else y  # dropout is the identity in eval: skip the call

    def forward(
        self,
        x: torch.Tensor,
        *,
        mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        pos: nn.Module | None = None,
        cache: Any = None,
        context: torch.Tensor | None = None,
        context_mask: torch.Tensor | None = None,
        cross_cache: Any = None,
    ) -> torch.Tensor:
        """``x`` (N, L, E) -> (N, L, E). ``mask``, ``positions``, ``pos`` and ``cache`` go to the
        self-attention; ``context`` (N, S, E), ``context_mask`` and ``cross_cache`` to the cross-attention.
        A stateful FFN gets ``mask`` and its part of a :class:`BlockCache` too."""
        ffn = self.ffn
        if self.stateful_ffn:
            ffn_cache = None
            if isinstance(cache, BlockCache):
                cache, ffn_cache = cache.attention, cache.ffn
            ffn = lambda h: self.ffn(h, mask=mask, cache=ffn_cache)  # noqa: E731
        if self.parallel:
            h = self.attention_norm(x)
            out = self.attention(h, mask=mask, positions=positions, pos=pos, cache=cache)
            if self.cross_attention is not None:
                c = self.cross_attention_norm(x)
                out = out + self.cross_attention(c, context=context, mask=context_mask, cache=cross_cache)
            if not self.skip_ffn:
                out = out + ffn(h if self.ffn_norm is None else self.ffn_norm(x))
            return x + self._dropout(out)
        x = self._residual(
            x,
            self.attention_norm,
            self.attention_post_norm,
            lambda h: self.attention(h, mask=mask, positions=positions, pos=pos, cache=cache),
        )
        if self.cross_attention is not None:
            x = self._residual(
                x,
                self.cross_attention_norm,
                self.cross_attention_post_norm,
                lambda h: self.cross_attention(h, context=context, mask=context_mask, cache=cross_cache),
            )
        if self.skip_ffn:
            return x
        return self._residual(x, self.ffn_norm, self.ffn_post_norm, ffn)
