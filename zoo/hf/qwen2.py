"""Qwen2 (``Qwen2ForCausalLM``, Qwen1.5 / Qwen2 / Qwen2.5): Llama's network with biases on the query, key and
value projections but not on the output one, and optional sliding-window layers.

Which layers slide is ``layer_types`` (``sliding_attention`` / ``full_attention``); a config without it gets
Qwen2Config's rule: with ``use_sliding_window``, the layers from ``max_window_layers`` on slide over the
``sliding_window`` most recent keys, the others attend to every key; without it no layer slides (whatever
``sliding_window`` says). zoo writes the sliding layers as ``layers:`` overrides that set the attention's
``window`` (every layer, when all slide: the recipe's attention), and exports ``layer_types`` explicitly.

The helpers of this file serve Qwen3 (``zoo/hf/qwen3.py``) too.
"""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from .llama import (
    ACTS,
    COMMON_REQUIREMENTS,
    GATED,
    IGNORED,
    LLAMA_DEFAULTS,
    LLAMA_OPTIONS,
    LLAMA_RULES,
    _config,
    _recipe,
)
from .mapping import Family, Option

LAYER_TYPES = ("full_attention", "sliding_attention")

WINDOW_DEFAULTS: dict[str, Any] = {
    "use_sliding_window": False,
    "sliding_window": 4096,
    "max_window_layers": 28,
    "layer_types": None,
}
"""The sliding-window keys of Qwen2Config and Qwen3Config, with their defaults."""

QWEN2_DEFAULTS: dict[str, Any] = {
    **{k: v for k, v in LLAMA_DEFAULTS.items() if k not in ("attention_bias", "mlp_bias")},
    "vocab_size": 151936,
    "intermediate_size": 22016,
    "num_key_value_heads": 32,
    "max_position_embeddings": 32768,
    **WINDOW_DEFAULTS,
}
"""Qwen2Config's defaults. It has no head_dim attribute, but Qwen2Attention reads one a config.json gives."""

WINDOW_OPTIONS = (
    Option(
        "layer_types",
        lambda v: v is None or (isinstance(v, list) and all(t in LAYER_TYPES for t in v)),
        f"zoo builds the layer types {', '.join(LAYER_TYPES)} only",
    ),
)


def sliding_layers(config: dict[str, Any]) -> tuple[int | None, list[int]]:
    """(the window, the indices of the layers that slide), as Qwen2Config's ``__post_init__`` decides them."""
    window = config["sliding_window"] if config["use_sliding_window"] else None
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
    """``recipe`` with ``window`` on the attention of the ``sliding`` layers (of all: on the recipe's attention)."""
    if not sliding:
        return recipe
    if len(sliding) == recipe["num_layers"]:
        return {**recipe, "attention": {**recipe["attention"], "window": window}}
    return {**recipe, "layers": [{"select": sliding, "attention": {**recipe["attention"], "window": window}}]}


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


def qkv_biases(recipe: Any) -> str | None:
    """A requirement: biases on the query, key and value projections, none on the output one."""
    on = recipe.attention.biases()
    if on != {"q": True, "k": True, "v": True, "o": False}:
        return f"attention biases are {on}, need q, k and v but not o (Qwen2)"
    return None


def qwen2_recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    ffn = {**GATED[config["hidden_act"]], "hidden": config["intermediate_size"], "bias": False}
    recipe = _recipe(config, ffn, True)
    recipe["attention"]["o_bias"] = False
    return with_sliding_layers(recipe, *sliding_layers(config))


def qwen2_config(recipe, weights) -> dict[str, Any]:
    return {**_config(recipe, weights, recipe.ffn, "blocks.0.ffn.up_proj.weight"), **hf_sliding_layers(recipe)}


BIAS_KEYS = ("attention.q_bias", "attention.k_bias", "attention.v_bias", "attention.o_bias")

LAYERED_REQUIREMENTS = {
    **{k: v for k, v in COMMON_REQUIREMENTS.items() if k not in BIAS_KEYS},
    "layers": only_windows_differ,
    "ffn.type": tuple(ACTS),
    "ffn.bias": False,
}
"""Llama's requirements, but layers may differ in their window (which projections have biases is each family's)."""

QWEN2 = Family(
    name="qwen2",
    model_type="qwen2",
    classes=("Qwen2ForCausalLM",),
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    defaults=QWEN2_DEFAULTS,
    options=(*LLAMA_OPTIONS, *WINDOW_OPTIONS),
    rules=LLAMA_RULES,
    ignored=IGNORED,
    requirements={**LAYERED_REQUIREMENTS, "attention.biases": qkv_biases},
    recipes=("qwen2.5-0.5b",),
    recipe=qwen2_recipe,
    config=qwen2_config,
    hf_class=lambda recipe: "Qwen2ForCausalLM",
)
