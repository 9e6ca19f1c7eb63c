"""The rules that span components, checked once every part of a recipe validated on its own: the architecture's
``check_recipe``, each ``layers:`` override, each component's ``check(ctx)`` where it sits in each block,
causality, the positional style each attention takes, lengths and the model's routed experts. A rule that
reads a part that failed validation is skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from zoo.config import POSITIONAL_STYLES, BuildContext
from zoo.errors import UnknownComponentError
from zoo.limits import MAX_MODEL_EXPERTS
from zoo.registry import Registry

from .report import Errors, _dedupe, _interrupt, _owner, raised, short_repr
from .schema import Recipe, layer_selection, positions_fit
from .specs import FailedInput


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
