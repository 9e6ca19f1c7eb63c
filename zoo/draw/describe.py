"""The facts of the figure: what a built model holds, as ``Stack``s of ``Kind``s of blocks, ``Unit``s and the
``Label`` (the text) of every box. ``describe`` reads them off ``model.zoo_components``; nothing here draws."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


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
