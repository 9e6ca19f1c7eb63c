"""A family's config translation as one bidirectional table, and ``derive``: a family written as its parent's
table with the rows that differ.

Each row names Hugging Face config keys, the recipe paths they become, and their defaults; the family's
``recipe()`` (HF -> zoo), ``config()`` (zoo -> HF), ``defaults``, ``options`` (what is refused, by name) and
``requirements`` (what a recipe must be to export as the family) are all generated from the rows::

    Key("hidden_size", "d_model", 4096)                  # one key <-> one recipe field, both ways
    Fixed("norm.type", "rmsnorm")                         # what every model of the family has
    Refused("router_jitter_noise", lambda v: not v, "zoo's router adds no training noise")
    Unread("pretraining_tp", "how the projections were sliced across devices: the same matmuls")
    Computed(...)                                         # keys that translate together (a quirk, in code)

A recipe field of a component the table touches (attention, ffn, norm, ...) that no row writes must keep its
default to export: what the family's config cannot say is refused by name, even an option a component gains
later.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from .mapping import MISSING, Family, Option, Requirement, Rule, dtype_name

Refused = Option
"""A config key of which zoo reproduces only some values: ``Refused(key, supported(value) -> bool, why)``."""

SECTIONS = ("block", "embedding", "positional", "attention", "norm", "ffn", "head")
"""The recipe's component sections: a field of one that no row writes must hold its default to export."""

TOWERS = ("vision",)
"""Recipe fields that hold a recipe of their own (a dual-encoder's image tower), whose sections are checked alike."""

NOT_NETWORK = frozenset({"dropout", "sinusoidal_init"})
"""Component fields that do not change what a trained network computes (training dropout, an init choice that
imported weights replace): a config without them still exports."""


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Key:
    """One config key <-> one recipe field: ``read`` turns the config's value into the recipe's, ``write`` back."""

    hf: str
    path: str
    default: Any
    read: Callable[[Any], Any] = _same
    write: Callable[[Any], Any] = _same

    @property
    def keys(self) -> dict[str, Any]:
        return {self.hf: self.default}

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.path,)

    @property
    def ident(self) -> str:
        return self.hf


@dataclass(frozen=True)
class Fixed:
    """A recipe field every model of the family has at ``value`` (written on import, required on export);
    ``also`` lists other values that build the same network (``final_norm: None`` is ``True`` in a pre-norm
    stack). ``imported=False``: only required (the import leaves the field to its default)."""

    path: str
    value: Any
    also: tuple[Any, ...] = ()
    imported: bool = True

    keys: Mapping[str, Any] = field(default_factory=dict, init=False, repr=False)

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.path,)

    @property
    def ident(self) -> str:
        return f"={self.path}"


@dataclass(frozen=True)
class Require:
    """A requirement on export that no key states: ``check(recipe) -> message | None`` (or allowed values)."""

    path: str
    check: Requirement

    keys: Mapping[str, Any] = field(default_factory=dict, init=False, repr=False)

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.path,)

    @property
    def ident(self) -> str:
        return f"?{self.path}"


@dataclass(frozen=True)
class Computed:
    """Config keys that translate together, by code: ``read(config, recipe so far) -> {recipe path: value}`` and
    ``write(recipe, weights) -> {config key: value}``. ``paths`` are the recipe fields it owns (``"positional.*"``
    for a whole section); ``requires`` what a recipe must be for ``write`` to say it exactly."""

    name: str
    keys: Mapping[str, Any]
    paths: tuple[str, ...]
    read: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]
    write: Callable[[Any, Mapping[str, torch.Tensor]], dict[str, Any]]
    requires: Mapping[str, Requirement] = field(default_factory=dict)
    legacy: tuple[str, ...] = ()
    """Keys of an older config layout that are read but not written (the new layout's keys say the same)."""
    last: bool = False
    """Read after every other row (it sees the whole recipe so far: per-layer overrides of it)."""
    checkpoint: bool = False
    """``read`` also takes the HF class and the checkpoint's tensor names (None: the config alone):
    ``read(config, recipe so far, hf_class, names)`` (a head chosen by class, a tensor a checkpoint may lack)."""
    conditional: tuple[str, ...] = ()
    """Keys ``write`` gives only for the recipes they apply to (a classifier's dropout, for a classifier head)."""

    @property
    def ident(self) -> str:
        return f"~{self.name}"


