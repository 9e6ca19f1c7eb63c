"""``zoo draw``: a recipe's architecture as a block diagram, in the style of "Attention Is All You Need".

The figure shows what a meta-device build of the recipe holds (``model.zoo_components``, no memory, a few
milliseconds): the input embedding and positional encoding, each distinct kind of block with its norms,
attention (heads, KV heads, head_dim) and feed-forward (widths, experts and top-k), its residual
connections drawn as the block computes them (pre-norm, post-norm, sandwich, parallel), the ``× N``
repeat, the final norm and the head. An encoder-decoder shows both stacks side by side, the encoder
output feeding every cross-attention. Components of plugins show with their registered name and the
options their recipe sets.

Two steps: ``describe`` turns a built model into ``Stack`` facts (the text of every box), and ``layout``
places them on a ``Canvas``, one data unit to the inch, with text measured in the font it is drawn in, so
boxes fit their text and nothing overlaps. ``draw`` draws the canvas with matplotlib (the ``zoo[plot]``
extra, imported only there) into an SVG or a PNG.

    from zoo.draw import draw
    draw("gpt2-small", "gpt2.svg")
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zoo.errors import ArgumentError, ZooError

__all__ = ["FORMATS", "RC", "Canvas", "Kind", "Label", "Stack", "Unit", "describe", "draw", "layout"]

FORMATS = {".svg": "svg", ".png": "png"}
"""The file suffixes ``draw`` writes, and the matplotlib format of each."""

# ------------------------------------------------------------------------------------------------ the facts


@dataclass
class Label:
    """What one box says: its colour (``kind``), a bold title and lines of detail."""

    kind: str
    """embedding, positional, attention, ffn, norm, head or other."""
    title: str
    lines: list[str] = field(default_factory=list)
    experts: tuple[int, int] | None = None
    """(routed experts, top_k): an MoE draws a row of its experts, the top-k filled."""


@dataclass
class Unit:
    """One sub-layer of a block with its norms; its residual connection follows the block's layout."""

    sublayer: Label
    norm: Label | None = None
    """Before the sub-layer (pre, sandwich, parallel) or after the residual add (post)."""
    post_norm: Label | None = None
    """sandwich, output: on the sub-layer's output, before the add."""
    cross: bool = False
    """It attends over the encoder output."""


@dataclass
class Kind:
    """The blocks of a stack that are built alike (layers that differ make more kinds)."""

    layers: list[int]
    units: list[Unit]
    layout: str
    """pre, post, sandwich, parallel, or chain (a block zoo does not know: its parts in order, no residuals)."""
    shared_norm: Label | None = None
    """parallel with shared_norm: the one norm that feeds every sub-layer."""
    params: int = 0
    """Parameters of one such block."""
    name: str = ""
    """A, B, ... when a stack has several kinds."""


@dataclass
class Stack:
    """One column of the figure: input, embedding, positions, blocks, final norm, and the head if it has it."""

    name: str
    """encoder, decoder, or empty for the only stack."""
    num_layers: int
    """0 for the components of an architecture whose blocks zoo does not recognise."""
    input: str
    embedding: Label | None
    positional: Label | None
    """Positions added to the embeddings (a ⊕); rotary and bias encodings are noted in the attention instead."""
    embed_norm: Label | None
    kinds: list[Kind]
    final_norm: Label | None
    head: Label | None = None
    output: str | None = None
    causal: bool = False
    """Its attention sees earlier positions only."""


