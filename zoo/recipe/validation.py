"""Validation: each component spec against the config its component registered, then the recipe, then the
rules that span components. Every problem is collected into one ``RecipeError``.

A part that fails does not stop the others: the rules run in the same pass over every part that validated (a
field that failed is a ``FailedValue``, a component a ``FailedSpec``), and a rule whose input failed is skipped,
so every error comes at once and each is a cause, never a knock-on of another one.

This module holds the recipe-level pass (``validate_recipe``: the architecture's defaults, ``block``, ``train``,
``layers``, the ``Recipe`` model); ``specs`` validates the component specs, ``rules`` checks the rules that span
components, ``report`` words the errors. Their public names are importable from here too.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from zoo.config import StrictNumbers
from zoo.errors import RecipeError, UnknownComponentError
from zoo.limits import MAX_LAYERS
from zoo.plugins import explain_unknown, get_registry

from .block import BlockConfig
from .partial import FailedValue, failed_fields, field_errors, is_failed, partial_model, validate_partially
from .report import Errors, _dedupe, _interrupt, _pydantic_errors, raised, short_repr
from .rules import STYLE_WORDS, check_rules
from .schema import COMPONENT_FIELDS, LAYER_FIELDS, Recipe, layer_selection
from .specs import FailedInput, FailedSpec, _validate_spec, validate_spec
from .training import TrainConfig

__all__ = [
    "STYLE_WORDS",
    "Errors",
    "FailedInput",
    "FailedSpec",
    "check_rules",
    "raised",
    "short_repr",
    "validate_recipe",
    "validate_spec",
]


def _check_select(select: Any) -> str | None:
    try:
        layer_selection(select, 1)
    except (ValueError, TypeError):
        return f"layer selector {short_repr(select)} is not an index, a list of indices or a slice like '1::2'"
    return None


# ---------------------------------------------------------------------------------------------- the recipe


def validate_recipe(
    data: Mapping[str, Any], *, source: str | None = None, origins: Mapping[str, str] | None = None
) -> Recipe:
    """A ``Recipe`` from plain data (``extends`` already resolved), or ``RecipeError`` with every problem;
    ``origins`` names the overrides that set paths of ``data`` (see ``RecipeError``)."""
    registry = get_registry()
    errors: Errors = []
    data = dict(data)
    failed: set[str] = set()  # paths already reported, whose follow-on errors would be noise
    layers_known = True  # every layer selector parses, so the rules know which components each layer has

    arch_name = data.get("architecture")
    arch = None
    if isinstance(arch_name, str):
        try:
            arch = registry.get("architecture", arch_name)
        except UnknownComponentError as exc:
            errors.append(("architecture", explain_unknown("architecture", arch_name, str(exc))))
            # What the architecture would have filled in is not missing: it is unknown. Say it once.
            failed.update(k for k in ("embedding", "head", "positional") if k not in data)
    # The architecture supplies defaults, e.g. vit embeds patches and heads with a classifier.
    if arch is not None:
        try:
            arch_config = arch.config()
            for key, value in arch_config.defaults.items():
                data.setdefault(key, copy.deepcopy(value))
            arch_config.derive(data)
        except BaseException as exc:  # noqa: BLE001 - a plugin architecture's own code
            _interrupt(exc)
            errors.append(("architecture", f"architecture '{arch_name}' (plugin '{arch.plugin}') raised {raised(exc)}"))
            arch = None

    def check(kind: str, container: dict[str, Any], path: str, key: str | None = None) -> None:
        key = key or kind
        if key not in container or container[key] is None:
            return
        config, stand_in = _validate_spec(registry, kind, container[key], path, errors)
        if config is None:
            failed.add(path)
            container[key] = stand_in if stand_in is not None else FailedSpec()
        else:
            container[key] = config

    for kind in COMPONENT_FIELDS:
        check(kind, data, kind)
    check("embedding", data, "encoder_embedding", "encoder_embedding")
    parts: dict[str, Any] = {}  # what validated of block and train when they failed, for the rules
    _check_block(data, errors, failed, parts)
    _check_train(data, errors, failed, parts)
    if isinstance(data.get("layers"), list) and len(data["layers"]) > MAX_LAYERS:
        errors.append(("layers", f"{len(data['layers']):,} per-layer overrides; at most {MAX_LAYERS:,}"))
        failed.add("layers")
        data.pop("layers")  # not validated one by one: the list is refused as a whole
        layers_known = False
    if isinstance(data.get("layers"), list):
        data["layers"] = [dict(o) if isinstance(o, Mapping) else o for o in data["layers"]]
        for i, override in enumerate(data["layers"]):
            if isinstance(override, dict):
                for kind in LAYER_FIELDS:
                    check(kind, override, f"layers.{i}.{kind}")
                if "select" not in override:
                    layers_known = False  # pydantic reports the missing key
                    continue
                problem = _check_select(override["select"])
                if problem:
                    errors.append((f"layers.{i}.select", problem))
                    failed.add(f"layers.{i}.select")
                    layers_known = False

    if isinstance(data.get("vision"), Mapping):  # a tower: a recipe of its own, its errors under vision.
        data["vision"] = _tower(data["vision"], "vision", errors, failed)
    recipe, details = field_errors(Recipe, data)
    if recipe is None:
        reported = tuple(f"{path}." for path in failed)
        errors.extend(
            _section_hint(data, path, msg)
            for path, msg in _pydantic_errors(details, "", Recipe)
            if path not in failed and not path.startswith(reported)
        )
        recipe = partial_model(Recipe, data, failed_fields(details))
    if recipe is not None and arch is not None:
        errors.extend(check_rules(_with_failed_parts(recipe, layers_known, parts), registry))
    if errors:
        raise RecipeError(_dedupe(errors), source=source, origins=origins)
    assert recipe is not None
    return recipe


def _tower(data: Mapping[str, Any], key: str, errors: Errors, failed: set[str]) -> Recipe | None:
    """The recipe of a model's tower (a dual-encoder's ``vision``), validated as a recipe of its own (named after
    its key unless it says), or None with its errors reported under ``key.``."""
    try:
        return validate_recipe({"name": key, **data})
    except RecipeError as exc:
        errors.extend((f"{key}.{path}" if path else key, message) for path, message in exc.errors)
        failed.add(key)
        return None


def _section_hint(data: Mapping[str, Any], path: str, msg: str) -> tuple[str, str]:
    """An unknown top-level key that is a field of exactly one section of the recipe (a component's config as
    its ``type`` gives it, ``block``, ``train``) is most likely a key of that section indented as a top-level
    one: say so instead of listing the top-level fields."""
    if "." in path or path in Recipe.model_fields or not msg.startswith("unknown key"):
        return path, msg
    sections: dict[str, Any] = {"block": BlockConfig, "train": TrainConfig}
    sections.update({kind: type(data[kind]) for kind in COMPONENT_FIELDS if isinstance(data.get(kind), BaseModel)})
    owners = [name for name, model in sections.items() if path in getattr(model, "model_fields", {})]
    if len(owners) != 1:
        return path, msg
    return path, f"not a top-level field; did you mean {owners[0]}.{path}? (indent it under {owners[0]}:)"


def _check_block(data: dict[str, Any], errors: Errors, failed: set[str], parts: dict[str, Any]) -> None:
    """Validate ``block`` (``norm_position`` at the top is short for ``block.norm_position``) in place; when it
    fails, report its errors and leave what validated of it for the rules."""

    block = data.get("block", {})
    if "norm_position" in data:
        short = data.pop("norm_position")
        if isinstance(block, Mapping) and block.get("norm_position", short) != short:
            errors.append(("norm_position", f"{short!r} disagrees with block.norm_position: give one of them"))
            failed.add("block")
            data.pop("block")
            return
        block = {**block, "norm_position": short} if isinstance(block, Mapping) else block
    if isinstance(block, BlockConfig):
        data["block"] = block
        return
    valid, partial, found = validate_partially(BlockConfig, block, "block")
    if valid is not None:
        data["block"] = valid
        return
    errors.extend(found)
    failed.add("block")
    _set_aside(data, "block", partial, parts)


class _CheckedTrain(StrictNumbers, TrainConfig):
    """``TrainConfig`` with the checks of every other recipe model: no boolean read as a number."""


def _check_train(data: dict[str, Any], errors: Errors, failed: set[str], parts: dict[str, Any]) -> None:
    """Validate ``train`` with ``_CheckedTrain``; when it fails, report its errors and leave what validated of it
    for the rules."""
    train = data.get("train")
    if train is None or isinstance(train, TrainConfig) or not isinstance(train, Mapping):
        return  # a wrong type is reported by the recipe's own validation
    valid, partial, found = validate_partially(_CheckedTrain, train, "train")
    if valid is None:
        errors.extend(found)
        failed.add("train")
        _set_aside(data, "train", partial, parts)


def _set_aside(data: dict[str, Any], key: str, partial: Any, parts: dict[str, Any]) -> None:
    """Take ``key`` out of ``data`` (the recipe validates without it: its errors are reported) and keep what
    validated of it for the rules in ``parts``, or a ``FailedValue`` when nothing did."""
    data.pop(key, None)
    parts[key] = partial if partial is not None else FailedValue(key)


def _with_failed_parts(recipe: Recipe, layers_known: bool, failed_parts: dict[str, Any]) -> Recipe:
    """``recipe`` as the rules read it: what validated of ``block`` and ``train`` when they failed, a
    ``FailedSpec`` for each component that failed as a whole, and ``layers`` failed when a selector did not
    parse (which layers it changes is not known)."""
    parts = {kind: FailedSpec() for kind in COMPONENT_FIELDS if is_failed(getattr(recipe, kind))}
    parts.update(failed_parts)
    if not layers_known:
        parts["layers"] = FailedValue("layers")
    if parts:
        recipe = recipe.model_copy()
        recipe.__dict__.update(parts)
    return recipe
