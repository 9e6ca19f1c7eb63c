"""Validating component specs: each ``{type: NAME, ...}`` against the config its component registered, nested
specs included, and what stands in for a spec that failed (``FailedSpec``, or ``partial.partial_model``: the
options that validated, a ``FailedValue`` in each that failed) so that the rules not reading it still run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zoo.config import BuildContext, ComponentConfig, spec_fields
from zoo.errors import UnknownComponentError
from zoo.plugins import explain_unknown
from zoo.registry import Registry

from .partial import FailedInput, FailedValue, validate_partially
from .report import Errors, _interrupt, raised

__all__ = ["FailedInput", "FailedSpec", "validate_spec"]


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


def _validate_spec(
    registry: Registry, kind: str, spec: Any, path: str, errors: Errors
) -> tuple[ComponentConfig | None, ComponentConfig | None]:
    """``(config, None)`` for a valid spec; else ``(None, stand_in)`` (see ``partial``), errors collected."""
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
        config, stand_in, found = validate_partially(
            component.config, dict(spec), path, who=f"{kind} '{name}' (plugin '{component.plugin}')"
        )
    except BaseException as exc:  # noqa: BLE001 - a plugin's validator raised something pydantic does not catch
        _interrupt(exc)
        errors.append(
            (path, f"{kind} '{name}' (plugin '{component.plugin}'): validating its options raised {raised(exc)}")
        )
        return None, None
    if config is None:
        errors.extend(found)
        return None, None if stand_in is None else _validate_nested(registry, stand_in, path, errors)
    return _validate_nested(registry, config, path, errors), None


def _validate_nested(registry: Registry, config: ComponentConfig, path: str, errors: Errors) -> ComponentConfig:
    """``config`` with each nested spec replaced by its validated config (an invalid one stays as written, its
    errors collected)."""
    typed = {}
    for field, nested_kind in spec_fields(type(config)).items():
        nested = getattr(config, field)
        if nested is not None and not isinstance(nested, (ComponentConfig, FailedValue)):
            validated = validate_spec(registry, nested_kind, nested, f"{path}.{field}", errors)
            if validated is not None:
                typed[field] = validated
    return config.model_copy(update=typed) if typed else config


def validate_spec(registry: Registry, kind: str, spec: Any, path: str, errors: Errors) -> ComponentConfig | None:
    """Validate one ``{type: NAME, ...}`` spec against the config NAME registered, its nested specs replaced by
    their configs; collect errors."""
    return _validate_spec(registry, kind, spec, path, errors)[0]
