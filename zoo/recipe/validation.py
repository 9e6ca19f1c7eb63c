"""Validation: each component spec against the config its component registered, then the recipe, then the
rules that span components. Every problem is collected into one ``RecipeError``.

A part that fails does not stop the others: the rules still run for every part that validated, and a rule
whose input failed is skipped, so each error is a cause, never a knock-on of another one.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from zoo.config import BuildContext, ComponentConfig, spec_fields
from zoo.errors import RecipeError, UnknownComponentError
from zoo.plugins import explain_unknown, get_registry
from zoo.registry import Registry, did_you_mean

from .schema import COMPONENT_FIELDS, LAYER_FIELDS, Recipe, positions_fit, select_layers

Errors = list[tuple[str, str]]

BYSTANDER_KEYS = frozenset({"description", "expect", "train"})
"""Recipe keys that, when they fail, still leave the rules something to check: without them the recipe takes
their defaults, under which the one rule that reads them (``train.seq_len``'s) does not fire."""


class FailedInput(Exception):
    """A rule read a part of the recipe that failed validation: the rule is skipped (that failure is reported)."""


class FailedSpec(ComponentConfig):
    """Holds the place of a component spec that failed validation, so that the rules not reading it still run.

    Reading any of its options (``type`` too) or calling ``check`` raises ``FailedInput``. Only validation
    sees one: a recipe with a failed spec raises ``RecipeError``.
    """

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            return super().__getattr__(name)
        raise FailedInput(name)

    def check(self, ctx: BuildContext) -> list[str]:
        raise FailedInput("check")


def _check_select(select: Any) -> str | None:
    try:
        select_layers(select, 1)
    except (ValueError, TypeError):
        return f"layer selector {select!r} is not an index, a list or a slice like '1::2'"
    return None


def _pydantic_errors(exc: ValidationError, prefix: str, model: type[BaseModel] | None = None) -> Errors:
    out = []
    for err in exc.errors(include_url=False):
        loc = [str(p) for p in err["loc"]]
        path = ".".join([prefix, *loc] if prefix else loc)
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            allowed = sorted(model.model_fields) if model is not None and len(loc) == 1 else []
            msg = f"unknown key{did_you_mean(loc[-1], allowed)}" + (
                f"; allowed: {', '.join(allowed)}" if allowed else ""
            )
        elif err["type"] == "missing":
            msg = "required key is missing"
        elif "input" in err and not isinstance(err["input"], (dict, list)):
            msg = f"{msg} (got {err['input']!r})"
        out.append((path, msg.removeprefix("Value error, ")))
    return out


# ---------------------------------------------------------------------------------------------- component specs


@functools.cache
def _options_model(config: type[ComponentConfig]) -> type[BaseModel]:
    """A model with ``config``'s fields (types, bounds, defaults) and none of its validators."""
    fields: dict[str, Any] = {name: (f.annotation, copy.copy(f)) for name, f in config.model_fields.items()}
    return create_model(f"{config.__name__}Options", __config__=ConfigDict(extra="forbid"), **fields)


def _stand_in(config: type[ComponentConfig], spec: Mapping[str, Any], exc: ValidationError) -> ComponentConfig | None:
    """``config`` with its options validated but not its model-level rules, when only those failed; else None.

    A model validator (``num_heads`` must be divisible by ``num_kv_heads``) fails a spec whose every option
    is valid on its own: the rules that span components can still read those options and report their own
    errors alongside (``d_model`` not divisible by ``num_heads``).
    """
    if any(err["loc"] for err in exc.errors()):
        return None  # an option itself is invalid
    try:
        options = _options_model(config).model_validate(dict(spec))
    except ValidationError:
        return None
    return config.model_construct(_fields_set=set(options.model_fields_set), **dict(options))


def _validate_spec(
    registry: Registry, kind: str, spec: Any, path: str, errors: Errors
) -> tuple[ComponentConfig | None, ComponentConfig | None]:
    """``(config, None)`` for a valid spec; else ``(None, stand_in)`` (see ``_stand_in``), errors collected."""
    if isinstance(spec, str):
        spec = {"type": spec}
    if isinstance(spec, ComponentConfig):
        return spec, None
    if not isinstance(spec, Mapping):
        errors.append((path, f"a {kind} spec must be a mapping like {{type: NAME, ...}}, not {spec!r}"))
        return None, None
    name = spec.get("type")
    if not isinstance(name, str):
        choices = ", ".join(registry.names(kind))
        errors.append((f"{path}.type", f"required: the {kind} type to use; registered: {choices}"))
        return None, None
    try:
        component = registry.get(kind, name)
    except UnknownComponentError as exc:
        errors.append((f"{path}.type", explain_unknown(kind, name, str(exc))))
        return None, None
    try:
        config = component.config.model_validate(dict(spec))
    except ValidationError as exc:
        errors.extend(_pydantic_errors(exc, path, component.config))
        stand_in = _stand_in(component.config, spec, exc)
        if stand_in is not None:
            _validate_nested(registry, stand_in, path, errors)
        return None, stand_in
    _validate_nested(registry, config, path, errors)
    return config, None


def _validate_nested(registry: Registry, config: ComponentConfig, path: str, errors: Errors) -> None:
    for field, nested_kind in spec_fields(type(config)).items():
        nested = getattr(config, field)
        if nested is not None:
            validate_spec(registry, nested_kind, nested, f"{path}.{field}", errors)


def validate_spec(registry: Registry, kind: str, spec: Any, path: str, errors: Errors) -> ComponentConfig | None:
    """Validate one ``{type: NAME, ...}`` spec against the config NAME registered; collect errors."""
    return _validate_spec(registry, kind, spec, path, errors)[0]


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
        arch_config = arch.config()
        for key, value in arch_config.defaults.items():
            data.setdefault(key, copy.deepcopy(value))
        arch_config.derive(data)

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
    if isinstance(data.get("layers"), list):
        data["layers"] = [dict(o) if isinstance(o, Mapping) else o for o in data["layers"]]
        for i, override in enumerate(data["layers"]):
            if isinstance(override, dict):
                for kind in LAYER_FIELDS:
                    check(kind, override, f"layers.{i}.{kind}")
                problem = _check_select(override.get("select"))
                if problem:
                    errors.append((f"layers.{i}.select", problem))
                    layers_known = False

    recipe = None
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as exc:
        errors.extend(e for e in _pydantic_errors(exc, "", Recipe) if e[0] not in failed)
        recipe = _without_bystanders(data, exc)
    if recipe is not None and arch is not None and layers_known:
        errors.extend(check_rules(recipe, registry))
    if errors:
        raise RecipeError(_dedupe(errors), source=source)
    assert recipe is not None
    return recipe


def _check_block(data: dict[str, Any], errors: Errors, failed: set[str]) -> None:
    """Validate ``block`` (``norm_position`` at the top is short for ``block.norm_position``) in place."""
    from zoo.components.block import BlockConfig

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


def _dedupe(errors: Errors) -> Errors:
    seen, out = set(), []
    for e in errors:
        if e not in seen:
            seen.add(e)
            out.append(e)
    return out


def _attempt(rule: Callable[..., list[str]], *args: Any) -> list[str]:
    """What ``rule(*args)`` finds, or nothing when it reads a part that failed validation."""
    try:
        return list(rule(*args))
    except FailedInput:
        return []


# ---------------------------------------------------------------------------------------------- rules


def check_rules(recipe: Recipe, registry: Registry) -> Errors:
    """Rules that span components: each component's ``check(ctx)`` where it sits, causality, lengths.

    A rule that reads a part whose spec failed validation is skipped; so is the positional encoding's check
    when the first layer's attention has errors of its own (the head_dim it would check does not exist).
    """
    errors: Errors = []
    arch = registry.get("architecture", recipe.architecture).config()
    try:
        errors.extend(arch.check_recipe(recipe))
    except FailedInput:
        return errors  # the rules below may rest on what the architecture would have refused
    if errors:
        return errors
    for stack, causal in arch.stacks:
        layer_errors, ctx = _check_layers(recipe, stack, causal)
        if ctx is not None:
            errors.extend(("positional", m) for m in _attempt(recipe.positional.check, ctx))
        if recipe.positional.requires_causal and not causal:
            errors.append(("positional", f"{recipe.positional.type} needs a causal stack; the {stack} is not causal"))
        errors.extend(layer_errors)
    seq_len = recipe.train.seq_len
    try:
        too_long = positions_fit(recipe, seq_len) if seq_len is not None and arch.token_input else None
    except FailedInput:
        too_long = None
    if too_long:
        errors.append(("train.seq_len", f"{too_long}: lower train.seq_len or raise max_len"))
    try:
        head_ctx = recipe.context()
    except FailedInput:
        head_ctx = None  # the heads come from an attention that failed
    if head_ctx is not None:
        errors.extend(("embedding", m) for m in _attempt(recipe.embedding.check, head_ctx))
        errors.extend(("head", m) for m in _attempt(recipe.head.check, head_ctx))
    return _dedupe(errors)


def _check_layers(recipe: Recipe, stack: str, causal: bool) -> tuple[Errors, BuildContext | None]:
    """The errors of every block of ``stack``, and the context of its first block for the positional check:
    None when that block's attention failed or has errors of its own (its heads are not what they say)."""
    errors: Errors = []
    first: BuildContext | None = None
    for i in range(recipe.stack_layers(stack)):
        try:
            ctx: BuildContext | None = recipe.context(layer_idx=i, causal=causal, stack=stack)
        except FailedInput:
            ctx = None  # this block's heads come from an attention that failed
        heads_ok = ctx is not None
        for kind, config in recipe.layer_components(stack, i).items():
            path = _layer_path(recipe, stack, i, kind)
            found = [] if ctx is None else _attempt(config.check, ctx)
            errors.extend((path, m) for m in found)
            heads_ok = heads_ok and not (kind == "attention" and found)
            if config.requires_causal and not causal:
                errors.append(
                    (
                        path,
                        f"{kind} '{config.type}' needs a causal (decoder) stack; the {stack} is not causal",
                    )
                )
        if i == 0 and heads_ok:
            first = ctx
    return errors, first


def _layer_path(recipe: Recipe, stack: str, index: int, kind: str) -> str:
    for j in range(len(recipe.layers) - 1, -1, -1):
        o = recipe.layers[j]
        if getattr(o, kind) is not None and o.stack in ("all", stack):
            if index in select_layers(o.select, recipe.stack_layers(stack)):
                return f"layers.{j}.{kind}"
    return kind
