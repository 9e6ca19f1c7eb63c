"""The Transformer block: how attention, cross-attention and the FFN meet the residual stream.

One block class with its layouts as options (``block:`` in a recipe; ``norm_position`` at the top of a
recipe is short for ``block.norm_position``). ``f`` is a sub-layer (attention, FFN), ``n`` a norm::

    pre       x + f(n(x))            GPT-2, Llama, ViT, T5
    post      n(x + f(x))            the original Transformer, BERT
    sandwich  x + n'(f(n(x)))        Gemma 2/3: a second norm on each sub-layer's output
    output    x + n(f(x))            OLMo 2: each sub-layer's output normalised, its input not
    parallel  x + a(n(x)) + m(n2(x))  GPT-NeoX, Pythia; with shared_norm x + a(n(x)) + m(n(x)): GPT-J, Falcon, Phi

``residual_multiplier`` r scales what each sub-layer adds to the stream: ``x + r·f(n(x))`` (Granite's 0.22),
``n(x + r·f(x))``, ``x + r·(a + m)``; at its default 1.0 nothing is multiplied.

``layer_scale`` (CaiT, DINOv2, BEiT) multiplies each sub-layer's output by a learned per-channel vector γ of its
own, ``x + γ_1·a(n(x))``, ``x + γ_2·m(n(x))``, each γ (d_model,) initialised to the recipe's value; the block
holds the vectors itself (``attention_scale``, ``cross_attention_scale``, ``ffn_scale``), and :meth:`Block.held_cost`
declares them. Off (None, the default), the block has no such parameters and multiplies nothing.

Each sub-layer has its own norms, built from the recipe's ``norm`` at the model's width. The layout is chosen
once, at construction (:func:`make_block`): ``Block`` is the sequential pre-norm family (pre, sandwich, output,
a norm that a layout lacks being ``nn.Identity``), ``PostNormBlock`` and ``ParallelBlock`` the other two, each
forward a straight line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import nn

from zoo.cache import static_cache
from zoo.cost import Cost
from zoo.recipe.block import BlockConfig, NormPosition

__all__ = ["Block", "BlockCache", "BlockConfig", "NormPosition", "ParallelBlock", "PostNormBlock", "make_block"]


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

    This class is the sequential pre-norm family, ``x + dropout(post_norm(f(norm(x))))`` for each sub-layer ``f``:
    ``pre`` (no output norm), ``sandwich`` (both), ``output`` (no input norm); :func:`make_block` builds the class
    of any layout.

    Args:
        attention: the self-attention module.
        ffn: the feed-forward module.
        norm: builds one norm (called once per norm the layout needs, in the order of the sub-layers).
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
        residual_multiplier: multiplies each sub-layer's output (after dropout) before it joins the stream.
        layer_scale: the initial value of each sub-layer's learned per-channel scale γ (applied after dropout,
            before ``residual_multiplier``), or None: no scale. Needs ``width``; refused with ``parallel``.
        width: the model's width (d_model), the length of each γ.

    Raises:
        ValueError: a layout with no formula, or a layout that is not this class's (use :func:`make_block`).
    """

    layouts: ClassVar[tuple[str, ...]] = ("pre", "sandwich", "output")

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
        residual_multiplier: float = 1.0,
        layer_scale: float | None = None,
        width: int | None = None,
    ) -> None:
        super().__init__()
        if norm_position not in ("pre", "post", "sandwich", "output"):
            raise ValueError(f"norm_position must be pre, post, sandwich or output, not {norm_position!r}")
        if not attention_norm and (parallel or norm_position not in ("pre", "sandwich")):
            raise ValueError("attention_norm=False needs a sequential pre or sandwich block")
        # the rules of a recipe's block: section
        BlockConfig(
            norm_position=norm_position,
            parallel=parallel,
            shared_norm=shared_norm,
            residual_multiplier=residual_multiplier,
            layer_scale=layer_scale,
        )
        if layer_scale is not None and width is None:
            raise ValueError("layer_scale needs width (d_model), the length of each sub-layer's learned scale")
        layout = "parallel" if parallel else norm_position
        if layout not in self.layouts:
            raise ValueError(f"{type(self).__name__} has no {layout} layout: make_block builds the class of each")
        self.norm_position = norm_position
        self.parallel = parallel
        before = norm_position != "output"  # a norm on each sub-layer's input
        after = norm_position in ("sandwich", "output")  # a norm on each sub-layer's output

        def optional(present: bool) -> nn.Module:
            return norm() if present else nn.Identity()

        cross = cross_attention is not None
        self.skip_ffn = bool(getattr(ffn, "adds_nothing", False))
        self.attention_norm = optional(before and attention_norm)
        self.attention = attention
        self.attention_post_norm = optional(after)
        self.cross_attention_norm = optional(before and cross)
        self.cross_attention = cross_attention
        self.cross_attention_post_norm = optional(after and cross)
        self.ffn_norm = None if shared_norm else optional(before and not self.skip_ffn)  # shared: the FFN reads h
        self.ffn = ffn
        self.stateful_ffn = hasattr(ffn, "new_cache")  # it needs earlier tokens: see new_cache
        self.ffn_post_norm = optional(after and not self.skip_ffn)
        self.dropout = nn.Dropout(dropout)
        self.residual_multiplier = residual_multiplier
        self.layer_scale = layer_scale
        self.width = width

        def scale(present: bool) -> nn.Parameter | None:
            return nn.Parameter(torch.full((width,), float(layer_scale))) if present and layer_scale else None

        self.attention_scale = scale(True)
        self.cross_attention_scale = scale(cross)
        self.ffn_scale = scale(not self.skip_ffn)

    def reset_layer_scale(self) -> None:
        """(Re)fill every learned scale with ``layer_scale``, its initial value."""
        with torch.no_grad():
            for gamma in (self.attention_scale, self.cross_attention_scale, self.ffn_scale):
                if gamma is not None and not gamma.is_meta:
                    gamma.fill_(self.layer_scale)

    def held_cost(self) -> Cost | None:
        """The parameters the block holds itself, outside its components: one learned scale of ``width`` per
        scaled sub-layer (an elementwise multiply, no matmul), or None without layer scale."""
        if self.layer_scale is None:
            return None
        sublayers = 1 + (self.cross_attention is not None) + (not self.skip_ffn)
        return Cost(params=sublayers * self.width)

    def residual(self, h: torch.Tensor, scale: torch.Tensor | None = None) -> torch.Tensor:
        """What a sub-layer's output ``h`` adds to the stream: ``dropout(h)``, times the sub-layer's learned
        ``scale`` (layer scale; None: none), times ``residual_multiplier``."""
        h = self.dropout(h)
        if scale is not None:
            h = h * scale  # (N, L, E) * (E,)
        return h if self.residual_multiplier == 1.0 else h * self.residual_multiplier  # a constructor constant

    def new_cache(self, batch_size: int, max_len: int, static: bool = False) -> Any:
        """The self-attention's decoding cache, paired with the FFN's in a ``BlockCache`` when it has one;
        ``static``: a KV cache of fixed shapes (``zoo.cache.static_cache``), which a decode step compiles with."""
        cache = self.attention.new_cache(batch_size, max_len)
        if static:
            cache = static_cache(cache, max_len)
        return BlockCache(cache, self.ffn.new_cache(batch_size, max_len)) if self.stateful_ffn else cache

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
        cache, ffn_args = _split_cache(cache, mask) if self.stateful_ffn else (cache, {})
        h = self.attention(self.attention_norm(x), mask=mask, positions=positions, pos=pos, cache=cache)
        x = x + self.residual(self.attention_post_norm(h), self.attention_scale)
        if self.cross_attention is not None:
            h = self.cross_attention(
                self.cross_attention_norm(x), context=context, mask=context_mask, cache=cross_cache
            )
            x = x + self.residual(self.cross_attention_post_norm(h), self.cross_attention_scale)
        if self.skip_ffn:
            return x
        return x + self.residual(self.ffn_post_norm(self.ffn(self.ffn_norm(x), **ffn_args)), self.ffn_scale)


