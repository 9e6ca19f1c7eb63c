"""The facts of the figure: what a built model holds, as ``Stack``s of ``Kind``s of blocks, ``Unit``s and the
``Label`` (the text) of every box. ``describe`` reads them off ``model.zoo_components``, each box as its
component's config declares it (``zoo.label``) with what only the figure knows added; nothing here draws."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from zoo.label import Label, options, wrap


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
    weight_sets: int = 0
    """How many distinct sets of weights its blocks hold: fewer than its layers when layers share them
    (``layer_groups``, ALBERT's cross-layer sharing)."""
    name: str = ""
    """A, B, ... when a stack has several kinds."""


@dataclass
class Pattern:
    """Kinds of block that alternate: ``unit`` (runs of kind names) ``repeats`` times, then the runs of ``tail``
    (the start of one more unit), as Gemma 3's five local layers to one global."""

    unit: list[tuple[str, int]]
    repeats: int
    tail: list[tuple[str, int]] = field(default_factory=list)

    def count(self, name: str) -> int:
        """The blocks of kind ``name`` in one unit."""
        return sum(n for kind, n in self.unit if kind == name)

    @property
    def text(self) -> str:
        """``× 4 [A × 5, B], then A × 2``."""
        text = f"× {self.repeats} [{_runs(self.unit)}]"
        return f"{text}, then {_runs(self.tail)}" if self.tail else text


def _runs(runs: list[tuple[str, int]]) -> str:
    return ", ".join(name if count == 1 else f"{name} × {count}" for name, count in runs)


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
    after: list[Label] = field(default_factory=list)
    """Components after its blocks, before the next stage (a hierarchical model's patch merging)."""
    pattern: Pattern | None = None
    """Its kinds of block alternate in a repeating unit; None: they do not (or it has one kind)."""


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
    # Stages in sequence (a hierarchical model: Swin): several stacks after one shared embedding, none with an
    # embedding of its own or a cross-attention; each stage's output is the next one's input.
    crossed = any("cross_attention" in c for stack in blocks.values() for c in stack.values())
    towers = any(f"{prefix}embedding" in top for prefix in blocks if prefix)
    in_sequence = len(blocks) > 1 and embedding is not None and not crossed and not towers
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
        sharing = [name for p, name in zip(blocks, names, strict=True) if not p or f"{p}embedding" not in top]
        sharers = sharing if len(sharing) > 1 and own_embedding is None and not in_sequence else []
        entry = own_embedding or (embedding if n == 0 or not in_sequence else None)
        last = n == len(blocks) - 1
        if in_sequence and last and final_norm is None and "final_norm" in top:
            final_norm = ("final_norm", top["final_norm"])  # the model's, after its last stage
            used.add("final_norm")
        after = [(p, m) for name, (p, m) in own.items() if m.kind == "embedding" and name != "embedding"]
        used |= {p for p, _ in after} if in_sequence else set()
        # A positional encoding's label is its box beside the ⊕, or the line it writes in every self-attention.
        placed = _label(*positional, model) if positional else None
        embeds = placed is not None and _style(positional[1]) == "embed"
        note = placed.title if placed is not None and not embeds else None
        has_cross = any("cross_attention" in c for c in by_index.values())
        several = len(blocks) > 1 and own_embedding is None and not in_sequence
        shown = "" if in_sequence and n else _input_text(entry[1] if entry else None, several, has_cross)
        stack = Stack(
            name=names[n],
            num_layers=len(by_index),
            input=shown,
            embedding=_embedding_label(entry, model, sharers) if entry else None,
            positional=placed if embeds else None,
            embed_norm=_norm_label(*embed_norm, model, "embeddings") if embed_norm else None,
            kinds=_kinds(model, prefix, by_index, note),
            final_norm=_norm_label(*final_norm, model, "final") if final_norm else None,
            causal=any(m.ctx is not None and m.ctx.causal for c in by_index.values() for _, m in c.values()),
            after=[_label(p, m, model) for p, m in after] if in_sequence else [],
        )
        own_positions = entry is not None and getattr(type(entry[1].config), "own_positions", False)
        if positional and _style(positional[1]) == "none" and stack.embedding is not None and not own_positions:
            stack.embedding.lines.append("no positional encoding")
        if last and head is not None:
            stack.head = _label(*head, model)
            stack.output = stack.head.output if stack.head is not None else None
        stacks.append(stack)
    for stack in stacks:
        stack.pattern = _pattern(stack.kinds)
    notes = [
        f"{s.name or 'block'} order, first to last: {s.pattern.text if s.pattern else _block_order(s.kinds)}"
        for s in stacks
        if len(s.kinds) > 1
    ]
    notes += [f"also built: {p} ({m.kind} {m.name})" for p, m in top.items() if p not in used]
    if not stacks:  # an architecture whose blocks zoo cannot find: every component, in module order
        units = [Unit(_component_label(p, m, model)) for p, m in top.items()]
        stacks = [Stack("", 0, "input", None, None, None, [Kind([], units, "chain")], None)]
        notes = ["the blocks of this architecture were not recognised: its components are shown in module order"]
    return stacks, notes


def _kinds(model: Any, prefix: str, by_index: dict[int, dict[str, Any]], note: str | None) -> list[Kind]:
    """The distinct kinds of block of one stack, in the order of their first layer."""
    groups: dict[tuple, list[int]] = {}
    for i in sorted(by_index):
        block = model.get_submodule(f"{prefix}blocks.{i}")
        groups.setdefault(_signature(block, by_index[i]), []).append(i)
    kinds = []
    for n, layers in enumerate(groups.values()):
        children = by_index[layers[0]]
        block = model.get_submodule(f"{prefix}blocks.{layers[0]}")
        kinds.append(_kind(model, block, children, layers, note))
        held = {frozenset(map(id, model.get_submodule(f"{prefix}blocks.{i}").parameters())) for i in layers}
        kinds[-1].weight_sets = len(held)
        if len(groups) > 1:
            kinds[-1].name = chr(ord("A") + n) if n < 26 else str(n + 1)
    return kinds


def _order(kinds: list[Kind]) -> list[str]:
    """The kind name of every block of a stack, first to last."""
    of = {i: kind.name for kind in kinds for i in kind.layers}
    return [of[i] for i in sorted(of)]


def _group(names: list[str]) -> list[tuple[str, int]]:
    """Consecutive equal names counted: ``A, A, B`` -> ``[(A, 2), (B, 1)]``."""
    runs: list[tuple[str, int]] = []
    for name in names:
        if runs and runs[-1][0] == name:
            runs[-1] = (name, runs[-1][1] + 1)
        else:
            runs.append((name, 1))
    return runs


def _pattern(kinds: list[Kind]) -> Pattern | None:
    """The shortest unit of more than one kind that the blocks repeat at least twice (the last repeat may stop
    early), or None when the kinds do not alternate (DeepSeek's dense first layer, then MoE layers)."""
    if len(kinds) < 2:
        return None
    order = _order(kinds)
    for size in range(2, len(order) // 2 + 1):
        unit = order[:size]
        if len(set(unit)) > 1 and all(name == unit[i % size] for i, name in enumerate(order)):
            repeats = len(order) // size
            return Pattern(_group(unit), repeats, _group(order[repeats * size :]))
    return None


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
    layout = (getattr(block, "norm_position", None), getattr(block, "parallel", None))
    return (*layout, getattr(block, "layer_scale", None), *parts)


def _kind(model: Any, block: Any, children: dict[str, Any], layers: list[int], note: str | None) -> Kind:
    params = sum(p.numel() for p in block.parameters())
    known = set(children) <= set(BLOCK_CHILDREN) and {"attention", "ffn"} <= set(children)
    if not known:
        units = [Unit(_component_label(p, m, model)) for p, m in children.values()]
        return Kind(layers, units, "chain", params=params)
    units = []
    for name in SUBLAYERS:
        if name not in children:
            continue
        path, m = children[name]
        sublayer = _label(path, m, model, note=note)
        scale = getattr(block, "layer_scale", None)
        if sublayer is not None and scale is not None:  # the block's layer scale on this sub-layer's output
            sublayer.lines.append(f"output times learned γ ({getattr(block, 'width', '')}), init {scale:g}")
        norm = children.get(f"{name}_norm")
        post = children.get(f"{name}_post_norm")
        units.append(
            Unit(
                sublayer,
                norm=_norm_label(*norm, model) if norm else None,
                post_norm=_norm_label(*post, model, "output") if post else None,
                cross=name == "cross_attention",
            )
        )
    if getattr(block, "parallel", False):
        if "ffn_norm" not in children:  # shared_norm: the attention's norm feeds every sub-layer
            norm, units = units[0].norm, [Unit(u.sublayer, cross=u.cross) for u in units]
            return Kind(layers, units, "parallel", shared_norm=norm, params=params)
        return Kind(layers, units, "parallel", params=params)
    return Kind(layers, units, str(getattr(block, "norm_position", "pre")), params=params)


def _plugin(m: Any) -> list[str]:
    return [] if m.plugin.startswith("zoo.") else [f"plugin: {m.plugin}"]


def _style(m: Any) -> str:
    return getattr(type(m.config), "style", "embed")


def _label(path: str, m: Any, model: Any, *, note: str | None = None, more: tuple[str, ...] = ()) -> Label | None:
    """The box of the component at ``path`` as its config declares it (``ComponentConfig.label``), then the
    lines ``more`` and the plugin that registered it (a norm's box is its name alone)."""
    label = m.config.label(m.kind, m.ctx, model.get_submodule(path), note=note)
    if label is not None and m.kind != "norm":
        label.lines += [*more, *_plugin(m)]
    return label


def _input_text(m: Any, several: bool, has_cross: bool) -> str:
    says = getattr(m.config, "input_text", None) if m is not None else None
    if callable(says):  # an embedding that says what it takes (an audio front end: its log-mel frames)
        return says(m.ctx)
    if m is not None and not getattr(type(m.config), "token_input", True):
        ctx = m.ctx
        return f"image {ctx.num_channels} × {ctx.image_size} × {ctx.image_size}"
    if several:
        return "target token ids (shifted right)" if has_cross else "source token ids"
    return "token ids"


def _embedding_label(entry: tuple[str, Any], model: Any, sharers: list[str]) -> Label:
    more = (f"shared by {' and '.join(sharers)}",) if sharers else ()
    return _label(*entry, model, more=more)


def _norm_label(path: str, m: Any, model: Any, where: str | None = None) -> Label:
    label = _label(path, m, model)
    if where:
        label.title = f"{label.title} ({where})"
    return label


def _component_label(path: str, m: Any, model: Any) -> Label:
    """Any component, in a block or an architecture zoo does not know."""
    if m.kind in ("attention", "ffn", "norm"):
        return _label(path, m, model)
    kind = m.kind if m.kind in ("embedding", "head", "positional") else "other"
    return Label(kind, f"{m.kind} · {m.name}", [path, *wrap(options(m.config)), *_plugin(m)])