@dataclass(frozen=True)
class Unread:
    """A config key the translation does not read, and why that leaves the network as zoo builds it."""

    hf: str
    why: str

    keys: Mapping[str, Any] = field(default_factory=dict, init=False, repr=False)
    paths: tuple[str, ...] = field(default=(), init=False, repr=False)

    @property
    def ident(self) -> str:
        return f"!{self.hf}"


Row = Key | Fixed | Require | Computed | Refused | Unread


def ident(row: Row) -> str:
    """What a derived table's row replaces in its parent's: the same key, path or name."""
    return f"?{row.key}" if isinstance(row, Option) else row.ident


def put(recipe: dict[str, Any], path: str, value: Any) -> None:
    """``recipe["a"]["b"] = value`` for ``"a.b"``, making the dicts on the way."""
    *parents, leaf = path.split(".")
    node = recipe
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value


def get(recipe: Any, path: str) -> Any:
    """The value at a dotted ``path`` of a validated recipe."""
    node = recipe
    for key in path.split("."):
        node = getattr(node, key)
    return node


def section_defaults(section: str, owned: frozenset[str]) -> Requirement:
    """A requirement: every field of the recipe's ``section`` that no row writes (nor a field of it: a nested
    config) holds its default."""
    written = owned | {".".join(p.split(".")[:k]) for p in owned for k in range(2, p.count(".") + 1)}

    def check(recipe: Any) -> str | None:
        try:
            config = get(recipe, section)  # a tower's section is dotted: vision.attention
        except AttributeError:
            return None
        if config is None or not hasattr(type(config), "model_fields"):
            return None
        off = []
        for name, info in type(config).model_fields.items():
            if name == "type" or name in NOT_NETWORK or info.is_required() or f"{section}.{name}" in written:
                continue
            default = info.get_default(call_default_factory=True)
            if getattr(config, name) != default:
                off.append(f"{section}.{name} is {getattr(config, name)!r}, needs {default!r}")
        return "; ".join(off) or None

    return check


def one_table_size(recipe: Any) -> str | None:
    """A requirement: the decoder's positions reach as far as the encoder's (``decoder_max_len`` unset or
    ``max_len``), where a family's config has one size for both (LED's has two)."""
    size = recipe.decoder_max_len
    if size is None or size == recipe.max_len:
        return None
    return f"decoder_max_len is {size}; this family's config gives both stacks max_len ({recipe.max_len}): unset it"


