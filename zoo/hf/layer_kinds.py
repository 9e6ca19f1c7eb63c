"""Layer kinds: a decoder whose layers are of a few kinds (sliding or full, RoPE or NoPE, chunked), as per-layer
lists of its config name them (``layer_types``, ``no_rope_layers``). A family declares each list as an ``Axis`` (its
values' changes to a layer's attention, the value of a layer on export, the list a config that omits it implies);
``layer_kinds`` makes of them the one row that reads, writes and requires the layers::

    layer_kinds(
        layer_types=Axis({SLIDING: slides, FULL: nope}, fill=every_nth(FULL, SLIDING)),
        keys={"sliding_window": 4096, "layer_types": None, "sliding_window_pattern": 4},
        fields=("window", "rotary"),  # the attention fields the kinds change (these, by default)
        shared={"sliding_window": "window"},  # one value for every layer that has the field (this, by default)
    )

Each layer's attention is the recipe's with the changes of its values on every axis: changes every layer shares go
on the recipe's attention, the others become ``layers:`` overrides (``rows.per_layer_attention``). On export the
lists are written back from each layer's attention, and ``layers:`` overrides may change only the kinds' fields.
What a family's kinds must be beyond that (which kind rotates, one window) is its own ``requires``. A kind's change
may be a ``rows_kinds.Setting``, config keys that state it both ways; a family that declares the order of its
settings' misfits (``fit``) is checked by ``rows_kinds.kinds_fit`` instead (Llama 4).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from zoo.errors import HFImportError

from .mapping import Option, Requirement
from .rope import ROPE_SCALINGS, ROPE_TYPE_WHY, hf_rope_parameters, rope_spec
from .rows import layer_attentions, only_attention_differs, per_layer_attention, selector, uses_rope
from .rows_kinds import Change, FFNLayers, Setting, kinds_fit, nope, parts, same, settings_of
from .rows_kinds import unreadable as lists_unreadable
from .table import Computed

SLIDING, FULL = "sliding_attention", "full_attention"
"""transformers' ``layer_types`` of a sliding-window layer and of one that sees every key."""


def sliding_or_full(attention: Any) -> str:
    """A layer's ``layer_types`` entry: sliding where it has a window."""
    return FULL if attention.window is None else SLIDING


@dataclass(frozen=True)
class Axis:
    """One per-layer list of the config: ``kinds`` maps each value to its change of the layer's attention (or a
    tuple of changes, applied in turn); ``fill(config, lists read so far)`` is the list of a config that omits it;
    ``of`` gives a layer's value on export (from its attention: by default its ``layer_types`` entry, sliding or
    full); ``kind`` names the kind a listed value means (identity: a value not in ``kinds`` fails)."""

    kinds: Mapping[Any, Change | tuple[Change, ...]]
    fill: Callable[[dict[str, Any], dict[str, list[Any]]], list[Any]]
    of: Callable[[Any], Any] = sliding_or_full
    kind: Callable[[Any], Any] = lambda value: value


def slides(config: dict[str, Any]) -> dict[str, Any]:
    """The change of a sliding layer: the window ``sliding_window``."""
    return {"window": config["sliding_window"]}


def windowed(change: Change, without: Change) -> Change:
    """``change`` where the config has a ``sliding_window``, ``without`` where it has none."""
    return lambda config: without(config) if config["sliding_window"] is None else change(config)


def full_unless_sliding(value: Any) -> str:
    """The kind of a ``layer_types`` entry where transformers treats every entry but ``sliding_attention`` as full."""
    return SLIDING if value == SLIDING else FULL


def sliding_types(kinds: Mapping[str, Change], fill: Callable[..., list[str]]) -> Axis:
    """A ``layer_types`` axis of sliding and full layers, where every entry but ``sliding_attention`` means full."""
    return Axis(kinds, fill, kind=full_unless_sliding)


