"""Sliding-window layers as Qwen2's config says them: ``use_sliding_window``, ``sliding_window``,
``max_window_layers`` and ``layer_types`` (``sliding_attention`` / ``full_attention``) <-> the attention's ``window``
on the recipe or on ``layers:`` overrides. Qwen2 and Qwen3 use the ``WINDOWS`` row; gpt-oss ``layer_type_windows``
(``layer_types`` alone decides); GPT-Neo ``pattern_windows`` (a repeated pattern of global and local layers);
Qwen2-MoE refuses sliding layers (``no_sliding_layers``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from zoo.errors import HFImportError

from .layer_kinds import used_window
from .mapping import Option
from .rows import per_layer_attention
from .table import Computed, Row, Unread

LAYER_TYPES = ("full_attention", "sliding_attention")

WINDOW_OPTIONS = (
    Option(
        "layer_types",
        lambda v: v is None or (isinstance(v, list) and all(t in LAYER_TYPES for t in v)),
        f"zoo builds the layer types {', '.join(LAYER_TYPES)} only",
    ),
)


def sliding_layers(config: dict[str, Any]) -> tuple[int | None, list[int]]:
    """(the window, the indices of the layers that slide), as Qwen2Config's ``__post_init__`` decides them."""
    window = used_window(config)
    n = config["num_hidden_layers"]
    types = config["layer_types"]
    if types is None:
        return window, [i for i in range(n) if window is not None and i >= config["max_window_layers"]]
    if len(types) != n:
        raise HFImportError(f"layer_types names {len(types)} layers but num_hidden_layers is {n}")
    sliding = [i for i, t in enumerate(types) if t == "sliding_attention"]
    if sliding and window is None:
        raise HFImportError(
            f"layer_types makes layers {sliding} sliding_attention but there is no window "
            f"(use_sliding_window={config['use_sliding_window']!r}, sliding_window={config['sliding_window']!r}); "
            "transformers cannot build this model either"
        )
    return window, sliding


def with_sliding_layers(recipe: dict[str, Any], window: int | None, sliding: list[int]) -> dict[str, Any]:
    """The recipe paths that put ``window`` on the attention of the ``sliding`` layers (of all: on the recipe's
    attention)."""
    if not sliding:
        return {}
    if len(sliding) == recipe["num_layers"]:
        return {"attention.window": window}
    return {"layers": [{"select": sliding, "attention": {**recipe["attention"], "window": window}}]}


def layer_windows(recipe: Any) -> list[int | None]:
    """The attention window of every layer of a (validated) decoder recipe."""
    return [getattr(placed["attention"][0], "window", None) for placed in recipe.layer_plan("decoder")]


def only_windows_differ(recipe: Any) -> str | None:
    """A requirement: ``layers:`` overrides change nothing but the attention's window, and the layers that have a
    window share one (a Qwen2 config has one ``sliding_window`` and a type per layer)."""
    base = recipe.attention.model_copy(update={"window": None})
    for j, override in enumerate(recipe.layers):
        if override.norm is not None or override.ffn is not None:
            return f"layers.{j}: overrides a norm or an FFN; only the attention's window may differ per layer"
        attention = override.attention
        if attention is not None and attention.model_copy(update={"window": None}) != base:
            return f"layers.{j}.attention differs from attention in more than its window"
    windows = {w for w in layer_windows(recipe) if w is not None}
    if len(windows) > 1:
        return f"the layers' windows {sorted(windows)} differ; a sliding_window is one value"
    return None


def hf_sliding_layers(recipe: Any) -> dict[str, Any]:
    """The sliding-window keys of a Qwen2 / Qwen3 config for ``recipe`` (the way back of ``sliding_layers``)."""
    windows = layer_windows(recipe)
    window = next((w for w in windows if w is not None), None)
    return {
        "use_sliding_window": window is not None,
        "sliding_window": window,
        "max_window_layers": next((i for i, w in enumerate(windows) if w is not None), len(windows)),
        "layer_types": [LAYER_TYPES[w is not None] for w in windows],
    }


