"""The rules that span components, checked in the same pass as each part's own validation: the architecture's
``check_recipe``, each ``layers:`` override, each component's ``check(ctx)`` where it sits in each block,
causality, the positional style each attention takes, lengths and the model's routed experts. They run over
whatever validated: a rule that reads a part that failed validation is skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from zoo.config import POSITIONAL_STYLES, BuildContext
from zoo.errors import UnknownComponentError
from zoo.limits import MAX_MODEL_EXPERTS
from zoo.registry import Registry

from .partial import FailedInput, FailedValue
from .report import Errors, _dedupe, _interrupt, _owner, raised, short_repr
from .schema import COMPONENT_FIELDS, Recipe, layer_selection, positions_fit
from .specs import FailedSpec


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
    """Rules that span components: the architecture's ``check_recipe``, each component's ``check(ctx)`` where it
    sits, causality, lengths, token ids.

    ``recipe`` may hold a ``FailedValue`` (or a ``FailedSpec``) where a field failed validation: a rule that reads
    one is skipped, every other rule runs. So does a rule that reads a field the architecture refused: its
    error is the cause, the rule's would be a knock-on. The positional encoding's check is skipped when the
    first layer's attention has errors of its own (the head_dim it would check does not exist).
    """
    component = registry.get("architecture", recipe.architecture)
    try:
        arch = component.config()
        errors: Errors = list(arch.check_recipe(recipe))
    except FailedInput:
        errors = []  # it read a field that failed: the rules below still run on what validated
    except BaseException as exc:  # noqa: BLE001 - a plugin architecture's own rules
        _interrupt(exc)
        who = f"architecture '{recipe.architecture}' (plugin '{component.plugin}')"
        return [("architecture", f"{who}: check_recipe() raised {raised(exc)}")]
    recipe = _failing(recipe, {path.partition(".")[0] for path, _ in errors})
    for rule in (_check_overrides, _check_token_ids, _check_stacks, _check_seq_len, _check_ends, _check_sharing):
        try:
            errors.extend(rule(recipe, registry, arch))
        except FailedInput:
            continue  # the rule read a field that failed validation (that failure is reported)
    return _dedupe(errors)


def _failing(recipe: Recipe, fields: set[str]) -> Recipe:
    """``recipe`` with each of ``fields`` (those the architecture refused) failed: a ``FailedSpec`` for a
    component, else a ``FailedValue``."""
    fields &= set(Recipe.model_fields)
    if not fields:
        return recipe
    copy = recipe.model_copy()
    for name in fields:
        copy.__dict__[name] = FailedSpec() if name in (*COMPONENT_FIELDS, "encoder_embedding") else FailedValue(name)
    return copy


def _check_token_ids(recipe: Recipe, registry: Registry, arch: Any) -> Errors:
    if recipe.pad_token_id is not None and recipe.vocab_size is not None and recipe.pad_token_id >= recipe.vocab_size:
        return [
            ("pad_token_id", f"must be < vocab_size ({recipe.vocab_size}): it is a token id; got {recipe.pad_token_id}")
        ]
    return []


def _stacks(arch: Any, recipe: Recipe) -> list[tuple[str, bool]]:
    """(stack, causal) of each stack of the recipe's model: the architecture's, or what its ``stacks_of`` says of
    this recipe (a dual-encoder's text tower is causal where its head says so)."""
    stacks_of = getattr(arch, "stacks_of", None)
    return stacks_of(recipe) if callable(stacks_of) else arch.stacks


def _check_stacks(recipe: Recipe, registry: Registry, arch: Any) -> Errors:
    """Every block of every stack (``_check_layers``), the positional encoding where it serves, and the routed
    experts of the model."""
    errors: Errors = []
    cross_stacks = set(getattr(arch, "cross_stacks", ()))
    experts: int | None = 0
    for stack, causal in _stacks(arch, recipe):
        try:
            layer_errors, ctx, stack_experts = _check_layers(recipe, registry, stack, causal, stack in cross_stacks)
        except FailedInput:  # the blocks of this stack rest on a field that failed (num_layers, layers)
            layer_errors, ctx, stack_experts = [], None, None
        experts = None if experts is None or stack_experts is None else experts + stack_experts
        if ctx is not None:
            who = _owner(registry, "positional", recipe.positional)
            errors.extend(("positional", m) for m in _attempt(recipe.positional.check, ctx, who=who))
        if recipe.positional.requires_causal and not causal:
            errors.append(("positional", f"{recipe.positional.type} needs a causal stack; the {stack} is not causal"))
        errors.extend(layer_errors)
    if experts is not None and experts > MAX_MODEL_EXPERTS:
        errors.append(
            ("ffn", f"the model has {experts:,} routed experts over its layers; at most {MAX_MODEL_EXPERTS:,}")
        )
    return errors


def _check_sharing(recipe: Recipe, registry: Registry, arch: Any) -> Errors:
    """``layer_groups``: every stack's layers fall into that many groups of equal size, and the layers of a group
    are alike (one set of weights serves them all)."""
    groups = recipe.layer_groups
    if groups is None:
        return []
    for stack, _ in arch.stacks:
        n = recipe.stack_layers(stack)
        if n % groups:
            return [
                ("layer_groups", f"{groups} groups cannot split the {stack}'s {n} layers evenly: use a divisor of {n}")
            ]
        plan = recipe.layer_plan(stack)
        for i, placed in enumerate(plan):
            owner = recipe.weights_of(stack, i)
            same = placed == plan[owner] and recipe.block.arguments(i) == recipe.block.arguments(owner)
            if not same:
                return [
                    (
                        "layer_groups",
                        f"layers {owner} and {i} of the {stack} share their weights (layer_groups: {groups}) but "
                        "differ (a layers: override, or block.first_attention_norm): make the layers of a group alike",
                    )
                ]
    return []


def _check_seq_len(recipe: Recipe, registry: Registry, arch: Any) -> Errors:
    seq_len = recipe.train.seq_len
    too_long = positions_fit(recipe, seq_len) if seq_len is not None and arch.token_input else None
    return [("train.seq_len", f"{too_long}: lower train.seq_len or raise max_len")] if too_long else []


def _check_ends(recipe: Recipe, registry: Registry, arch: Any) -> Errors:
    """The embeddings' and the head's ``check``, at the model's first block."""
    head_ctx = recipe.context()
    errors: Errors = []
    for field, kind in (("embedding", "embedding"), ("encoder_embedding", "embedding"), ("head", "head")):
        config = getattr(recipe, field)
        if config is not None:
            errors.extend((field, m) for m in _attempt(config.check, head_ctx, who=_owner(registry, kind, config)))
    return errors


def _check_overrides(recipe: Recipe, registry: Registry, arch: Any) -> Errors:
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
