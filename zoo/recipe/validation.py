"""Validation: each component spec against the config its component registered, then the recipe, then the
rules that span components. Every problem is collected into one ``RecipeError``.

A part that fails does not stop the others: the rules still run for every part that validated, and a rule
whose input failed is skipped, so each error is a cause, never a knock-on of another one.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from zoo.config import POSITIONAL_STYLES, BuildContext, ComponentConfig, StrictNumbers, spec_fields
from zoo.errors import RecipeError, UnknownComponentError
from zoo.limits import MAX_INT_DIGITS, MAX_LAYERS, MAX_MODEL_EXPERTS
from zoo.plugins import explain_unknown, get_registry
from zoo.registry import Registry, did_you_mean

from .block import BlockConfig
from .schema import COMPONENT_FIELDS, LAYER_FIELDS, Recipe, layer_selection, positions_fit
from .training import TrainConfig

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


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters; an integer too long to print (> 4,300 digits) by its size."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * MAX_INT_DIGITS:
        return f"an integer of about {int(value.bit_length() * 0.30103):,} digits"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails is still a value to report
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_select(select: Any) -> str | None:
    try:
        layer_selection(select, 1)
    except (ValueError, TypeError):
        return f"layer selector {short_repr(select)} is not an index, a list of indices or a slice like '1::2'"
    return None


def _interrupt(exc: BaseException) -> None:
    """Re-raise the user's interrupt; any other exception from a plugin's code becomes an error to report."""
    if isinstance(exc, (KeyboardInterrupt, GeneratorExit)):
        raise exc


def raised(exc: BaseException) -> str:
    """``TypeName: message`` in one line, for errors that report what a plugin's code raised."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def _owner(registry: Registry, kind: str, config: Any) -> str:
    """``attention 'mha' (plugin 'zoo.components.attention')``: who wrote the code of a config."""
    name = getattr(type(config), "model_fields", {}).get("type")
    name = name.default if name is not None else type(config).__name__
    try:
        plugin = registry.get(kind, name).plugin
    except (UnknownComponentError, TypeError):
        return f"{kind} '{name}'"
    return f"{kind} '{name}' (plugin '{plugin}')"


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
            msg = f"{msg} (got {short_repr(err['input'])})"
        out.append((path, msg.removeprefix("Value error, ")))
    return out


# ---------------------------------------------------------------------------------------------- component specs


@functools.cache
def _options_model(config: type[ComponentConfig]) -> type[BaseModel]:
    """A model with ``config``'s fields (types, bounds, defaults) and none of its validators."""
    fields: dict[str, Any] = {name: (f.annotation, copy.copy(f)) for name, f in config.model_fields.items()}
    return create_model(
        f"{config.__name__}Options", __config__=ConfigDict(extra="forbid", allow_inf_nan=False), **fields
    )


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
        try:
            stand_in = _stand_in(component.config, spec, exc)
        except BaseException as inner:  # noqa: BLE001 - a plugin's field types; the error is already reported
            _interrupt(inner)
            stand_in = None
        if stand_in is not None:
            stand_in = _validate_nested(registry, stand_in, path, errors)
        return None, stand_in
    except BaseException as exc:  # noqa: BLE001 - a plugin's validator raised something pydantic does not catch
        _interrupt(exc)
        errors.append(
            (path, f"{kind} '{name}' (plugin '{component.plugin}'): validating its options raised {raised(exc)}")
        )
        return None, None
    return _validate_nested(registry, config, path, errors), None


def _validate_nested(registry: Registry, config: ComponentConfig, path: str, errors: Errors) -> ComponentConfig:
    """``config`` with each nested spec replaced by its validated config (an invalid one stays as written, its
    errors collected)."""
    typed = {}
    for field, nested_kind in spec_fields(type(config)).items():
        nested = getattr(config, field)
        if nested is not None and not isinstance(nested, ComponentConfig):
            validated = validate_spec(registry, nested_kind, nested, f"{path}.{field}", errors)
            if validated is not None:
                typed[field] = validated
    return config.model_copy(update=typed) if typed else config


def validate_spec(registry: Registry, kind: str, spec: Any, path: str, errors: Errors) -> ComponentConfig | None:
    """Validate one ``{type: NAME, ...}`` spec against the config NAME registered, its nested specs replaced by
    their configs; collect errors."""
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