def rope_every(config: dict[str, Any], lists: dict[str, list[Any]]) -> list[int]:
    """``no_rope_layers`` as SmolLM3's and Llama 4's configs fill it: every ``no_rope_layer_interval``-th NoPE."""
    interval = config["no_rope_layer_interval"]
    return [int((i + 1) % interval != 0) for i in range(config["num_hidden_layers"])]


def no_rope_layers(rope: Change | tuple[Change, ...] = same, nope: Change | tuple[Change, ...] = nope) -> Axis:
    """``no_rope_layers``: 1 (any true value) a RoPE layer, of the change ``rope``, 0 a NoPE one, of ``nope``
    (Llama 4's have their own settings); a config without it has every ``no_rope_layer_interval``-th NoPE."""
    return Axis({1: rope, 0: nope}, rope_every, of=lambda a: int(uses_rope(a)), kind=lambda v: int(bool(v)))


NO_ROPE_LAYERS = no_rope_layers()
"""SmolLM3's ``no_rope_layers``: its NoPE layers only lose the rope."""

CHUNKED = "chunked_attention"
"""transformers' ``layer_types`` of a chunked layer: a query sees the keys of its own chunk only."""


def masked_types(owner: str, *types: str) -> Option:
    """The refusal of a ``layer_types`` entry other than ``types``, the layers for which ``owner`` makes masks."""
    return Option(
        "layer_types",
        lambda v: v is None or set(v) <= set(types),
        f"{owner} makes masks for {' and '.join(types)} layers only",
    )


def chunked_types(chunk: str, default: int | None) -> Axis:
    """A ``layer_types`` axis of chunked layers (chunks of the config key ``chunk``, of default ``default``) and
    full ones; a config without it chunks the layers that rotate (by ``no_rope_layers``), where ``chunk`` is set
    (Llama 4's)."""
    return Axis(
        {CHUNKED: Setting({"chunk_size": chunk}, defaults={chunk: default}), FULL: same},
        lambda config, lists: [CHUNKED if r and config[chunk] else FULL for r in lists["no_rope_layers"]],
        of=lambda attention: CHUNKED if attention.chunk_size else FULL,
    )


def used_window(config: dict[str, Any]) -> int | None:
    """The window of a config with a ``use_sliding_window`` switch (Qwen2's, SmolLM3's): None where it is off."""
    return config["sliding_window"] if config["use_sliding_window"] else None


def every_nth(nth: str, other: str, pattern: str | int = "sliding_window_pattern") -> Callable[..., list[str]]:
    """A ``fill``: every ``pattern``-th layer (a number, or the config key that holds it) ``nth``, the others
    ``other``."""

    def fill(config: dict[str, Any], lists: dict[str, list[Any]]) -> list[str]:
        every = pattern if isinstance(pattern, int) else config[pattern]
        return [nth if (i + 1) % every == 0 else other for i in range(config["num_hidden_layers"])]

    return fill


def hf_kind_ropes(recipe: Any) -> dict[str, dict[str, Any]]:
    """``rope_parameters`` with a rope of each kind (OLMo 3, Gemma 3): its layers' ``rotary``, else the stack's
    rope (the stack's too for a kind no layer has)."""
    ropes = dict.fromkeys((SLIDING, FULL), recipe.positional)
    for attention in layer_attentions(recipe):
        ropes[sliding_or_full(attention)] = attention.rotary or recipe.positional
    return {kind: hf_rope_parameters(rope) for kind, rope in ropes.items()}


