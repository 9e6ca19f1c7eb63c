"""How validation reports a problem: the ``(path, message)`` pairs a ``RecipeError`` holds, values cut short to
quote them, pydantic's errors in a recipe's terms, what a plugin's code raised and whose code it was.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from zoo.errors import UnknownComponentError
from zoo.limits import MAX_INT_DIGITS
from zoo.registry import Registry, did_you_mean

Errors = list[tuple[str, str]]


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters; an integer too long to print (> 4,300 digits) by its size."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * MAX_INT_DIGITS:
        return f"an integer of about {int(value.bit_length() * 0.30103):,} digits"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails is still a value to report
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


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


def _pydantic_errors(
    exc: ValidationError | list[ErrorDetails], prefix: str, model: type[BaseModel] | None = None
) -> Errors:
    """pydantic's errors (of ``exc``, or as a list) in a recipe's terms, each at its path under ``prefix``."""
    out = []
    for err in exc.errors(include_url=False) if isinstance(exc, ValidationError) else exc:
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


def _dedupe(errors: Errors) -> Errors:
    seen, out = set(), []
    for e in errors:
        if e not in seen:
            seen.add(e)
            out.append(e)
    return out