def _dedupe(errors: Errors) -> Errors:
    seen, out = set(), []
    for e in errors:
        if e not in seen:
            seen.add(e)
            out.append(e)
    return out


def _attempt(rule: Callable[..., Any], *args: Any, who: str = "") -> list[Any]:
    """What ``rule(*args)`` finds, or nothing when it reads a part that failed validation.

    ``rule`` may be a plugin's code: whatever else it raises is reported as what ``who`` raised.
    """
    try:
        return list(rule(*args))
    except FailedInput:
        return []
    except BaseException as exc:  # noqa: BLE001 - a plugin's check() is not allowed to take zoo down
        _interrupt(exc)
        name = getattr(rule, "__name__", "a rule")
        return [f"{who + ': ' if who else ''}{name}() raised {raised(exc)}"]


# ---------------------------------------------------------------------------------------------- rules


def check_rules(recipe: Recipe, registry: Registry) -> Errors:
    """Rules that span components: each component's ``check(ctx)`` where it sits, causality, lengths.

    A rule that reads a part whose spec failed validation is skipped; so is the positional encoding's check
    when the first layer's attention has errors of its own (the head_dim it would check does not exist).
    """
    errors: Errors = []
    component = registry.get("architecture", recipe.architecture)
    try:
        arch = component.config()
        errors.extend(arch.check_recipe(recipe))
    except FailedInput:
        return errors  # the rules below may rest on what the architecture would have refused
    except BaseException as exc:  # noqa: BLE001 - a plugin architecture's own rules
        _interrupt(exc)
        who = f"architecture '{recipe.architecture}' (plugin '{component.plugin}')"
        return [("architecture", f"{who}: check_recipe() raised {raised(exc)}")]
    if errors:
        return errors
    errors.extend(_check_overrides(recipe, arch))
    if recipe.pad_token_id is not None and recipe.vocab_size is not None and recipe.pad_token_id >= recipe.vocab_size:
        errors.append(
            ("pad_token_id", f"must be < vocab_size ({recipe.vocab_size}): it is a token id; got {recipe.pad_token_id}")
        )
    cross_stacks = set(getattr(arch, "cross_stacks", ()))
    experts = 0
    for stack, causal in arch.stacks:
        layer_errors, ctx, stack_experts = _check_layers(recipe, registry, stack, causal, stack in cross_stacks)
        experts += stack_experts
        if ctx is not None:
            who = _owner(registry, "positional", recipe.positional)
            errors.extend(("positional", m) for m in _attempt(recipe.positional.check, ctx, who=who))
        if recipe.positional.requires_causal and not causal:
            errors.append(("positional", f"{recipe.positional.type} needs a causal stack; the {stack} is not causal"))
        errors.extend(layer_errors)
    if experts > MAX_MODEL_EXPERTS:
        errors.append(
            ("ffn", f"the model has {experts:,} routed experts over its layers; at most {MAX_MODEL_EXPERTS:,}")
        )
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
        for kind in ("embedding", "head"):
            config = getattr(recipe, kind)
            errors.extend((kind, m) for m in _attempt(config.check, head_ctx, who=_owner(registry, kind, config)))
    return _dedupe(errors)


def _check_overrides(recipe: Recipe, arch: Any) -> Errors:
    """Each ``layers:`` entry names a stack the architecture has and selects at least one of its layers."""
    names = [name for name, _ in arch.stacks]
    errors: Errors = []
    for j, override in enumerate(recipe.layers):
        if override.stack != "all" and override.stack not in names:
            errors.append(
                (
                    f"layers.{j}.stack",
                    f"architecture '{recipe.architecture}' has no {override.stack} stack; "
                    f"its stacks: {', '.join(names) or 'none'}",
                )
            )
            continue
        targets = names if override.stack == "all" else [override.stack]
        if not any(len(layer_selection(override.select, recipe.stack_layers(s))) for s in targets):
            sizes = ", ".join(
                f"the {s} has {recipe.stack_layers(s)} (0 to {recipe.stack_layers(s) - 1})" for s in targets
            )
            errors.append((f"layers.{j}.select", f"{short_repr(override.select)} selects no layer: {sizes}"))
    return errors


STYLE_WORDS = {
    "embed": "adds position vectors to the input",
    "rotate": "rotates queries and keys",
    "bias": "adds a score bias",
    "none": "adds nothing",
}


