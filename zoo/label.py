"""What a component's box in ``zoo draw`` says, declared by the component's own config, as it declares its cost.

Every component config has ``label(kind, ctx, module, note=None) -> Label | None``: the box's colour (its kind),
a bold title and lines of detail, for the component of that config as built at ``ctx`` (``module``, on the meta
device); a head's label also names what comes out of it (``Label.output``, the words under the figure's last
box). ``ComponentConfig.label`` draws any component by its kind (``default_label``): an attention by whether it
is causal or cross and its head width (a sequence mixer without heads, such as a plugin's, by the first
sentence of its module's doc instead), an FFN by its widths, an embedding by its output width, positions added
to the input by their table, and each with the options its recipe sets. A config overrides it to say
more, with the helpers here (``options``, ``wrap``, ``widths``)::

    class MyFFNConfig(ComponentConfig):
        type: Literal["my_ffn"] = "my_ffn"
        hidden: int

        def label(self, kind, ctx, module, *, note=None) -> Label:
            return Label("ffn", "My FFN", [f"{ctx.d_model} → {self.hidden} → {ctx.d_model}", *wrap(options(self))])

A positional encoding's label is its box beside the ⊕ where its positions are added to the input (style
``embed``); a rotary or score-bias encoding has no box and shows inside every self-attention instead, as its
label's title (the ``note`` an attention's label is given). ``zoo draw`` adds what only the figure knows: a
plugin's name, which stacks share an embedding, where a norm sits.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import BuildContext, ComponentConfig

__all__ = [
    "SKIP_OPTIONS",
    "Label",
    "attention_label",
    "default_label",
    "mixer_title",
    "number",
    "options",
    "widths",
    "wrap",
]


@dataclass
class Label:
    """What one box says: its colour (``kind``), a bold title and lines of detail."""

    kind: str
    """embedding, positional, attention, ffn, norm, head or other."""
    title: str
    lines: list[str] = field(default_factory=list)
    experts: tuple[int, int] | None = None
    """(routed experts, top_k): an MoE draws a row of its experts, the top-k filled."""
    output: str | None = None
    """A head's: the words for what comes out of it (``next-token logits``), written under its box."""


SKIP_OPTIONS = {"type", "num_heads", "num_kv_heads", "head_dim", "hidden", "activation", "dropout", "multiple_of"}
"""Options that a box shows in its own words (or not at all) rather than as ``key=value``."""


def number(value: Any) -> str:
    """A number as a box writes it: whole floats without their ``.0``, others in ``%g``."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def options(config: Any, skip: set[str] = SKIP_OPTIONS) -> list[str]:
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
            words.append(f"{name}={number(value)}")
    return sorted(words, key=lambda word: "=" not in word)  # values first, then the switches


def wrap(words: list[str], width: int = 48) -> list[str]:
    """``words`` joined by commas into lines of at most ``width`` characters."""
    return textwrap.wrap(", ".join(words), width=width, break_long_words=False, break_on_hyphens=False)


def hidden(config: Any, ctx: BuildContext, module: Any) -> int | None:
    """An FFN's hidden width: the recipe's, else that of its first projection out of d_model."""
    width = getattr(config, "hidden", None)
    if isinstance(width, int):
        return width
    for sub in module.modules():  # a linear layer (no torch import here: configs import this module)
        if getattr(sub, "in_features", None) == ctx.d_model and isinstance(getattr(sub, "out_features", None), int):
            return sub.out_features
    return None


def widths(config: Any, ctx: BuildContext, module: Any) -> str:
    """An FFN's widths, ``E → H → E``, and its activation where its config names one."""
    E, H = ctx.d_model, hidden(config, ctx, module)
    text = f"{E} → {H} → {E}" if H else f"{E} → {E}"
    activation = getattr(config, "activation", None)
    return f"{text}, {activation}" if isinstance(activation, str) else text


def attention_label(
    config: ComponentConfig,
    ctx: BuildContext,
    *,
    note: str | None = None,
    heads: int | None = None,
    kv_heads: int | None = None,
    head_widths: str | None = None,
    skip: set[str] = SKIP_OPTIONS,
) -> Label:
    """An attention's box: causal, bidirectional or cross; its ``heads`` and ``kv_heads`` where it has them, its
    head width (``head_widths`` when its queries, keys and values are not all ``ctx.head_dim`` wide), what the
    encoder output or the positional encoding it applies (``note``) does in it, a score soft-cap, its options
    (but those in ``skip``)."""
    what = "Cross-attention" if ctx.cross else ("Causal self-attention" if ctx.causal else "Self-attention")
    words = []
    if isinstance(heads, int):
        words.append(f"{heads} heads")
        if isinstance(kv_heads, int) and kv_heads != heads:
            words.append(f"{kv_heads} KV head" + ("s" if kv_heads > 1 else ""))
    if head_widths:
        words.append(head_widths)
    elif ctx.head_dim:
        words.append(f"head_dim {ctx.head_dim}")
    lines = [", ".join(words)] if words else []
    if ctx.cross:
        lines.append("keys, values: encoder output")
    elif note:
        lines += wrap([note])
    softcap = getattr(config, "softcap", None)
    if isinstance(softcap, (int, float)):
        lines.append(f"scores soft-capped at ±{number(softcap)}")
    lines += wrap(options(config, skip | {"softcap"}))
    return Label("attention", f"{what} · {config.type}", lines)


def mixer_title(config: ComponentConfig, module: Any) -> str:
    """What a sequence mixer that is not an attention (no ``num_heads`` in its config, no label of its own) is
    called: the first sentence of its module's doc, else ``Sequence mixer``."""
    doc = (type(module).__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    first = doc.split(": ")[0].split(". ")[0].rstrip(".").strip()
    first = first.removeprefix("The ").removeprefix("A ")
    first = first[:1].upper() + first[1:]
    return first if first and len(first) <= 40 else "Sequence mixer"


def default_label(
    config: ComponentConfig, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None
) -> Label | None:
    """The box of a component of ``kind`` that says nothing more of itself (``ComponentConfig.label``)."""
    name = config.type
    if kind == "attention":
        if "num_heads" not in type(config).model_fields:  # a mixer that is no attention: Mamba, Hyena, RWKV
            return Label("attention", f"{mixer_title(config, module)} · {name}", wrap(options(config)))
        return attention_label(config, ctx, note=note, heads=getattr(config, "num_heads", None))
    if kind == "ffn":
        return Label("ffn", f"Feed-forward · {name}", [widths(config, ctx, module), *wrap(options(config))])
    if kind == "embedding":
        return Label("embedding", f"Embedding · {name}", [f"→ {ctx.d_model}", *wrap(options(config))])
    if kind == "positional":
        style = getattr(type(config), "style", "embed")
        if style == "embed":
            tables = sorted(module.parameters(), key=lambda p: p.numel())
            lines = [" × ".join(str(d) for d in tables[-1].shape if d != 1)] if tables else ["fixed"]
            return Label("positional", f"{name} positions", lines + wrap(options(config)))
        if style in ("rotate", "bias"):
            what = "rotation" if style == "rotate" else "position bias"
            words = options(config)
            return Label("positional", f"{name} {what}" + (f" ({', '.join(words)})" if words else ""))
        return None  # no positions at all
    if kind == "norm":
        return Label("norm", name)
    if kind == "head":
        return Label("head", f"Head · {name}", wrap(options(config)))
    return Label("other", f"{kind} · {name}", wrap(options(config)))