@dataclass(frozen=True)
class Table:
    """A family's rows, with what is generated from them."""

    rows: tuple[Row, ...]
    constants: Mapping[str, Any] = field(default_factory=lambda: {"bos_token_id": None, "eos_token_id": None})
    """Config keys every export writes at one value, after the rows' (the generation ids, which the tokenizer's
    export fills in; keys the HF class sets itself, such as ``is_encoder_decoder``)."""

    def defaults(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for row in self.rows:
            out.update(_keys(row))
        return out

    def options(self) -> tuple[Option, ...]:
        return tuple(row for row in self.rows if isinstance(row, Option))

    def unread(self) -> dict[str, str]:
        return {row.hf: row.why for row in self.rows if isinstance(row, Unread)}

    def owned(self) -> frozenset[str]:
        return frozenset(p for row in self.rows if not isinstance(row, Option) for p in row.paths)

    def requirements(self) -> dict[str, Requirement]:
        out: dict[str, Requirement] = {}
        for row in self.rows:
            if isinstance(row, Fixed):
                out[row.path] = (row.value, *row.also) if row.also else row.value
            elif isinstance(row, Require):
                out[row.path] = row.check
            elif isinstance(row, Computed):
                out.update(row.requires)
        owned = self.owned()
        if "layer_groups" not in owned:  # cross-layer sharing: only a family whose config says it (ALBERT's)
            out["layer_groups"] = None
        if "decoder_max_len" not in owned:  # a decoder table of its own size: only a family whose config says it
            out["decoder_max_len"] = one_table_size
        for section in (*SECTIONS, *(f"{tower}.{s}" for tower in TOWERS for s in SECTIONS)):
            if f"{section}.*" not in owned and any(p.startswith(f"{section}.") for p in owned):
                out[f"{section}.*"] = section_defaults(section, owned)
        return out

    def recipe(self, config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for row in self.rows:
            if isinstance(row, Key):
                put(out, row.path, row.read(config[row.hf]))
            elif isinstance(row, Fixed) and row.imported:
                put(out, row.path, row.value)
        for row in sorted((r for r in self.rows if isinstance(r, Computed)), key=lambda r: r.last):
            read = row.read(config, out, hf_class, names) if row.checkpoint else row.read(config, out)
            for path, value in read.items():
                put(out, path, value)
        return out

    def config(self, recipe: Any, weights: Mapping[str, torch.Tensor]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for row in self.rows:
            if isinstance(row, Key):
                out[row.hf] = row.write(get(recipe, row.path))
            elif isinstance(row, Computed):
                out.update(row.write(recipe, weights))
            elif isinstance(row, Option) and row.export is not MISSING:
                out[row.key] = row.export
        return {**out, **self.constants, "dtype": dtype_name(weights)}

    def family(
        self,
        name: str,
        *,
        classes: tuple[str, ...],
        rules: tuple[Rule, ...],
        model_type: str | None = None,
        ignored: tuple[str, ...] = (),
        recipes: tuple[str, ...] = (),
        base_prefix: str = "model.",
        head_prefixes: tuple[str, ...] = ("lm_head.",),
        constants: Mapping[str, Any] | None = None,
        **extra: Any,
    ) -> Family:
        """The ``Family`` of this table: its translation generated, its weight table and names given (``constants``:
        in place of the table's). An import names the family (``hf_family``), so a checkpoint exports back as its
        own family even where another family computes the same network (Helium's without biases is ERNIE 4.5's)."""
        own = Fixed("hf_family", model_type or name, also=(None,))  # what family_of looks up: the model_type
        rows = (*(r for r in self.rows if not (isinstance(r, Fixed) and r.path == "hf_family")), own)
        table = replace(self, rows=rows) if constants is None else replace(self, rows=rows, constants=dict(constants))
        return Family(
            name=name,
            model_type=model_type or name,
            classes=classes,
            base_prefix=base_prefix,
            head_prefixes=head_prefixes,
            defaults=table.defaults(),
            options=table.options(),
            rules=rules,
            ignored=ignored,
            requirements=table.requirements(),
            recipe=table.recipe,
            config=table.config,
            hf_class=extra.pop("hf_class", lambda recipe, c=classes[0]: c),
            recipes=recipes,
            unread=table.unread(),
            table=table,
            **extra,
        )

    def derive(self, rows: tuple[Row, ...], drop: tuple[str, ...], defaults: Mapping[str, Any]) -> Table:
        """This table with ``rows`` in place of the parent's rows of the same key (or added), the rows of the
        keys in ``drop`` removed, and the ``defaults`` of inherited keys changed."""
        replaced = {ident(row): row for row in rows}
        kept = [replaced.pop(ident(row), row) for row in self.rows if not _names(row) & set(drop)]
        out = [*kept, *replaced.values()]
        for n, row in enumerate(out):
            if isinstance(row, Key) and row.hf in defaults:
                out[n] = replace(row, default=defaults[row.hf])
            elif isinstance(row, Computed) and set(row.keys) & set(defaults):
                out[n] = replace(row, keys={k: defaults.get(k, v) for k, v in row.keys.items()})
        unknown = set(defaults) - {k for row in out for k in _keys(row)}
        if unknown:
            raise ValueError(f"defaults for keys no row reads: {sorted(unknown)}")
        return replace(self, rows=tuple(out))


def _keys(row: Row) -> Mapping[str, Any]:
    """The config keys a row reads, with their defaults."""
    return {} if isinstance(row, Option) else row.keys


def _names(row: Row) -> set[str]:
    """The config keys and names by which ``drop`` removes a row."""
    if isinstance(row, Option):
        return {row.key}
    if isinstance(row, Computed):
        return {row.name, *row.keys}
    if isinstance(row, Fixed | Require):
        return {row.path}
    return {row.hf}


def family(name: str, *, rows: tuple[Row, ...], **fields: Any) -> Family:
    """A ``Family`` whose translation is generated from the table ``rows`` (``fields``: see ``Table.family``)."""
    return Table(rows).family(name, **fields)


def renamed(row: Computed, names: Mapping[str, str]) -> Computed:
    """``row`` reading and writing some of its config keys under other names (``{its name: this family's}``):
    ALBERT's ``classifier_dropout_prob`` for BERT's ``classifier_dropout``."""

    def read(config: dict[str, Any], recipe: dict[str, Any], *checkpoint: Any) -> dict[str, Any]:
        return row.read({**config, **{old: config[new] for old, new in names.items()}}, recipe, *checkpoint)

    def write(recipe: Any, weights: Mapping[str, torch.Tensor]) -> dict[str, Any]:
        return {names.get(k, k): v for k, v in row.write(recipe, weights).items()}

    def rename(keys: Iterable[str]) -> tuple[str, ...]:
        return tuple(names.get(k, k) for k in keys)

    keys = dict(zip(rename(row.keys), row.keys.values(), strict=True))
    return replace(
        row, keys=keys, read=read, write=write, legacy=rename(row.legacy), conditional=rename(row.conditional)
    )


def under(tower: str, rows: Iterable[Row]) -> tuple[Row, ...]:
    """``rows`` written for a whole recipe, re-rooted at one of its towers (``vision``: a dual-encoder's image
    tower): their recipe paths under ``tower.``, their checks and writes reading the tower's recipe and the tower's
    weights (``vision.blocks.0...`` as ``blocks.0...``). Config keys stay as the rows name them."""
    prefix = f"{tower}."

    def requirement(required: Requirement) -> Requirement:
        if not callable(required):
            return required
        return lambda recipe: required(getattr(recipe, tower)) if getattr(recipe, tower) is not None else None

    def weights_of(weights: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {k.removeprefix(prefix): v for k, v in weights.items() if k.startswith(prefix)}

    def rooted(row: Row) -> Row:
        if isinstance(row, Key | Fixed):
            return replace(row, path=prefix + row.path)
        if isinstance(row, Require):
            return replace(row, path=prefix + row.path, check=requirement(row.check))
        if not isinstance(row, Computed):
            return row  # an option or an unread key: config keys only
        read, write = row.read, row.write

        def read_tower(config: dict[str, Any], recipe: dict[str, Any], *checkpoint: Any) -> dict[str, Any]:
            return {prefix + path: value for path, value in read(config, recipe.get(tower, {}), *checkpoint).items()}

        return replace(
            row,
            name=prefix + row.name,
            paths=tuple(prefix + p for p in row.paths),
            read=read_tower,
            write=lambda recipe, weights: write(getattr(recipe, tower), weights_of(weights)),
            requires={prefix + path: requirement(r) for path, r in row.requires.items()},
        )

    return tuple(rooted(row) for row in rows)