def _type_name(config: Any) -> str:
    field = getattr(type(config), "model_fields", {}).get("type")
    return str(field.default) if field is not None else "?"


def _sized_by(registry: Registry, positional: Any) -> tuple[str, ...]:
    """The facts of an attention (``num_heads``, ``head_dim``) that the positional module takes from the stack's
    first block (the factory names them and the config does not set them): every block must agree on them."""
    try:
        component = registry.get("positional", _type_name(positional))
    except UnknownComponentError:
        return ()
    own = set(type(positional).model_fields)
    return tuple(
        f for f in ("num_heads", "head_dim") if ("**" in component.accepts or f in component.accepts) and f not in own
    )


def _experts(config: Any) -> int:
    try:
        n = getattr(config, "num_experts", 0)
    except FailedInput:
        return 0
    return n if isinstance(n, int) else 0


def _check_layers(
    recipe: Recipe, registry: Registry, stack: str, causal: bool, cross: bool = False
) -> tuple[Errors, BuildContext | None, int]:
    """The errors of every block of ``stack``, the context of its first block for the positional check (None when
    that block's attention failed or has errors of its own: its heads are not what they say), and the routed
    experts of its FFNs.

    Per block after overrides: each component's ``check(ctx)`` (an attention also as the cross-attention of a
    ``cross`` stack), causality, the positional style each attention takes, and the heads the stack's one
    positional module is sized by (those of block 0)."""
    errors: Errors = []
    first = base = None
    positional = recipe.positional
    style = getattr(type(positional), "style", None)
    sized_by = _sized_by(registry, positional)
    experts = 0
    for i, placed in enumerate(recipe.layer_plan(stack)):
        parts = {kind: config for kind, (config, _) in placed.items()}
        attention_path = placed["attention"][1]
        try:
            ctx: BuildContext | None = recipe.context(
                layer_idx=i, causal=causal, stack=stack, attention=parts["attention"]
            )
        except FailedInput:
            ctx = None  # this block's heads come from an attention that failed
        except BaseException as exc:  # noqa: BLE001 - a plugin attention's head_dim_for or num_heads
            _interrupt(exc)
            ctx = None
            who = _owner(registry, "attention", parts["attention"])
            errors.append((attention_path, f"{who}: reading its heads raised {raised(exc)}"))
        heads_ok = ctx is not None
        for kind, (config, path) in placed.items():
            who = _owner(registry, kind, config)
            found = [] if ctx is None else _attempt(config.check, ctx, who=who)
            if kind == "attention" and cross and ctx is not None:
                if not getattr(type(config), "supports_cross", True):
                    found.append(
                        f"attention '{_type_name(config)}' cannot be cross-attention, and the {stack} of "
                        f"'{recipe.architecture}' builds its cross-attention from each block's attention"
                    )
                else:
                    cross_ctx = replace(ctx, causal=False, cross=True)
                    found += [m for m in _attempt(config.check, cross_ctx, who=who) if m not in found]
            errors.extend((path, m) for m in found)
            heads_ok = heads_ok and not (kind == "attention" and found)
            if config.requires_causal and not causal:
                errors.append(
                    (
                        path,
                        f"{kind} '{_type_name(config)}' needs a causal (decoder) stack; the {stack} is not causal",
                    )
                )
            if kind == "attention" and style is not None:
                styles = getattr(type(config), "positional_styles", POSITIONAL_STYLES)
                if style not in styles:
                    errors.append(
                        (
                            path,
                            f"attention '{_type_name(config)}' cannot take positional '{_type_name(positional)}', "
                            f"which {STYLE_WORDS.get(style, style)}; it takes {', '.join(sorted(styles))} encodings",
                        )
                    )
            if kind == "ffn":
                experts += _experts(config)
        if i == 0:
            first = base = ctx if heads_ok else None
        elif heads_ok and base is not None:
            for fact in sized_by:
                mine, theirs = getattr(ctx, fact), getattr(base, fact)
                if mine != theirs:
                    errors.append(
                        (
                            attention_path,
                            f"{fact} {mine} differs from block 0's {theirs}: the {stack}'s one "
                            f"'{_type_name(positional)}' positional encoding serves every block and is sized for "
                            f"block 0; give every block's attention the same {fact}",
                        )
                    )
    return errors, first, experts