class PostNormBlock(Block):
    """The original Transformer's and BERT's layout: ``n(x + dropout(f(x)))`` for each sub-layer (with layer scale
    ``n(x + γ·dropout(f(x)))``)."""

    layouts: ClassVar[tuple[str, ...]] = ("post",)

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
        """As :meth:`Block.forward`."""
        cache, ffn_args = _split_cache(cache, mask) if self.stateful_ffn else (cache, {})
        h = self.attention(x, mask=mask, positions=positions, pos=pos, cache=cache)
        x = self.attention_norm(x + self.residual(h, self.attention_scale))
        if self.cross_attention is not None:
            h = self.cross_attention(x, context=context, mask=context_mask, cache=cross_cache)
            x = self.cross_attention_norm(x + self.residual(h, self.cross_attention_scale))
        if self.skip_ffn:
            return x
        return self.ffn_norm(x + self.residual(self.ffn(x, **ffn_args), self.ffn_scale))


class ParallelBlock(Block):
    """GPT-NeoX's layout: every sub-layer reads ``x`` through its own norm (with ``shared_norm``, GPT-J's, through
    the attention's), and ``x + dropout(a + c + m)`` adds their outputs at once (times ``residual_multiplier``)."""

    layouts: ClassVar[tuple[str, ...]] = ("parallel",)

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
        """As :meth:`Block.forward`."""
        cache, ffn_args = _split_cache(cache, mask) if self.stateful_ffn else (cache, {})
        h = self.attention_norm(x)
        out = self.attention(h, mask=mask, positions=positions, pos=pos, cache=cache)
        if self.cross_attention is not None:
            c = self.cross_attention_norm(x)
            out = out + self.cross_attention(c, context=context, mask=context_mask, cache=cross_cache)
        if not self.skip_ffn:
            out = out + self.ffn(h if self.ffn_norm is None else self.ffn_norm(x), **ffn_args)
        return x + self.residual(out)


def make_block(*, norm_position: NormPosition = "pre", parallel: bool = False, **parts: Any) -> Block:
    """The block of a layout (:class:`Block`'s arguments): a ``ParallelBlock``, a ``PostNormBlock`` or a ``Block``."""
    cls = ParallelBlock if parallel else PostNormBlock if norm_position == "post" else Block
    return cls(norm_position=norm_position, parallel=parallel, **parts)


def _split_cache(cache: Any, mask: torch.Tensor | None) -> tuple[Any, dict[str, Any]]:
    """A stateful FFN's block: the attention's cache, and the FFN's keyword arguments (its part of the cache)."""
    if isinstance(cache, BlockCache):
        return cache.attention, {"mask": mask, "cache": cache.ffn}
    return cache, {"mask": mask, "cache": None}