def windows_row(
    name: str,
    keys: Mapping[str, Any],
    read: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]],
    write: Callable[[Any, Any], dict[str, Any]],
) -> Computed:
    """A row that reads and writes the layers' attention windows (``attention.window`` and ``layers:`` overrides of
    it), read last (its overrides copy the attention as the other rows made it); only the windows may differ."""
    return Computed(
        name,
        keys=keys,
        paths=("attention.window", "layers"),
        read=read,
        write=write,
        requires={"layers": only_windows_differ},
        last=True,
    )


WINDOWS = windows_row(
    "sliding layers",
    {"use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 28, "layer_types": None},
    lambda config, recipe: with_sliding_layers(recipe, *sliding_layers(config)),
    lambda recipe, weights: hf_sliding_layers(recipe),
)


def layer_type_windows(window: int, fill: Callable[[int], list[str]]) -> tuple[Row, ...]:
    """``WINDOWS`` and ``WINDOW_OPTIONS`` of a config without ``use_sliding_window`` and ``max_window_layers``: its
    ``layer_types`` alone (``fill(num_hidden_layers)`` where it is null) say which layers slide over
    ``sliding_window`` (default ``window``) keys, as in gpt-oss."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        n = config["num_hidden_layers"]
        types = config["layer_types"] or fill(n)
        keys = {**config, "use_sliding_window": True, "max_window_layers": n, "layer_types": types}
        return with_sliding_layers(recipe, *sliding_layers(keys))

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        return {k: v for k, v in hf_sliding_layers(recipe).items() if k in ("sliding_window", "layer_types")}

    return windows_row("sliding layers", {"sliding_window": window, "layer_types": None}, read, write), *WINDOW_OPTIONS


def sliding_first(n: int) -> list[str]:
    """``layer_types`` of ``n`` layers of which every other slides, the first too (gpt-oss's default)."""
    return [LAYER_TYPES[(i + 1) % 2] for i in range(n)]


def pattern_windows(
    key: str, pattern: list[Any], window: tuple[str, int], kinds: tuple[str, str] = ("global", "local")
) -> Computed:
    """The windows of a config whose ``key`` repeats a pattern of global and local layers (``kinds``),
    ``[[kinds, times], ...]`` (``pattern`` where it is null), as GPT-Neo's ``attention_types``: a local layer sees
    the ``window`` key's most recent keys (its default the second item). Written back as the shortest pattern that
    repeats over the layers."""
    size, default = window

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        given = config[key] or pattern  # what the config class fills in for a null
        types = [kind for names, repeat in given for _ in range(repeat) for kind in names]
        if len(types) != config["num_layers"] or set(types) - set(kinds):
            raise HFImportError(
                f"{key}={given!r} is not supported: zoo builds num_layers ({config['num_layers']}) layers, "
                f"each {' or '.join(kinds)}, as transformers does"
            )
        return per_layer_attention(recipe, [{"window": config[size]} if t == kinds[1] else {} for t in types])

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        types = [kinds[w is not None] for w in layer_windows(recipe)]
        n = len(types)
        period = next(p for p in range(1, n + 1) if n % p == 0 and types == types[:p] * (n // p))
        local = next((w for w in layer_windows(recipe) if w is not None), default)
        return {key: [[types[:period], n // period]], size: local}

    return windows_row("windows", {key: pattern, size: default}, read, write)


def no_sliding_layers(name: str, which: str) -> tuple[Row, ...]:
    """Qwen2's window keys where the family ``name`` builds full attention in every layer: ``use_sliding_window``
    refused (its sliding layers, ``which``, are not translated), ``layer_types`` full only, ``sliding_window`` and
    ``max_window_layers`` unread."""
    why = f"zoo's {name} import builds full attention in every layer; {which} are not translated"
    return (
        Option("use_sliding_window", lambda v: not v, why, export=False),
        Option(
            "layer_types",
            lambda v: v is None or (isinstance(v, list) and all(t == "full_attention" for t in v)),
            f"zoo's {name} import builds full_attention layers only",
        ),
        Unread(
            "sliding_window", "the window of use_sliding_window, which is refused (transformers sets it to 0 without)"
        ),
        Unread("max_window_layers", "which layers would slide with use_sliding_window, which is refused"),
    )