def kind_ropes(
    config: dict[str, Any], bases: Mapping[str, float], *, flat: bool = False, nested: bool = False
) -> dict[str, dict[str, Any]]:
    """The zoo rope of each kind of layer (OLMo 3, Gemma 3), the way back of ``hf_kind_ropes``: each kind's
    ``rope_parameters`` (with ``flat``, parameters not nested by kind are both kinds'), else an unscaled rope;
    transformers 4's ``rope_scaling`` scales the full layers only, and a kind without a ``rope_theta`` rotates with
    ``bases[kind]``. ``nested``: as transformers reads nested parameters (no top-level
    ``original_max_position_embeddings``, and YaRN always truncating: Gemma 3)."""
    given = config["rope_parameters"] or {}
    if flat and given and not set(given) <= set(bases):  # one set of parameters for both kinds
        given = dict.fromkeys(bases, given)
    out = {}
    for kind, base in bases.items():
        params = dict(given.get(kind) or {"rope_type": "default"})
        if kind == FULL and config["rope_scaling"]:
            params.update(config["rope_scaling"])
        params.setdefault("rope_theta", base)
        out[kind] = rope_spec({**config, "original_max_position_embeddings": None} if nested else config, params)
        if nested:
            out[kind].pop("truncate", None)
    return out


def rope_options_per_kind(why: str, *, rope_type: bool = False) -> tuple[Option, ...]:
    """The refusals in each kind's nested ``rope_parameters`` (OLMo 3, Gemma 3): a partial rotation (``why``) and,
    with ``rope_type``, a rope type zoo does not build."""
    out = []
    for kind in (SLIDING, FULL):
        if rope_type:
            out.append(
                Option(f"rope_parameters.{kind}.rope_type", lambda v: v is None or v in ROPE_SCALINGS, ROPE_TYPE_WHY)
            )
        out.append(Option(f"rope_parameters.{kind}.partial_rotary_factor", lambda v: v in (None, 1.0), why))
    return tuple(out)


def layer_kinds(
    *,
    keys: Mapping[str, Any],
    fields: tuple[str, ...] = ("window", "rotary"),
    shared: Mapping[str, str] | None = None,
    requires: Mapping[str, Requirement] = {},
    more: Callable[[Any, list[Any]], dict[str, Any]] = lambda recipe, attentions: {},
    legacy: tuple[str, ...] = (),
    unreadable: str | None = None,
    ffn: FFNLayers | None = None,
    fit: tuple[str, str, tuple[Setting, ...]] | None = None,
    **axes: Axis,
) -> Computed:
    """The ``layers`` row of a family with the kinds of layer ``axes`` declare (by config key, in the order they
    fill in), which change the attention's ``fields``. ``shared`` config keys are written as the first non-None
    value of an attention field across the layers (by default ``{"sliding_window": "window"}`` where the kinds
    change the window), then the kinds' ``Setting`` keys (their defaults join ``keys``); ``more(recipe,
    attentions)`` adds the keys the family writes beside them. One list is read a layer per entry (as Cohere2,
    EXAONE 4 and OLMo 3 read ``layer_types``), several for ``num_hidden_layers`` layers (SmolLM3, Llama 4).

    ``unreadable``: the import error of lists that ``rows_kinds.unreadable`` finds short or missing a setting's key.
    ``ffn``: layers whose FFN differs, read and written beside the kinds (an MoE stack's dense layers; its keys and
    legacy keys join the row's). ``fit``: ``(family, alike, order)`` of ``rows_kinds.kinds_fit``, the ``layers``
    requirement in place of "only ``fields`` differ"."""
    settings = settings_of(axes)
    keys = {
        **keys,
        **{key: v for setting in settings for key, v in setting.defaults.items()},
        **(ffn.keys if ffn else {}),
    }
    shared = ({"sliding_window": "window"} if "window" in fields else {}) if shared is None else shared

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        lists: dict[str, list[Any]] = {}
        for key, axis in axes.items():
            lists[key] = config[key] or axis.fill(config, lists)
        if unreadable is not None and lists_unreadable(config, lists, axes):
            raise HFImportError(unreadable)
        n = len(lists[next(iter(axes))]) if len(axes) == 1 else config["num_hidden_layers"]
        changes = [
            {
                f: v
                for key, axis in axes.items()
                for part in parts(axis.kinds[axis.kind(lists[key][i])])
                for f, v in part(config).items()
            }
            for i in range(n)
        ]
        out = per_layer_attention(recipe, changes)
        return out if ffn is None else {**out, "layers": [*out.pop("layers", []), *ffn.read(config, n)]}

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        attentions = layer_attentions(recipe)
        out = {key: [axis.of(a) for a in attentions] for key, axis in axes.items()}
        for key, name in shared.items():
            out[key] = next((getattr(a, name) for a in attentions if getattr(a, name) is not None), None)
        for setting in settings:
            out.update(setting.write(attentions, keys))
        return {**out, **more(recipe, attentions), **(ffn.write(recipe, weights) if ffn else {})}

    return Computed(
        "layers",
        keys=keys,
        paths=(*(f"attention.{f}" for f in fields), "layers"),
        read=read,
        write=write,
        requires={"layers": kinds_fit(axes, fields, *fit, ffn) if fit else only_attention_differs(*fields), **requires},
        legacy=(*legacy, *(ffn.legacy if ffn else ())),
        last=True,  # its overrides copy the attention as the other rows made it
    )


