"""Validating component specs: each ``{type: NAME, ...}`` against the config its component registered, nested
specs included, and what stands in for a spec that failed (``FailedSpec``, or its options without its
model-level rules) so that the rules not reading it still run.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from zoo.config import BuildContext, ComponentConfig, spec_fields
from zoo.errors import UnknownComponentError
from zoo.plugins import explain_unknown
from zoo.registry import Registry

from .report import Errors, _interrupt, _pydantic_errors, raised


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
