"""What validated of a model whose validation failed, so that the rules reading only that still run.

pydantic stops short in two ways: a ``mode="before"`` validator that raises (``StrictNumbers`` refusing a boolean
for a number) hides every other field's errors, and the ``mode="after"`` validators (the rules between a model's
fields: ``num_heads`` divisible by ``num_kv_heads``) run only once every field validated. ``field_errors``
collects every field's errors in one pass; ``partial_model`` is the model with the fields that validated and a
``FailedValue`` in each that failed, its after-validators run over it: a rule that reads a failed field raises
``FailedInput`` and is skipped, every other rule reports in the same pass as the field errors.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic_core import ErrorDetails

from .report import Errors, _interrupt, _pydantic_errors, raised

M = TypeVar("M", bound=BaseModel)


class FailedInput(Exception):
    """A rule read a part of the recipe that failed validation: the rule is skipped (that failure is reported)."""


class FailedValue:
    """Holds the place of a field that failed validation: any use of it (arithmetic, comparison, truth, formatting,
    an attribute, iteration) raises ``FailedInput``, so the rule reading it is skipped. ``is None`` is False."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<failed {self.name}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise FailedInput(self.name)


def _refuse(self: FailedValue, *args: Any) -> Any:
    raise FailedInput(self.name)


for _name in (
    "__bool__ __int__ __index__ __float__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __hash__ __format__ __len__ "
    "__iter__ __contains__ __getitem__ __call__ __neg__ __pos__ __abs__ __add__ __radd__ __sub__ __rsub__ __mul__ "
    "__rmul__ __truediv__ __rtruediv__ __floordiv__ __rfloordiv__ __mod__ __rmod__ __pow__ __rpow__ __divmod__ "
    "__rdivmod__"
).split():
    setattr(FailedValue, _name, _refuse)


def is_failed(value: Any) -> bool:
    return isinstance(value, FailedValue)


def field_errors(model: type[M], data: Any) -> tuple[M | None, list[ErrorDetails]]:
    """``model`` validated from ``data``, or None and pydantic's errors of every field.

    A field refused by a before-validator (a boolean for a number) is left out and the rest validated again,
    so their errors come in the same pass.
    """
    try:
        return model.model_validate(data), []
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
    refused = {str(e["loc"][0]) for e in errors if e["type"] == "bool_for_number" and e["loc"]}
    if refused and isinstance(data, Mapping):
        _, rest = field_errors(model, {k: v for k, v in data.items() if k not in refused})
        errors += [e for e in rest if not (e["type"] == "missing" and e["loc"] and str(e["loc"][0]) in refused)]
    return None, errors


@functools.cache
def options_model(config: type[BaseModel]) -> type[BaseModel]:
    """A model with ``config``'s fields (types, bounds, defaults) and none of its validators."""
    fields: dict[str, Any] = {name: (f.annotation, copy.copy(f)) for name, f in config.model_fields.items()}
    return create_model(
        f"{config.__name__}Options", __config__=ConfigDict(extra="forbid", allow_inf_nan=False), **fields
    )


def failed_fields(errors: list[ErrorDetails]) -> set[str]:
    """The fields of the model that have errors (not the unknown keys, which are left out, nor the model's own)."""
    return {
        str(e["loc"][0]) for e in errors if e["loc"] and not (e["type"] == "extra_forbidden" and len(e["loc"]) == 1)
    }


def partial_model(model: type[M], data: Any, failed: set[str]) -> M | None:
    """``model`` with the fields of ``data`` that validated (defaults for those not given) and a ``FailedValue``
    in each ``failed`` one; None when ``data`` is not a mapping or the rest does not validate on its own."""
    if not isinstance(data, Mapping):
        return None
    known = model.model_fields
    rest = {k: v for k, v in data.items() if k in known and k not in failed}
    lenient = {k for k, f in known.items() if f.is_required() and k not in rest}  # failed required fields
    if lenient - failed:
        return None
    try:
        options = _lenient_model(options_model(model), frozenset(lenient)).model_validate(rest)
    except ValidationError:
        return None
    except BaseException as exc:  # noqa: BLE001 - a plugin's field types; the errors are already reported
        _interrupt(exc)
        return None
    values = {k: getattr(options, k) for k in known if k not in failed}
    instance = model.model_construct(_fields_set=set(rest), **values)
    for k in failed & set(known):
        instance.__dict__[k] = FailedValue(k)
    return instance


@functools.cache
def _lenient_model(options: type[BaseModel], optional: frozenset[str]) -> type[BaseModel]:
    """``options`` with the fields ``optional`` not required (they failed and are filled in afterwards)."""
    if not optional:
        return options
    fields: dict[str, Any] = {}
    for name, f in options.model_fields.items():
        f = copy.copy(f)
        if name in optional:
            f.default = None
        fields[name] = (Any if name in optional else f.annotation, f)
    return create_model(f"{options.__name__}Partial", __config__=ConfigDict(extra="forbid"), **fields)


def after_rules(instance: BaseModel, who: str = "") -> list[str]:
    """The messages of ``instance``'s ``mode="after"`` model validators, each run on its own; one that reads a
    ``FailedValue`` is skipped. What else a validator raises is reported as what ``who`` (its owner) raised."""
    found: list[str] = []
    for decorator in type(instance).__pydantic_decorators__.model_validators.values():
        if decorator.info.mode != "after":
            continue
        try:
            decorator.func(instance)
        except FailedInput:
            continue
        except ValueError as exc:
            found.append(str(exc))
        except AssertionError as exc:
            found.append(f"Assertion failed, {exc}")
        except BaseException as exc:  # noqa: BLE001 - a plugin's validator
            _interrupt(exc)
            name = getattr(decorator.func, "__name__", "a validator")
            found.append(f"{who + ': ' if who else ''}{name}() raised {raised(exc)}")
    return found


def validate_partially(model: type[M], data: Any, path: str, who: str = "") -> tuple[M | None, M | None, Errors]:
    """``(valid, partial, errors)``: ``model`` from ``data`` when it validates; else the ``partial_model`` (or
    None) and every error found, the fields' and those of the rules between them that read only valid fields."""
    valid, details = field_errors(model, data)
    if valid is not None:
        return valid, None, []
    errors = _pydantic_errors(details, path, model)
    partial = partial_model(model, data, failed_fields(details))
    if partial is not None:
        errors += [(path, m) for m in after_rules(partial, who)]
    return None, partial, errors