# --------------------------------------------------------------------------------- local and global layers
# Gemma 2 and 3 (and ModernBERT's local_global): the more common kind is the recipe's attention, the other kind's
# layers override it, and each kind may have its own rope.

LOCAL, GLOBAL = SLIDING, FULL
"""Gemma's names of the two kinds: a local (sliding-window) and a global layer."""


def layer_types_option(family: str) -> Option:
    """The refusal of a ``layer_types`` entry that is neither local nor global."""
    return Option(
        "layer_types",
        lambda v: v is None or (isinstance(v, list) and all(t in (LOCAL, GLOBAL) for t in v)),
        f"{family}'s layers are {LOCAL} or {GLOBAL}",
    )


def gemma_layer_types(config: dict[str, Any], pattern: int) -> list[str]:
    """Each layer's kind, as Gemma 2 and 3 read it: ``layer_types``, else every ``pattern``-th layer global
    (transformers' default)."""
    n = config["num_hidden_layers"]
    types = config.get("layer_types") or [GLOBAL if (i + 1) % pattern == 0 else LOCAL for i in range(n)]
    if len(types) != n:
        raise HFImportError(f"layer_types has {len(types)} entries for num_hidden_layers={n}")
    if LOCAL in types and config["sliding_window"] is None:
        raise HFImportError(f"sliding_window=None with {LOCAL} layers: transformers cannot run this config either")
    return list(types)


