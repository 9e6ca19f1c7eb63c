"""Validation: each component spec against the config its component registered, then the recipe, then the
rules that span components. Every problem is collected into one ``RecipeError``.

A part that fails does not stop the others: the rules still run for every part that validated, and a rule
whose input failed is skipped, so each error is a cause, never a knock-on of another one.

This module holds the recipe-level pass (``validate_recipe``: the architecture's defaults, ``block``, ``train``,
``layers``, the ``Recipe`` model); ``specs`` validates the component specs, ``rules`` checks the rules that span
components, ``report`` words the errors. Their public names are importable from here too.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from zoo.config import StrictNumbers
from zoo.errors import RecipeError, UnknownComponentError
from zoo.limits import MAX_LAYERS
from zoo.plugins import explain_unknown, get_registry

from .block import BlockConfig
from .report import Errors, _dedupe, _interrupt, _pydantic_errors, raised, short_repr
from .rules import STYLE_WORDS, check_rules
from .schema import COMPONENT_FIELDS, LAYER_FIELDS, Recipe, layer_selection
from .specs import FailedInput, FailedSpec, _validate_spec, validate_spec
from .training import TrainConfig

__all__ = [
    "BYSTANDER_KEYS",
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

BYSTANDER_KEYS = frozenset({"description", "expect", "train"})
"""Recipe keys that, when they fail, still leave the rules something to check: without them the recipe takes
their defaults, under which the one rule that reads them (``train.seq_len``'s) does not fire."""


def _check_select(select: Any) -> str | None:
    try:
        layer_selection(select, 1)
    except (ValueError, TypeError):
        return f"layer selector {short_repr(select)} is not an index, a list of indices or a slice like '1::2'"
    return None


# ---------------------------------------------------------------------------------------------- the recipe


def validate_recipe(data: Mapping[str, Any], *, source: str | None = None) -> Recipe:
    """A ``Recipe`` from plain data (``extends`` already resolved), or ``RecipeError`` with every problem."""
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

    def check(kind: str, container: dict[str, Any], path: str) -> None:
        if kind not in container or container[kind] is None:
            return
        config, stand_in = _validate_spec(registry, kind, container[kind], path, errors)
        if config is None:
            failed.add(path)
            container[kind] = stand_in if stand_in is not None else FailedSpec()
        else:
            container[kind] = config

    for kind in COMPONENT_FIELDS:
        check(kind, data, kind)
    _check_block(data, errors, failed)
    _check_train(data, errors, failed)
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

    recipe = None
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as exc:
        reported = tuple(f"{path}." for path in failed)
        errors.extend(
            e for e in _pydantic_errors(exc, "", Recipe) if e[0] not in failed and not e[0].startswith(reported)
        )
        recipe = _without_bystanders(data, exc)
    if recipe is not None and arch is not None and layers_known:
        errors.extend(check_rules(recipe, registry))
    if errors:
        raise RecipeError(_dedupe(errors), source=source)
    assert recipe is not None
    return recipe


def _check_block(data: dict[str, Any], errors: Errors, failed: set[str]) -> None:
    """Validate ``block`` (``norm_position`` at the top is short for ``block.norm_position``) in place."""

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
    try:
        data["block"] = BlockConfig.model_validate(block)
    except ValidationError as exc:
        errors.extend(_pydantic_errors(exc, "block", BlockConfig))
        failed.add("block")
        data.pop("block", None)


class _CheckedTrain(StrictNumbers, TrainConfig):
    """``TrainConfig`` with the checks of every other recipe model: no boolean read as a number."""


def _check_train(data: dict[str, Any], errors: Errors, failed: set[str]) -> None:
    """Validate ``train`` with ``_CheckedTrain``; when it fails, report its errors and leave the default."""
    train = data.get("train")
    if train is None or isinstance(train, TrainConfig) or not isinstance(train, Mapping):
        return  # a wrong type is reported by the recipe's own validation
    try:
        _CheckedTrain.model_validate(train)
    except ValidationError as exc:
        errors.extend(_pydantic_errors(exc, "train", TrainConfig))
        failed.add("train")
        data.pop("train")


def _without_bystanders(data: dict[str, Any], exc: ValidationError) -> Recipe | None:
    """The recipe less its failed keys when those are unknown keys or ``BYSTANDER_KEYS``, for the rules to
    check; None when a key the rules read failed (``d_model``, ``max_len``, ...)."""
    drop = set()
    for err in exc.errors():
        key = str(err["loc"][0]) if err["loc"] else ""
        if key not in BYSTANDER_KEYS and not (err["type"] == "extra_forbidden" and len(err["loc"]) == 1):
            return None
        drop.add(key)
    try:
        return Recipe.model_validate({k: v for k, v in data.items() if k not in drop})
    except ValidationError:
        return None
