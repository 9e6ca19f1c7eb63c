"""The settings of layer kinds (``layer_kinds.py``): what a kind of layer changes in the attention, as a function
of the config (``Change``) or as config keys that state it both ways, switched on and off by a flag (``Setting``:
Llama 4's weightless QK-norm on its RoPE layers, temperature on its NoPE ones, chunk size on its chunked ones); the
requirement that the layers fit their kinds (``kinds_fit``); the dense FFN layers read beside the kinds
(``FFNLayers``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .mapping import Requirement
from .rows import layer_attentions

Change = Callable[[dict[str, Any]], dict[str, Any]]
"""The attention fields a kind of layer sets, from the config (its window, its chunk size, ...)."""


def same(config: dict[str, Any]) -> dict[str, Any]:
    """The change of a kind that is the recipe's attention as it is."""
    return {}


def nope(config: dict[str, Any]) -> dict[str, Any]:
    """The change of a NoPE layer: no position encoding at all."""
    return {"rotary": {"type": "none"}}


@dataclass(frozen=True, eq=False)
class Setting:
    """A change of the layers of a kind that config keys state: ``keys`` maps attention fields to the config keys
    that hold them, ``change`` adds fields computed from the config; with a ``switch``, only where that config key
    is true (Llama 4's ``use_qk_norm``). ``layer_kinds`` writes it back: the switch is whether a layer has the
    ``probe`` field (the first of ``keys`` by default), the keys are the first such layer's, else their defaults
    (with a switch) or None. ``why`` (of ``{family}``): the misfit of a layer of another kind that has the probe
    field, or of one whose fields differ from ``expect(recipe)``; the layers of the kinds that have it set its
    fields alike."""

    keys: Mapping[str, str] = field(default_factory=dict)
    change: Change = same
    switch: str | None = None
    probe: str | None = None
    why: str | None = None
    expect: Callable[[Any], dict[str, Any]] | None = None
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """The defaults of its config keys (the switch's too), which join the ``layer_kinds`` row's."""

    def __call__(self, config: dict[str, Any]) -> dict[str, Any]:
        if self.switch is not None and not config[self.switch]:
            return {}
        return {**self.change(config), **{name: config[key] for name, key in self.keys.items()}}

    @property
    def fields(self) -> tuple[str, ...]:
        """The attention fields that tell whether (and how) a layer has it."""
        return tuple(self.keys) or (self.probe,)

    def write(self, attentions: list[Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
        have = [a for a in attentions if getattr(a, self.fields[0]) is not None]
        out = {} if self.switch is None else {self.switch: bool(have)}
        fallback = {key: None if self.switch is None else defaults[key] for key in self.keys.values()}
        return out | {key: getattr(have[0], name) if have else fallback[key] for name, key in self.keys.items()}

    def misfit(self, recipe: Any, attention: Any, own: bool) -> str | None:
        """``why`` where ``attention`` has this setting but is not of a kind that has it (``own``), or where its
        fields are not the ones ``expect`` says."""
        if self.why is None or getattr(attention, self.fields[0]) is None:
            return None
        want = self.expect(recipe) if self.expect else {}
        found = {name: _dumped(getattr(attention, name)) for name in want}
        return None if own and found == want else self.why


def _dumped(value: Any) -> Any:
    return value.model_dump() if hasattr(value, "model_dump") else value


def _weightless_qk_norm(config: dict[str, Any]) -> dict[str, Any]:
    return {
        "qk_norm": {"type": "rmsnorm", "affine": False, "eps": config["rms_norm_eps"]},
        "qk_norm_position": "after_rope",
    }


WEIGHTLESS_QK_NORM = Setting(
    change=_weightless_qk_norm,
    switch="use_qk_norm",
    probe="qk_norm",
    why="{family}'s qk norm is a weightless rmsnorm of norm.eps after rope, on RoPE layers only",
    expect=lambda recipe: {
        "qk_norm": {"type": "rmsnorm", "eps": recipe.norm.eps, "affine": False, "offset": 0.0},
        "qk_norm_position": "after_rope",
    },
    defaults={"use_qk_norm": True},
)
"""A RoPE layer's weightless RMSNorm of ``rms_norm_eps`` on each rotated query and key head, where the config's
``use_qk_norm`` is true (Llama 4's); a fitting recipe's is of ``norm.eps``."""

NOPE_LAYER = Setting(
    change=nope,
    probe="rotary",
    why="a {family} layer rotates by the stack's rope (rotary unset) or not at all (rotary: {{type: none}})",
)
"""``nope`` as a setting: a layer of no position encoding, where the others rotate by the stack's rope."""

TEMPERATURE = Setting(
    {"temperature_floor_scale": "floor_scale", "temperature_scale": "attn_scale"},
    switch="attn_temperature_tuning",
    why="{family} tunes the temperature of its NoPE layers only",
    defaults={"attn_temperature_tuning": True, "floor_scale": 8192, "attn_scale": 0.1},
)
"""A NoPE layer's query temperature, ``floor_scale`` and ``attn_scale``, where the config's
``attn_temperature_tuning`` is true (Llama 4's)."""


def unreadable(config: dict[str, Any], lists: dict[str, list[Any]], axes: Mapping[str, Any]) -> bool:
    """Whether a list has fewer entries than ``num_hidden_layers``, or lists a kind whose setting (one without a
    switch) has its config key null (a chunked layer without ``attention_chunk_size``)."""
    if min(map(len, lists.values())) < config["num_hidden_layers"]:
        return True
    listed = [
        part for key, axis in axes.items() for v in lists[key] for part in parts(axis.kinds.get(axis.kind(v), ()))
    ]
    return any(isinstance(s, Setting) and s.switch is None and None in map(config.get, s.keys.values()) for s in listed)


def parts(kind: Change | tuple[Change, ...]) -> tuple[Change, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


@dataclass(frozen=True)
class FFNLayers:
    """``layers:`` overrides of the FFN that a row reads and writes beside its kinds' (an MoE stack's dense layers):
    ``read(config, number of layers)`` gives the overrides, ``write(recipe, weights)`` the config keys back."""

    read: Callable[[dict[str, Any], int], list[dict[str, Any]]]
    write: Callable[[Any, Any], dict[str, Any]]
    check: Requirement
    """What a recipe holding only those overrides must be."""
    keys: Mapping[str, Any]
    """The config keys they are read from, with their defaults."""
    legacy: tuple[str, ...] = ()
    """Those keys read but not written (the written ones say the same)."""


def kinds_fit(
    axes: Mapping[str, Any], fields: tuple[str, ...], family: str, alike: str, order: tuple[Setting, ...], ffn: Any
) -> Requirement:
    """A requirement: ``layers:`` overrides change only the attention's ``fields`` or swap the FFN (as ``ffn``
    checks); no layer has a ``Setting`` misfit (checked in ``order``); and the layers of the kinds that have a
    setting set it alike (else ``alike``)."""

    def check(recipe: Any) -> str | None:
        blank = dict.fromkeys(fields)
        base = recipe.attention.model_copy(update=blank)
        for j, o in enumerate(recipe.layers):
            if o.norm is not None or (
                o.attention is not None and (o.ffn or o.attention.model_copy(update=blank) != base)
            ):
                return f"layers.{j}: a {family} layer differs only in its {', '.join(fields)}, or its FFN"
        attentions = layer_attentions(recipe)
        owns = [[s for axis in axes.values() for s in parts(axis.kinds[axis.kind(axis.of(a))])] for a in attentions]
        for attention, own in zip(attentions, owns, strict=True):
            problem = next((p for s in order if (p := s.misfit(recipe, attention, s in own))), None)
            if problem:
                return problem.format(family=family)
        for setting in settings_of(axes):
            found = [
                [getattr(a, f) for f in setting.fields]
                for a, own in zip(attentions, owns, strict=True)
                if setting in own
            ]
            if any(values != found[0] for values in found):
                return alike
        if ffn is None:
            return None
        dense = [o for o in recipe.layers if o.attention is None]
        return ffn.check(recipe.model_copy(update={"layers": dense}))

    return check


def settings_of(axes: Mapping[str, Any]) -> list[Setting]:
    """The kinds' settings, each once: those without a switch first."""
    found = [s for axis in axes.values() for kind in axis.kinds.values() for s in parts(kind)]
    found = [s for n, s in enumerate(found) if isinstance(s, Setting) and s not in found[:n]]
    return sorted(found, key=lambda s: s.switch is not None)