def local_global(
    types: list[str], attention: dict[str, Any], window: int | None, ropes: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The recipe's ``positional``, ``attention`` and ``layers`` for local and global layers of ``types``.

    The more common kind (global on a tie) is the recipe's attention and positional; the layers of the other
    kind override the attention, with the ``window`` on local layers and their own ``rotary`` where their rope
    (``ropes[kind]``) differs.
    """
    counts = Counter(types)
    base = LOCAL if counts[LOCAL] > counts[GLOBAL] else GLOBAL
    other = GLOBAL if base == LOCAL else LOCAL

    def spec(kind: str) -> dict[str, Any]:
        out = dict(attention, window=window) if kind == LOCAL else dict(attention)
        if kind != base and ropes[kind] != ropes[base]:
            out["rotary"] = ropes[kind]
        return out

    indices = [i for i, t in enumerate(types) if t == other]
    layers = [{"select": selector(indices, len(types)), "attention": spec(other)}] if indices else []
    return {"positional": ropes[base], "attention": spec(base), "layers": layers}


def layer_ropes(recipe: Any) -> list[Any]:
    """Each decoder layer's rope config: its attention's ``rotary``, else the stack's positional."""
    out = []
    for placed in recipe.layer_plan("decoder"):
        rotary = placed["attention"][0].rotary
        out.append(recipe.positional if rotary is None else rotary)
    return out


def gemma_layers_fit(recipe: Any, *, one_rope: bool) -> str | None:
    """A requirement: the layers differ in their attention's window (and, unless ``one_rope``, rotary) only,
    every local layer has the same window, and the layers of each kind the same rope."""
    if "window" not in type(recipe.attention).model_fields:
        return None  # not Gemma's attention (a plugin's mixer): the attention.type requirement says so
    base = recipe.attention.model_dump(exclude={"window", "rotary"})
    plan = recipe.layer_plan("decoder")
    for i, placed in enumerate(plan):
        if placed["norm"][0] != recipe.norm or placed["ffn"][0] != recipe.ffn:
            return f"layers: layer {i} has its own norm or ffn; Gemma's layers differ only in their attention window"
        if placed["attention"][0].model_dump(exclude={"window", "rotary"}) != base:
            return f"layers: layer {i}'s attention differs from attention in more than window and rotary"
    windows = {placed["attention"][0].window for placed in plan} - {None}
    if len(windows) > 1:
        return f"layers: local windows {sorted(windows)}; Gemma has one sliding_window"
    ropes = layer_ropes(recipe)
    for rope in ropes:
        if rope.type != "rope" or rope.interleaved or rope.rotary_fraction != 1.0:
            return "layers: every layer's rotary is a rope of full, non-interleaved rotation in Gemma"
    if one_rope and any(r != recipe.positional for r in ropes):
        return "layers: a layer has its own rotary; Gemma 2 has one rope for all layers"
    kinds = {LOCAL: set(), GLOBAL: set()}
    for placed, rope in zip(plan, ropes, strict=True):
        kinds[LOCAL if placed["attention"][0].window else GLOBAL].add(rope.model_dump_json())
    if any(len(r) > 1 for r in kinds.values()):
        return "layers: the local (or the global) layers have different ropes; Gemma 3 has one rope of each"
    return None


def hf_gemma_layers(recipe: Any) -> dict[str, Any]:
    """``layer_types`` and ``sliding_window`` of a recipe that fits (``gemma_layers_fit`` found nothing)."""
    windows = [placed["attention"][0].window for placed in recipe.layer_plan("decoder")]
    window = next((w for w in windows if w is not None), None)
    return {
        "layer_types": [LOCAL if w is not None else GLOBAL for w in windows],
        "sliding_window": window if window is not None else (recipe.max_len or 4096),  # unused: no layer slides
    }


def local_global_layers(
    family: str,
    pattern: int | None,
    ropes: Callable[[dict[str, Any]], dict[str, dict[str, Any]]] | None = None,
    *,
    keys: Mapping[str, Any] = {},
    requires: Mapping[str, Requirement] = {},
    legacy: tuple[str, ...] = (),
) -> tuple[Computed, Option]:
    """The ``layers`` row of Gemma 2 and 3, and the refusal of other layer types (``layer_types_option``): local
    and global layers (``layer_types``, else every ``pattern``-th layer global; None: every
    ``sliding_window_pattern``-th) and, with ``ropes(config)``, each kind's rope (the row then reads and writes the
    positional too; without, every layer has the stack's rope, as in Gemma 2)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        types = gemma_layer_types(config, pattern=pattern or config["sliding_window_pattern"])
        per_kind = dict.fromkeys((LOCAL, GLOBAL), recipe["positional"]) if ropes is None else ropes(config)
        return local_global(types, recipe["attention"], config["sliding_window"], per_kind)

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        out = hf_gemma_layers(recipe)
        return out if ropes is None else {**out, "rope_parameters": hf_kind_ropes(recipe)}

    row = Computed(
        "local and global layers",
        keys={"sliding_window": 4096, "layer_types": None, **keys},
        paths=("attention.window", "layers") if ropes is None else ("positional.*", "attention.window", "layers"),
        read=read,
        write=write,
        requires={**requires, "layers": lambda recipe: gemma_layers_fit(recipe, one_rope=ropes is None)},
        legacy=legacy,
        last=True,  # its overrides copy the attention as the other rows made it
    )
    return row, layer_types_option(family)