BLOCK_CHILDREN = (
    "attention_norm",
    "attention",
    "attention_post_norm",
    "cross_attention_norm",
    "cross_attention",
    "cross_attention_post_norm",
    "ffn_norm",
    "ffn",
    "ffn_post_norm",
)
"""The components a ``zoo.components.block.Block`` may hold, in the order it applies them."""
SUBLAYERS = ("attention", "cross_attention", "ffn")
NORM_NAMES = {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm"}
SKIP_OPTIONS = {"type", "num_heads", "num_kv_heads", "head_dim", "hidden", "activation", "dropout", "multiple_of"}
"""Options that a box shows in its own words (or not at all) rather than as ``key=value``."""


def describe(model: Any) -> tuple[list[Stack], list[str]]:
    """The stacks of a model built by ``zoo.build`` (the meta device is enough), and notes on anything the
    figure does not place (a plugin architecture's extra components)."""
    made = {p: m for p, m in model.zoo_components.items() if m.kind != "architecture"}
    top = {p: m for p, m in made.items() if not m.nested}
    blocks: dict[str, dict[int, dict[str, Any]]] = {}  # stack prefix -> block index -> child -> provenance
    for path, m in top.items():
        prefix, sep, rest = path.rpartition("blocks.")
        index, _, child = rest.partition(".")
        if sep and (prefix == "" or prefix.endswith(".")) and index.isdigit() and child and "." not in child:
            blocks.setdefault(prefix, {}).setdefault(int(index), {})[child] = (path, m)
    used = {path for stack in blocks.values() for children in stack.values() for path, _ in children.values()}
    shared = [(p, m) for p, m in top.items() if "." not in p and m.kind in ("embedding", "head")]
    used |= {p for p, _ in shared}
    embedding = next(((p, m) for p, m in shared if m.kind == "embedding"), None)
    head = next(((p, m) for p, m in shared if m.kind == "head"), None)
    names = [prefix.rstrip(".") for prefix in blocks]
    stacks = []
    for n, (prefix, by_index) in enumerate(blocks.items()):
        own = {
            p.removeprefix(prefix): (p, m)
            for p, m in top.items()
            if p.startswith(prefix) and p.count(".") == prefix.count(".")
        }
        positional = own.get("positional")
        embed_norm, final_norm = own.get("embed_norm"), own.get("final_norm")
        own_embedding = own.get("embedding") if prefix else None  # a stack of its own embeds its own input
        used |= {p for p, _ in filter(None, (positional, embed_norm, final_norm, own_embedding))}
        sharers = names if len(blocks) > 1 and own_embedding is None else []
        entry = own_embedding or embedding
        note = _position_note(positional[1]) if positional else None
        last = n == len(blocks) - 1
        has_cross = any("cross_attention" in c for c in by_index.values())
        stack = Stack(
            name=names[n],
            num_layers=len(by_index),
            input=_input_text(entry[1] if entry else None, len(blocks) > 1, has_cross),
            embedding=_embedding_label(entry, model, sharers) if entry else None,
            positional=_positional_label(positional, model) if positional else None,
            embed_norm=_norm_label(embed_norm[1], "embeddings") if embed_norm else None,
            kinds=_kinds(model, prefix, by_index, note, made),
            final_norm=_norm_label(final_norm[1], "final") if final_norm else None,
            causal=any(m.ctx is not None and m.ctx.causal for c in by_index.values() for _, m in c.values()),
        )
        if positional and _style(positional[1]) == "none" and stack.embedding is not None:
            stack.embedding.lines.append("no positional encoding")
        if last and head is not None:
            stack.head, stack.output = _head_label(head[1])
        stacks.append(stack)
    notes = [f"{s.name or 'block'} order, first to last: {_block_order(s.kinds)}" for s in stacks if len(s.kinds) > 1]
    notes += [f"also built: {p} ({m.kind} {m.name})" for p, m in top.items() if p not in used]
    if not stacks:  # an architecture whose blocks zoo cannot find: every component, in module order
        units = [Unit(_component_label(p, m, model, made)) for p, m in top.items()]
        stacks = [Stack("", 0, "input", None, None, None, [Kind([], units, "chain")], None)]
        notes = ["the blocks of this architecture were not recognised: its components are shown in module order"]
    return stacks, notes


def _kinds(model: Any, prefix: str, by_index: dict[int, dict[str, Any]], note: str | None, made: dict) -> list[Kind]:
    """The distinct kinds of block of one stack, in the order of their first layer."""
    groups: dict[tuple, list[int]] = {}
    for i in sorted(by_index):
        block = model.get_submodule(f"{prefix}blocks.{i}")
        groups.setdefault(_signature(block, by_index[i]), []).append(i)
    kinds = []
    for n, layers in enumerate(groups.values()):
        children = by_index[layers[0]]
        block = model.get_submodule(f"{prefix}blocks.{layers[0]}")
        kinds.append(_kind(model, block, children, layers, note, made))
        if len(groups) > 1:
            kinds[-1].name = chr(ord("A") + n) if n < 26 else str(n + 1)
    return kinds


def _block_order(kinds: list[Kind]) -> str:
    """The kinds of a stack's blocks from the first to the last, runs counted: ``A × 3, B, A``."""
    of = {i: kind.name for kind in kinds for i in kind.layers}
    runs: list[list[Any]] = []
    for i in sorted(of):
        if runs and runs[-1][0] == of[i]:
            runs[-1][1] += 1
        else:
            runs.append([of[i], 1])
    words = [name if count == 1 else f"{name} × {count}" for name, count in runs]
    return ", ".join(words[:16]) + (", …" if len(words) > 16 else "")


def _signature(block: Any, children: dict[str, Any]) -> tuple:
    """What makes two blocks the same: their layout and each component's name and full config."""
    parts = tuple(
        (child, m.name, json.dumps(m.config.model_dump(mode="json"), sort_keys=True, default=str))
        for child, (_, m) in children.items()
    )
    return (getattr(block, "norm_position", None), getattr(block, "parallel", None), *parts)


def _kind(model: Any, block: Any, children: dict[str, Any], layers: list[int], note: str | None, made: dict) -> Kind:
    params = sum(p.numel() for p in block.parameters())
    known = set(children) <= set(BLOCK_CHILDREN) and {"attention", "ffn"} <= set(children)
    if not known:
        units = [Unit(_component_label(p, m, model, made)) for p, m in children.values()]
        return Kind(layers, units, "chain", params=params)
    causal = bool(children["attention"][1].ctx.causal)
    units = []
    for name in SUBLAYERS:
        if name not in children:
            continue
        path, m = children[name]
        if name == "ffn":
            sublayer = _ffn_label(path, m, model, made)
        else:
            sublayer = _attention_label(m, cross=name == "cross_attention", causal=causal, note=note)
        norm = children.get(f"{name}_norm")
        post = children.get(f"{name}_post_norm")
        units.append(
            Unit(
                sublayer,
                norm=_norm_label(norm[1]) if norm else None,
                post_norm=_norm_label(post[1], "output") if post else None,
                cross=name == "cross_attention",
            )
        )
    if getattr(block, "parallel", False):
        if "ffn_norm" not in children:  # shared_norm: the attention's norm feeds every sub-layer
            norm, units = units[0].norm, [Unit(u.sublayer, cross=u.cross) for u in units]
            return Kind(layers, units, "parallel", shared_norm=norm, params=params)
        return Kind(layers, units, "parallel", params=params)
    return Kind(layers, units, str(getattr(block, "norm_position", "pre")), params=params)


# ----------------------------------------------------------------------------------------- labels of boxes


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _options(config: Any, skip: set[str] = SKIP_OPTIONS) -> list[str]:
    """The options a recipe sets on a component, or that are off their defaults, as short ``key=value`` words."""
    words = []
    for name, spec in type(config).model_fields.items():
        value = getattr(config, name)
        shown = name in config.model_fields_set or value != spec.get_default(call_default_factory=True)
        if name in skip or not shown:
            continue
        if isinstance(value, bool):
            words.append(name if value else f"no {name}")
        elif isinstance(value, Mapping):
            words.append(f"{name}={value.get('type', '…')}")
        elif hasattr(value, "type") and hasattr(value, "model_dump"):
            words.append(f"{name}={value.type}")
        elif value is not None:
            words.append(f"{name}={_number(value)}")
    return sorted(words, key=lambda word: "=" not in word)  # values first, then the switches


def _wrap(words: list[str], width: int = 48) -> list[str]:
    return textwrap.wrap(", ".join(words), width=width, break_long_words=False, break_on_hyphens=False)


def _plugin(m: Any) -> list[str]:
    return [] if m.plugin.startswith("zoo.") else [f"plugin: {m.plugin}"]


def _style(m: Any) -> str:
    return getattr(type(m.config), "style", "embed")


def _position_note(m: Any) -> str | None:
    """How a rotary or bias encoding shows inside the self-attention it acts on."""
    style, cfg = _style(m), m.config
    if style == "rotate" and m.name == "rope":
        words = [f"RoPE θ={_number(cfg.theta)}"]
        if cfg.rotary_fraction < 1:
            words.append(f"on {cfg.rotary_fraction:g} of dims")
        if cfg.scaling != "none":
            words.append(f"{cfg.scaling} scaling ×{_number(cfg.scaling_factor)}")
        return ", ".join(words)
    if m.name == "t5_relative":
        return f"T5 relative bias: {cfg.num_buckets} buckets, max distance {cfg.max_distance}"
    if m.name == "alibi":
        return "ALiBi position bias"
    if style in ("rotate", "bias"):
        what = "rotation" if style == "rotate" else "position bias"
        options = _options(cfg)
        return f"{m.name} {what}" + (f" ({', '.join(options)})" if options else "")
    return None


def _input_text(m: Any, several: bool, has_cross: bool) -> str:
    if m is not None and not getattr(type(m.config), "token_input", True):
        ctx = m.ctx
        return f"image {ctx.num_channels} × {ctx.image_size} × {ctx.image_size}"
    if several:
        return "target token ids (shifted right)" if has_cross else "source token ids"
    return "token ids"


def _embedding_label(entry: tuple[str, Any], model: Any, sharers: list[str]) -> Label:
    path, m = entry
    cfg, ctx, E = m.config, m.ctx, m.ctx.d_model
    if m.name == "token":
        proj = getattr(cfg, "proj_dim", None)
        lines = [f"{ctx.vocab_size} × {E}" if proj is None else f"{ctx.vocab_size} × {proj}, linear {proj} → {E}"]
        if ctx.type_vocab_size:
            lines.append(f"+ segment embedding {ctx.type_vocab_size} × {E}")
        if cfg.scale:
            lines.append("scaled by √d_model")
        label = Label("embedding", "Token embedding", lines)
    elif m.name == "patch":
        module = model.get_submodule(path)
        P = ctx.patch_size
        lines = [f"{P} × {P} patches → {E}", f"{module.num_patches} patches" + (" + [CLS]" if cfg.cls_token else "")]
        label = Label("embedding", "Patch embedding", lines)
    else:
        label = Label("embedding", f"Embedding · {m.name}", [f"→ {E}", *_wrap(_options(cfg))])
    if sharers:
        label.lines.append(f"shared by {' and '.join(sharers)}")
    label.lines += _plugin(m)
    return label


def _positional_label(entry: tuple[str, Any], model: Any) -> Label | None:
    """The label of positions added to the embeddings; None for other styles (see ``_position_note``)."""
    path, m = entry
    if _style(m) != "embed":
        return None
    tables = sorted(model.get_submodule(path).parameters(), key=lambda p: p.numel())
    lines = [" × ".join(str(d) for d in tables[-1].shape if d != 1)] if tables else ["fixed"]
    return Label("positional", f"{m.name} positions", lines + _wrap(_options(m.config)) + _plugin(m))


def _norm_label(m: Any, where: str | None = None) -> Label:
    name = NORM_NAMES.get(m.name, m.name)
    return Label("norm", f"{name} ({where})" if where else name)


def _attention_label(m: Any, *, cross: bool, causal: bool, note: str | None) -> Label:
    cfg, ctx = m.config, m.ctx
    what = "Cross-attention" if cross else ("Causal self-attention" if causal else "Self-attention")
    heads, kv = getattr(cfg, "num_heads", None), getattr(cfg, "num_kv_heads", None)
    words = []
    if isinstance(heads, int):
        words.append(f"{heads} heads")
        if isinstance(kv, int) and kv != heads:
            words.append(f"{kv} KV head" + ("s" if kv > 1 else ""))
    if ctx.head_dim:
        words.append(f"head_dim {ctx.head_dim}")
    lines = [", ".join(words)] if words else []
    if cross:
        lines.append("keys, values: encoder output")
    elif note:
        lines += _wrap([note])
    lines += _wrap(_options(cfg)) + _plugin(m)
    return Label("attention", f"{what} · {m.name}", lines)


def _hidden(m: Any, module: Any) -> int | None:
    """An FFN's hidden width: the recipe's, else that of its first projection out of d_model."""
    from torch import nn

    hidden = getattr(m.config, "hidden", None)
    if isinstance(hidden, int):
        return hidden
    for sub in module.modules():
        if isinstance(sub, nn.Linear) and sub.in_features == m.ctx.d_model:
            return sub.out_features
    return None


def _widths(m: Any, module: Any) -> str:
    E, H = m.ctx.d_model, _hidden(m, module)
    text = f"{E} → {H} → {E}" if H else f"{E} → {E}"
    activation = getattr(m.config, "activation", None)
    return f"{text}, {activation}" if isinstance(activation, str) else text


def _stacked_expert(spec: dict, ctx: Any) -> Any:
    """The provenance-like (name, config, ctx) of an MoE's expert spec, for experts held stacked."""
    from types import SimpleNamespace

    from zoo.plugins import get_registry

    config = get_registry().get("ffn", spec["type"]).config.model_validate(spec)
    return SimpleNamespace(name=spec["type"], config=config, ctx=ctx)


def _ffn_label(path: str, m: Any, model: Any, made: dict) -> Label:
    module = model.get_submodule(path)
    cfg = m.config
    experts = [(p, e) for p, e in made.items() if e.nested and p.startswith(f"{path}.experts.")]
    stacked = getattr(module, "experts", None)
    stacked = stacked if hasattr(stacked, "per_expert") else None  # GroupedExperts: one tensor for all
    if (experts or stacked is not None) and hasattr(cfg, "num_experts") and hasattr(cfg, "top_k"):
        if stacked is not None:
            expert = _stacked_expert(cfg.expert, m.ctx)
            E, H = m.ctx.d_model, stacked.hidden
            activation = getattr(expert.config, "activation", None)
            widths = f"{E} → {H} → {E}" + (f", {activation}" if isinstance(activation, str) else "")
            expert_line = f"expert: {expert.name} {widths}"
        else:
            p, e = experts[0]
            expert_line = f"expert: {e.name} {_widths(e, model.get_submodule(p))}"
        lines = [f"router: top-{cfg.top_k} of {cfg.num_experts} experts", expert_line]
        shared = [(p, e) for p, e in made.items() if e.nested and p == f"{path}.shared_expert"]
        if shared:
            p, e = shared[0]
            lines.append(f"+ shared expert: {e.name} {_widths(e, model.get_submodule(p))}")
        skip = SKIP_OPTIONS | {"num_experts", "top_k", "expert", "shared_expert", "aux_loss_coef"}
        lines += _wrap(_options(cfg, skip)) + _plugin(m)
        return Label("ffn", f"Mixture of experts · {m.name}", lines, experts=(cfg.num_experts, cfg.top_k))
    lines = [_widths(m, module), *_wrap(_options(cfg)), *_plugin(m)]
    return Label("ffn", f"Feed-forward · {m.name}", lines)


def _head_label(m: Any) -> tuple[Label, str | None]:
    """The head's box and the words for what comes out of it."""
    cfg, ctx, E = m.config, m.ctx, m.ctx.d_model
    tied = getattr(cfg, "tie_embeddings", None)
    tie = "tied to the token embedding" if tied else "untied"
    if m.name == "lm":
        proj = getattr(cfg, "proj_dim", None)
        lines = [f"linear {E} → {ctx.vocab_size}" if proj is None else f"linear {E} → {proj} → {ctx.vocab_size}", tie]
        if cfg.rescale:
            lines.append("input scaled by 1/√d_model")
        return Label("head", "LM head · lm", lines), "next-token logits" if ctx.causal else "token logits"
    if m.name == "mlm":
        lines = ["dense + GELU + LayerNorm", f"linear {E} → {ctx.vocab_size}", tie]
        return Label("head", "Masked-LM head · mlm", lines), "token logits (masked LM)"
    if m.name == "classification":
        lines = [f"pool: {cfg.pool}" + (", dense + tanh" if cfg.pooler else ""), f"linear {E} → {ctx.num_classes}"]
        return Label("head", "Classification head", lines), f"{ctx.num_classes} class logits"
    if m.name == "pooler":
        lines = [f"pool: {cfg.pool}", f"dense {E} → {E}, tanh"]
        return Label("head", "Pooler · pooler", lines), "pooled features"
    return Label("head", f"Head · {m.name}", _wrap(_options(cfg)) + _plugin(m)), None


def _component_label(path: str, m: Any, model: Any, made: dict) -> Label:
    """Any component, in a block or an architecture zoo does not know."""
    if m.kind == "attention":
        return _attention_label(m, cross=bool(m.ctx.cross), causal=bool(m.ctx.causal), note=None)
    if m.kind == "ffn":
        return _ffn_label(path, m, model, made)
    if m.kind == "norm":
        return _norm_label(m)
    kind = m.kind if m.kind in ("embedding", "head", "positional") else "other"
    return Label(kind, f"{m.kind} · {m.name}", [path, *_wrap(_options(m.config)), *_plugin(m)])


# ------------------------------------------------------------------------------------------------ drawing

COLORS = {
    "embedding": "#f8cecc",
    "positional": "#ffffff",
    "attention": "#fcdcb4",
    "ffn": "#cce5f6",
    "norm": "#f3f0b8",
    "head": "#e1d5e7",
    "other": "#e6e6e6",
}
INK = "#333333"
FRAME = "#f4f4f4"
EXPERT_ON = "#3d85c6"

TITLE_PT, SUBTITLE_PT, BOX_TITLE_PT, BOX_PT, SIDE_PT, REPEAT_PT = 15, 9.5, 9.5, 8, 8.5, 16
PAD_X, PAD_Y = 0.14, 0.07  # text to box edge, inches
GAP = 0.26  # vertical space between consecutive parts (an arrow)
PLUS_R = 0.1  # radius of a residual add (⊕)
SKIP = 0.17  # box edge to residual line
MARGIN = 0.34  # box edge to block frame
COL_GAP = 0.22  # between the columns of a parallel block
STACK_GAP = 0.9  # between stacks (the encoder output runs here)
EXPERT, EXPERT_GAP, MAX_EXPERTS_SHOWN = 0.13, 0.045, 16
MIN_WIDTH = 2.5


def _line_height(points: float) -> float:
    return points / 72 * 1.35


Rect = tuple[float, float, float, float]
"""(x0, y0, x1, y1) in inches; for a segment, its two ends."""


class Canvas:
    """Drawing operations placed in inches (one data unit), with their extents, drawn later on an Axes.

    ``shapes`` keeps what a reader must tell apart, for checking that nothing collides: ``("text", extent,
    text)``, ``("box", extent, title)`` and ``("segment", ends, "")`` for every straight piece of a line.
    """

    def __init__(self, measure: Callable[[str, float, bool], float]) -> None:
        self.measure = measure
        self.ops: list[tuple[Callable[[Any, float, float], None], Rect]] = []
        self.shapes: list[tuple[str, Rect, str]] = []

    # extents
    def add(self, op: Callable[[Any, float, float], None], box: Rect) -> None:
        self.ops.append((op, box))

    def bounds(self) -> tuple[float, float, float, float]:
        boxes = [b for _, b in self.ops]
        return (
            min(b[0] for b in boxes),
            min(b[1] for b in boxes),
            max(b[2] for b in boxes),
            max(b[3] for b in boxes),
        )

    def paste(self, other: Canvas, dx: float, dy: float = 0.0) -> None:
        """Everything on ``other``, moved by (dx, dy)."""
        for op, (x0, y0, x1, y1) in other.ops:
            self.add(lambda ax, ox, oy, op=op: op(ax, ox + dx, oy + dy), (x0 + dx, y0 + dy, x1 + dx, y1 + dy))
        for tag, (x0, y0, x1, y1), what in other.shapes:
            self.shapes.append((tag, (x0 + dx, y0 + dy, x1 + dx, y1 + dy), what))

    # primitives
    def text(
        self, x: float, y: float, s: str, size: float, *, bold: bool = False, ha: str = "center", color: str = INK
    ) -> None:
        """``s`` with its vertical centre at ``y``, aligned on ``x`` by ``ha``."""
        w, h = self.measure(s, size, bold), _line_height(size)
        x0 = {"center": x - w / 2, "left": x, "right": x - w}[ha]

        def op(ax: Any, dx: float, dy: float) -> None:
            ax.text(
                x + dx, y + dy, s, fontsize=size, fontweight="bold" if bold else "normal", ha=ha, va="center",
                color=color, zorder=4, parse_math=False,
            )  # fmt: skip

        self.add(op, (x0, y - h / 2, x0 + w, y + h / 2))
        self.shapes.append(("text", (x0, y - h / 2, x0 + w, y + h / 2), s))

    def line(self, points: list[tuple[float, float]], *, arrow: bool = True, width: float = 1.0) -> None:
        """A polyline, with an arrowhead at its end when ``arrow``."""

        def op(ax: Any, dx: float, dy: float) -> None:
            from matplotlib.lines import Line2D
            from matplotlib.patches import FancyArrowPatch

            pts = [(x + dx, y + dy) for x, y in points]
            body = pts[:-1] if arrow else pts
            if len(body) > 1:
                xs, ys = zip(*body, strict=True)
                ax.add_line(Line2D(xs, ys, color=INK, lw=width, zorder=1, solid_joinstyle="miter"))
            if arrow:
                ax.add_patch(
                    FancyArrowPatch(
                        pts[-2], pts[-1], arrowstyle="-|>", mutation_scale=10, color=INK, lw=width,
                        shrinkA=0, shrinkB=0, zorder=1.5,
                    )
                )  # fmt: skip

        xs, ys = [p[0] for p in points], [p[1] for p in points]
        self.add(op, (min(xs), min(ys), max(xs), max(ys)))
        self.shapes += [("segment", (*a, *b), "") for a, b in zip(points, points[1:], strict=False)]

    def plus(self, x: float, y: float) -> None:
        """A residual add: a circle with a plus."""

        def op(ax: Any, dx: float, dy: float) -> None:
            from matplotlib.lines import Line2D
            from matplotlib.patches import Circle

            cx, cy, r = x + dx, y + dy, PLUS_R
            ax.add_patch(Circle((cx, cy), r, fc="white", ec=INK, lw=1, zorder=2))
            ax.add_line(Line2D([cx - 0.6 * r, cx + 0.6 * r], [cy, cy], color=INK, lw=1, zorder=3))
            ax.add_line(Line2D([cx, cx], [cy - 0.6 * r, cy + 0.6 * r], color=INK, lw=1, zorder=3))

        self.add(op, (x - PLUS_R, y - PLUS_R, x + PLUS_R, y + PLUS_R))

    def dot(self, x: float, y: float) -> None:
        def op(ax: Any, dx: float, dy: float) -> None:
            from matplotlib.patches import Circle

            ax.add_patch(Circle((x + dx, y + dy), 0.028, fc=INK, ec=INK, lw=0, zorder=2))

        self.add(op, (x, y, x, y))

    def rect(self, x0: float, y0: float, w: float, h: float, *, fill: str, edge: str, z: float, r: float) -> None:
        def op(ax: Any, dx: float, dy: float) -> None:
            from matplotlib.patches import FancyBboxPatch

            style = f"round,pad=0,rounding_size={r}"
            ax.add_patch(FancyBboxPatch((x0 + dx, y0 + dy), w, h, boxstyle=style, fc=fill, ec=edge, lw=0.9, zorder=z))

        self.add(op, (x0, y0, x0 + w, y0 + h))

    # parts
    def label_width(self, label: Label) -> float:
        widths = [self.measure(label.title, BOX_TITLE_PT, True), *(self.measure(s, BOX_PT, False) for s in label.lines)]
        if label.experts:
            shown = min(label.experts[0], MAX_EXPERTS_SHOWN)
            widths.append(shown * (EXPERT + EXPERT_GAP) + 0.4)
        return max(widths) + 2 * PAD_X

    @staticmethod
    def label_height(label: Label) -> float:
        h = 2 * PAD_Y + _line_height(BOX_TITLE_PT) + len(label.lines) * _line_height(BOX_PT)
        return h + (EXPERT + 0.08 if label.experts else 0)

    def box(self, label: Label, x: float, y: float, w: float) -> float:
        """``label`` in a box of width ``w`` centred on ``x`` with its bottom at ``y``; returns its top."""
        h = self.label_height(label)
        self.rect(x - w / 2, y, w, h, fill=COLORS.get(label.kind, COLORS["other"]), edge=INK, z=2, r=0.06)
        self.shapes.append(("box", (x - w / 2, y, x + w / 2, y + h), label.title))
        top = y + h - PAD_Y
        self.text(x, top - _line_height(BOX_TITLE_PT) / 2, label.title, BOX_TITLE_PT, bold=True)
        for i, s in enumerate(label.lines):
            self.text(x, top - _line_height(BOX_TITLE_PT) - (i + 0.5) * _line_height(BOX_PT), s, BOX_PT)
        if label.experts:
            n, k = label.experts
            shown = min(n, MAX_EXPERTS_SHOWN)
            more = f"+{n - shown}" if n > shown else ""
            row = shown * EXPERT + (shown - 1) * EXPERT_GAP
            left, bottom = x - row / 2 - (0.15 if more else 0), y + PAD_Y
            for i in range(shown):
                fill = EXPERT_ON if i < k else "white"
                self.rect(left + i * (EXPERT + EXPERT_GAP), bottom, EXPERT, EXPERT, fill=fill, edge=INK, z=3, r=0.02)
            if more:
                self.text(left + row + 0.06, bottom + EXPERT / 2, more, BOX_PT - 1, ha="left")
        return y + h

    def side_text(self, x: float, y: float, lines: list[tuple[str, float, bool]], ha: str) -> None:
        """Lines of (text, size, bold) stacked with their middle at ``y``."""
        heights = [_line_height(size) for _, size, _ in lines]
        top = y + sum(heights) / 2
        for (s, size, bold), h in zip(lines, heights, strict=True):
            self.text(x, top - h / 2, s, size, bold=bold, ha=ha)
            top -= h


@dataclass
class _Column:
    """Where a stack ended up: its output (top of the main line) and the cross-attention boxes it feeds."""

    top: tuple[float, float]
    cross: list[tuple[float, float]] = field(default_factory=list)
    """(edge x, centre y) of each cross-attention box, on the side the encoder output comes from."""


def _stack_width(canvas: Canvas, stack: Stack) -> float:
    """The width of the stack's boxes: its widest label, or a parallel block's columns side by side."""
    labels = [stack.embedding, stack.embed_norm, stack.final_norm, stack.head]
    width = max([canvas.label_width(label) for label in labels if label is not None] + [MIN_WIDTH])
    for kind in stack.kinds:
        if kind.layout == "parallel":
            columns = _column_widths(canvas, kind.units)
            width = max(width, sum(columns) + (len(columns) - 1) * COL_GAP)
            if kind.shared_norm is not None:
                width = max(width, canvas.label_width(kind.shared_norm))
        else:
            parts = [p for u in kind.units for p in (u.sublayer, u.norm, u.post_norm) if p is not None]
            width = max(width, *(canvas.label_width(p) for p in parts))
    return width


def _column_widths(canvas: Canvas, units: list[Unit]) -> list[float]:
    """The width each sub-layer of a parallel block needs for its boxes."""
    return [max(canvas.label_width(p) for p in (u.norm, u.sublayer) if p is not None) for u in units]


def _layers_text(layers: list[int]) -> str:
    if len(layers) == 1:
        return f"layer {layers[0]}"
    steps = {b - a for a, b in zip(layers, layers[1:], strict=False)}
    if steps == {1}:
        return f"layers {layers[0]}–{layers[-1]}"
    if len(steps) == 1 and len(layers) > 3:
        return f"layers {layers[0]}, {layers[1]}, …, {layers[-1]}"
    shown = ", ".join(str(i) for i in layers[:6])
    return f"layers {shown}" + (", …" if len(layers) > 6 else "")


LAYOUT_WORDS = {
    "pre": "pre-norm",
    "post": "post-norm",
    "sandwich": "sandwich norm",
    "output": "norm on each output",
    "parallel": "parallel attention + FFN",
    "chain": "components in order",
}


def _count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def _draw_stack(canvas: Canvas, stack: Stack, width: float, *, skip_side: int, label_side: int) -> _Column:
    """Lay out ``stack`` centred on x = 0 from y = 0 upwards. ``skip_side`` (-1 left, +1 right) is where
    residual lines run, ``label_side`` where the ``× N`` and the positional labels go."""
    x, w = 0.0, width
    skip_x = skip_side * (w / 2 + SKIP)
    frame_x = w / 2 + MARGIN
    column = _Column(top=(0, 0))

    canvas.text(x, 0.1, stack.input, SIDE_PT)
    y = 0.1 + _line_height(SIDE_PT) / 2

    def arrow_to(top: float, bottom: float, *, arrow: bool = True) -> None:
        canvas.line([(x, top), (x, bottom)], arrow=arrow)

    if stack.embedding is not None:
        arrow_to(y, y + GAP)
        y = canvas.box(stack.embedding, x, y + GAP, w)
    if stack.positional is not None:
        arrow_to(y, y + GAP)
        cy = y + GAP + PLUS_R
        canvas.plus(x, cy)
        start = label_side * (PLUS_R + 0.45)
        canvas.line([(start, cy), (label_side * PLUS_R, cy)])
        lines = [(stack.positional.title, SIDE_PT, True)] + [(s, SIDE_PT - 0.5, False) for s in stack.positional.lines]
        canvas.side_text(start + label_side * 0.08, cy, lines, "left" if label_side > 0 else "right")
        y = cy + PLUS_R
    if stack.embed_norm is not None:
        arrow_to(y, y + GAP)
        y = canvas.box(stack.embed_norm, x, y + GAP, w)

    for kind in stack.kinds:
        frame_bottom = y + GAP * 0.6
        arrow_to(y, frame_bottom, arrow=False)
        y = frame_bottom + 0.02
        arrow_to(frame_bottom, y, arrow=False)
        if kind.layout == "parallel":
            y = _parallel(canvas, kind, x, y, w, skip_x, column, skip_side)
        else:
            y = _sequential(canvas, kind, x, y, w, skip_x, column, skip_side)
        frame_top = y + 0.16
        canvas.rect(
            -frame_x, frame_bottom, 2 * frame_x, frame_top - frame_bottom, fill=FRAME, edge="#9a9a9a", z=0, r=0.12
        )
        arrow_to(y, frame_top, arrow=False)
        side = _side_label(stack, kind)
        canvas.side_text(
            label_side * (frame_x + 0.16), (frame_bottom + frame_top) / 2, side, "left" if label_side > 0 else "right"
        )
        y = frame_top

    for label in (stack.final_norm, stack.head):
        if label is not None:
            arrow_to(y, y + GAP)
            y = canvas.box(label, x, y + GAP, w)
    if stack.output is not None:
        arrow_to(y, y + GAP)
        canvas.text(x, y + GAP + _line_height(SIDE_PT) / 2, stack.output, SIDE_PT, bold=True)
        y += GAP + _line_height(SIDE_PT)
    column.top = (x, y)
    return column


def _side_label(stack: Stack, kind: Kind) -> list[tuple[str, float, bool]]:
    """What stands beside a block's frame: ``× N``, which blocks, their layout and size."""
    if not stack.num_layers:  # not blocks at all: the components of an architecture zoo does not know
        return [(LAYOUT_WORDS["chain"], SIDE_PT, False)]
    what = f"{stack.name or ('decoder' if stack.causal else 'encoder')} block"
    side = [(f"× {len(kind.layers)}", REPEAT_PT, True)]
    side.append((f"{what} {kind.name}" if kind.name else f"{what}s", SIDE_PT, False))
    side.append((LAYOUT_WORDS.get(kind.layout, kind.layout), SIDE_PT, False))
    if len(stack.kinds) > 1:
        side.append((_layers_text(kind.layers), SIDE_PT, False))
    side.append((f"{_count(kind.params)} params each", SIDE_PT, False))
    return side


def _residual_unit(
    canvas: Canvas, unit: Unit, x: float, y: float, w: float, skip_x: float, layout: str, column: _Column, side: int
) -> float:
    """One sub-layer with its norms and residual add, from ``y`` up; returns the top of its last part."""
    branch = y + 0.16
    canvas.dot(x, branch)
    y = branch
    if layout == "post":
        parts: list[Label | str] = [unit.sublayer, "+", unit.norm] if unit.norm else [unit.sublayer, "+"]
    else:
        parts = [p for p in (unit.norm, unit.sublayer, unit.post_norm) if p is not None] + ["+"]
    for part in parts:
        bottom = y + GAP
        canvas.line([(x, y), (x, bottom)])
        if part == "+":
            canvas.plus(x, bottom + PLUS_R)
            plus_y = bottom + PLUS_R
            toward = PLUS_R if skip_x > x else -PLUS_R
            canvas.line([(x, branch), (skip_x, branch), (skip_x, plus_y), (x + toward, plus_y)])
            y = bottom + 2 * PLUS_R
        else:
            top = canvas.box(part, x, bottom, w)
            if part is unit.sublayer and unit.cross:
                column.cross.append((x - side * w / 2, (bottom + top) / 2))
            y = top
    return y


def _sequential(
    canvas: Canvas, kind: Kind, x: float, y: float, w: float, skip_x: float, column: _Column, side: int
) -> float:
    if kind.layout == "chain":
        for i, unit in enumerate(kind.units):
            if i:
                canvas.line([(x, y), (x, y + GAP)])
                y += GAP
            y = canvas.box(unit.sublayer, x, y, w)
        return y
    for unit in kind.units:
        y = _residual_unit(canvas, unit, x, y, w, skip_x, kind.layout, column, side)
    return y


def _parallel(
    canvas: Canvas, kind: Kind, x: float, y: float, w: float, skip_x: float, column: _Column, side: int
) -> float:
    """Every sub-layer reads the block input (through its norm, or the shared one); their outputs and the
    input are added once. Columns side by side, the cross-attention nearest the encoder."""
    branch = y + 0.16
    canvas.dot(x, branch)
    y = branch
    if kind.shared_norm is not None:
        canvas.line([(x, y), (x, y + GAP)])
        y = canvas.box(kind.shared_norm, x, y + GAP, w)
    units = sorted(kind.units, key=lambda u: not u.cross) if side > 0 else sorted(kind.units, key=lambda u: u.cross)
    widths = _column_widths(canvas, units)
    spare = (w - sum(widths) - (len(units) - 1) * COL_GAP) / len(units)  # shared out: the columns fill w
    widths = [cw + spare for cw in widths]
    xs, left = [], x - w / 2
    for cw in widths:
        xs.append(left + cw / 2)
        left += cw + COL_GAP
    split = y + GAP * 0.6
    canvas.line([(x, y), (x, split)], arrow=False)
    canvas.line([(xs[0], split), (xs[-1], split)], arrow=False)
    tops = []
    for cx, cw, unit in zip(xs, widths, units, strict=True):
        cy = split
        for part in (unit.norm, unit.sublayer):
            if part is None:
                continue
            canvas.line([(cx, cy), (cx, cy + GAP)])
            top = canvas.box(part, cx, cy + GAP, cw)
            if part is unit.sublayer and unit.cross:
                column.cross.append((cx - side * cw / 2, (cy + GAP + top) / 2))
            cy = top
        tops.append((cx, cy))
    join = max(t for _, t in tops) + GAP * 0.6
    for cx, top in tops:
        canvas.line([(cx, top), (cx, join)], arrow=False)
    canvas.line([(xs[0], join), (xs[-1], join)], arrow=False)
    plus_y = join + GAP + PLUS_R
    canvas.line([(x, join), (x, plus_y - PLUS_R)])
    canvas.plus(x, plus_y)
    toward = PLUS_R if skip_x > x else -PLUS_R
    canvas.line([(x, branch), (skip_x, branch), (skip_x, plus_y), (x + toward, plus_y)])
    return plus_y + PLUS_R


def _fit(canvas: Canvas, text: str, width: float, size: float) -> list[str]:
    """``text`` broken into lines no wider than ``width`` inches, and as even as that many lines allow."""

    def greedy(limit: float) -> list[str]:
        lines: list[str] = []
        for word in text.split():
            if lines and canvas.measure(f"{lines[-1]} {word}", size, False) <= limit:
                lines[-1] += f" {word}"
            else:
                lines.append(word)
        return lines

    lines = greedy(width)
    limit = canvas.measure(text, size, False) / max(len(lines), 1)
    while limit < width:
        even = greedy(limit)
        if len(even) <= len(lines):
            return even
        limit += 0.1
    return lines


def _compose(canvas: Canvas, stacks: list[Stack], notes: list[str], title: str, subtitle: list[str]) -> None:
    """Place the stacks left to right, the encoder output into each cross-attention, and the title, subtitle
    and notes on top."""
    width = max(_stack_width(canvas, s) for s in stacks)
    columns: list[tuple[_Column, float]] = []
    right = 0.0
    for i, stack in enumerate(stacks):
        last = i == len(stacks) - 1 and len(stacks) > 1
        sub = Canvas(canvas.measure)
        side = 1 if last else -1
        label_side = side if len(stacks) > 1 else 1
        column = _draw_stack(sub, stack, width, skip_side=side, label_side=label_side)
        x0, _, x1, _ = sub.bounds()
        dx = right - x0 + (STACK_GAP if columns else 0)
        canvas.paste(sub, dx)
        columns.append((column, dx))
        right = x1 + dx
    source, sdx = columns[0]
    for column, dx in columns[1:]:
        if not column.cross:
            continue
        sx, sy = source.top[0] + sdx, source.top[1]
        route = sy + 0.3
        gap_x = (sdx + width / 2 + MARGIN + dx - width / 2 - MARGIN) / 2
        canvas.line([(sx, sy), (sx, route), (gap_x, route)], arrow=False)
        canvas.text((sx + gap_x) / 2, route + _line_height(BOX_PT) * 0.7, "encoder output", BOX_PT)
        for ex, ey in column.cross:
            canvas.line([(gap_x, route), (gap_x, ey), (ex + dx, ey)])
    x0, _, x1, y1 = canvas.bounds()
    mid, width = (x0 + x1) / 2, max(x1 - x0, 7.0)
    header = [(line, SUBTITLE_PT) for s in subtitle for line in _fit(canvas, s, width, SUBTITLE_PT)]
    header += [(line, BOX_PT) for s in notes for line in _fit(canvas, s, width, BOX_PT)]
    y = y1 + 0.3
    for s, size in reversed(header):
        canvas.text(mid, y + _line_height(size) / 2, s, size)
        y += _line_height(size)
    canvas.text(mid, y + _line_height(TITLE_PT) / 2, title, TITLE_PT, bold=True)


# --------------------------------------------------------------------------------------------------- entry


def _matplotlib() -> Any:
    """The matplotlib module, or a ZooError saying how to install it."""
    try:
        import matplotlib
        from matplotlib.figure import Figure  # noqa: F401 - fails here, not halfway through the drawing
    except ImportError:
        raise ZooError("zoo draw needs matplotlib: pip install 'zoo[plot]'") from None
    return matplotlib


def _format(out: Path) -> str:
    fmt = FORMATS.get(out.suffix.lower())
    if fmt is None:
        what = f"a {out.suffix!r} file" if out.suffix else "a file without a suffix"
        raise ArgumentError(f"{out}: cannot draw to {what}; the accepted suffixes are .svg and .png")
    return fmt


RC = {"svg.fonttype": "none", "font.family": "DejaVu Sans", "svg.hashsalt": "zoo", "text.usetex": False}
"""Text stays text in an SVG (searchable, small), in the font it was measured in; ids are reproducible."""


def layout(recipe: str | Path | Mapping[str, Any] | Any) -> Canvas:
    """The figure of ``recipe`` placed on a ``Canvas``, not yet drawn (call inside ``rc_context(RC)``)."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    from zoo.builder import build
    from zoo.recipe import Recipe, load_recipe

    resolved = recipe if isinstance(recipe, Recipe) else load_recipe(recipe)
    model = build(resolved, device="meta")
    stacks, notes = describe(model)
    total = sum(p.numel() for p in model.parameters())

    renderer = RendererAgg(10, 10, 72)  # 72 dpi: one pixel to the point
    cache: dict[tuple[str, float, bool], float] = {}

    def measure(s: str, size: float, bold: bool) -> float:
        """The width of ``s`` in inches."""
        key = (s, size, bold)
        if key not in cache:
            font = FontProperties(size=size, weight="bold" if bold else "normal")
            cache[key] = renderer.get_text_width_height_descent(s, font, ismath=False)[0] / 72
        return cache[key]

    canvas = Canvas(measure)
    subtitle = [f"{resolved.architecture} · d_model {resolved.d_model} · {_count(total)} parameters"]
    subtitle += [resolved.description] if resolved.description else []
    _compose(canvas, stacks, notes, resolved.name, subtitle)
    return canvas


def draw(recipe: str | Path | Mapping[str, Any] | Any, out: str | Path, *, dpi: int = 150) -> Path:
    """Draw the architecture of ``recipe`` (a name, a file, a dict or a ``Recipe``) into ``out``, an SVG or a
    PNG by its suffix (``dpi`` sets the PNG's resolution); return ``out``. The file is replaced whole or
    not at all.

    Raises ``ArgumentError`` for another suffix or a ``dpi`` outside 10-1200, ``ZooError`` when matplotlib
    is missing, and the recipe's own errors.
    """
    out = Path(out)
    fmt = _format(out)
    if isinstance(dpi, bool) or not isinstance(dpi, int) or not 10 <= dpi <= 1200:
        raise ArgumentError(f"dpi must be an integer from 10 to 1200, not {dpi!r}")
    matplotlib = _matplotlib()
    from matplotlib.figure import Figure

    from zoo.files import atomic_write

    with matplotlib.rc_context(RC):
        canvas = layout(recipe)
        x0, y0, x1, y1 = canvas.bounds()
        pad = 0.25
        fig = Figure(figsize=(x1 - x0 + 2 * pad, y1 - y0 + 2 * pad))
        ax = fig.add_axes((0, 0, 1, 1))  # the whole figure, one data unit to the inch
        ax.set_xlim(x0 - pad, x1 + pad)
        ax.set_ylim(y0 - pad, y1 + pad)
        ax.set_axis_off()
        for op, _ in canvas.ops:
            op(ax, 0.0, 0.0)
        metadata = {"Date": None} if fmt == "svg" else None  # no date: the same recipe gives the same file
        atomic_write(out, lambda tmp: fig.savefig(tmp, format=fmt, dpi=dpi, facecolor="white", metadata=metadata))
    return out
