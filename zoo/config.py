"""Base classes of component configs and the build context that the builder hands to factories.

A component config is a pydantic model with ``type: Literal["name"] = "name"`` and forbidden extra keys.
Its fields become the keyword arguments of the component's factory. A field annotated
``Annotated[Nested | None, Spec("ffn")]`` holds a nested component spec (``{type: swiglu, hidden: 1024}``): a
recipe's validation replaces it with the config object of the component it names (``zoo.recipe.validate_spec``),
so what reads a validated recipe never looks a spec up again, and the factory receives a callable that builds
it: ``build()`` at the component's own width, ``build(width)`` at another (a norm over one head's ``head_dim``).

A config owns everything said about its component: its fields (the recipe keys), ``check(ctx)`` (the rules
that need the model around it), ``cost(ctx)`` (its parameters, work, cache and activations, see
``zoo.cost``), ``label(...)`` (what its box in ``zoo draw`` says, see ``zoo.label``), ``arguments()`` (how
fields become the factory's keywords) and ``examples`` (the options the contract tests of ``zoo.testing`` build
it with).
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, SerializeAsAny, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from .label import default_label

if TYPE_CHECKING:
    from .cost import Cost
    from .label import Label


POSITIONAL_STYLES: frozenset[str] = frozenset({"none", "embed", "rotate", "bias"})
"""How a positional encoding reaches the model (``PositionalConfig.style``): not at all, added to the input
(``embed``), rotating queries and keys (``rotate``) or as a score bias (``bias``)."""


def _members(annotation: Any) -> tuple[Any, ...]:
    """The types a field annotation admits: the members of a union, ``Annotated`` and ``Optional`` unwrapped."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return tuple(m for arg in typing.get_args(annotation) for m in _members(arg))
    return (annotation,)


def _takes_bool(member: Any) -> bool:
    if member in (bool, Any, object):
        return True
    if typing.get_origin(member) is typing.Literal:
        return any(isinstance(v, bool) for v in typing.get_args(member))
    return isinstance(member, typing.TypeVar)


def _numbers_only(members: tuple[Any, ...]) -> bool:
    """True when a bool given for these types would be read as a number (pydantic turns ``True`` into 1)."""
    return any(m in (int, float) for m in members) and not any(_takes_bool(m) for m in members)


@functools.cache
def _bool_refusal(model: type[BaseModel], field: str) -> tuple[bool, bool]:
    """Whether ``field`` of ``model`` must refuse a boolean (as itself, as an item of a list or tuple)."""
    info = model.model_fields.get(field)
    if info is None:
        return False, False
    members = _members(info.annotation)
    sequences = [m for m in members if typing.get_origin(m) in (list, tuple, set, frozenset)]
    items = tuple(a for m in sequences for a in typing.get_args(m) if a is not Ellipsis)
    return _numbers_only(members), bool(items) and _numbers_only(items)


class StrictNumbers(BaseModel):
    """Base of zoo's models of recipe data: every float finite, and no boolean read as a number.

    pydantic would take ``inf`` / ``nan`` for any float (a learning rate, an epsilon) and read ``true`` as
    ``1`` for an int (``num_layers: true``); both are refused here, for every field of every subclass (a
    plugin's config included), with the field's path.
    """

    model_config = ConfigDict(allow_inf_nan=False, defer_build=True)  # schemas built at first use: 0.15 s less at start

    @model_validator(mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, data: Any) -> Any:
        # A model validator, not a field one: a field validator on ``type`` would break the discriminated
        # unions of the JSON Schema. The errors keep the field's path all the same.
        if not isinstance(data, Mapping):
            return data
        found = []
        for name, value in data.items():
            if not isinstance(name, str) or name not in cls.model_fields:
                continue
            scalar, items = _bool_refusal(cls, name)
            if scalar and isinstance(value, bool):
                found.append((name, value, "Input should be a number, not a boolean"))
            elif items and isinstance(value, (list, tuple)) and any(isinstance(v, bool) for v in value):
                found.append((name, value, "Input should hold numbers, not booleans"))
        if found:
            raise ValidationError.from_exception_data(
                cls.__name__,
                [
                    InitErrorDetails(type=PydanticCustomError("bool_for_number", message), loc=(name,), input=value)
                    for name, value, message in found
                ],
            )
        return data


class ComponentConfig(StrictNumbers):
    """Base of every component config: strict keys, finite floats, immutable once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    requires_causal: ClassVar[bool] = False
    """True for components that only work in a causal (decoder) stack."""

    supports_cross: ClassVar[bool] = True
    """An attention: False when it cannot serve as cross-attention (an encoder-decoder's decoder builds one
    cross-attention per block from the block's attention config)."""

    positional_styles: ClassVar[frozenset[str]] = POSITIONAL_STYLES
    """An attention: the styles of positional encoding (``POSITIONAL_STYLES``) it applies; a recipe pairing it
    with an encoding of another style (retention with ``alibi``'s score bias) is refused."""

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({},)
    """Options (besides ``type``) that ``zoo.testing`` builds this component with, each a contract case.
    A config with required fields must list values for them; add one per option that changes ``forward``."""

    def check(self, ctx: BuildContext) -> list[str]:
        """Rules that need the model around the component (``d_model``, heads, ...): messages, or []."""
        return []

    def cost(self, ctx: BuildContext) -> Cost | None:
        """What the component costs at ``ctx`` (see ``zoo.cost``); None: not declared (summaries say so)."""
        return None

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label | None:
        """What this component's box in ``zoo draw`` says (see ``zoo.label``); None: no box of its own.

        ``kind`` is the kind it was built as, ``module`` the component as built at ``ctx`` (on the meta device)
        and ``note`` what the stack's positional encoding says inside a self-attention. The default draws it by
        its kind, its name and the options its recipe sets (``zoo.label.default_label``); override it to say
        more, as ``cost`` is overridden. A head's label names what comes out of it in ``Label.output``
        (``next-token logits``, ``2 class logits``), the words under the figure's last box; without them the
        figure ends at the head's box.
        """
        return default_label(self, kind, ctx, module, note=note)

    def arguments(self) -> dict[str, Any]:
        """The factory's keyword arguments: every field but ``type``. Override to translate a field."""
        return {name: getattr(self, name) for name in type(self).model_fields if name != "type"}


@dataclass(frozen=True)
class Spec:
    """Marks a config field as a nested component spec of ``kind``: ``Annotated[dict, Spec("ffn")]``."""

    kind: str


@dataclass(frozen=True)
class BuildContext:
    """What the model decides about a component, passed as keywords the factory asks for by name.

    The first positional argument of every factory is ``d_model``; the rest of these are passed only when
    the factory's signature names them, and never override a value that the component's config gives.
    """

    d_model: int
    max_len: int = 0
    causal: bool = False
    cross: bool = False
    layer_idx: int = 0
    num_layers: int = 1
    num_heads: int = 1
    head_dim: int = 0
    vocab_size: int = 0
    num_classes: int = 0
    type_vocab_size: int = 0
    image_size: int = 0
    patch_size: int = 0
    num_channels: int = 3
    pad_token_id: int | None = None
    init_std: float = 0.02
    """Std of the recipe's normal init, for components whose ``reset_parameters`` follows it."""
    positional: str | None = None
    """The type of the stack's positional encoding (``rope``) where known, for ``check``; never a factory
    argument."""

    def as_kwargs(self, names: frozenset[str]) -> dict[str, Any]:
        fields = [k for k in self.__dataclass_fields__ if k not in ("d_model", "positional")]
        if "**" in names:
            return {k: getattr(self, k) for k in fields}
        return {k: getattr(self, k) for k in names if k in fields}


def spec_fields(config: type[BaseModel]) -> dict[str, str]:
    """``{field_name: kind}`` for the fields of ``config`` that hold nested component specs."""
    out = {}
    for name, f in config.model_fields.items():
        for meta in f.metadata:
            if isinstance(meta, Spec):
                out[name] = meta.kind
    return out


Nested = SerializeAsAny[ComponentConfig] | dict[str, Any] | str
"""The type of a nested spec field (with ``Spec(kind)``): as written (a mapping or a bare type name) until the
recipe is validated, the component's validated config after (dumped with all of its fields)."""


def nested_config(config: ComponentConfig, field: str) -> ComponentConfig | None:
    """The validated config in ``config``'s nested spec ``field`` (None when the field is unset).

    Raises:
        ValueError: the spec is still as written: ``config`` was made directly, not by validating a recipe or
            a spec (``zoo.recipe.validate_spec``), which is where nested specs are looked up.
    """
    value = getattr(config, field)
    if value is None or isinstance(value, ComponentConfig):
        return value
    raise ValueError(unvalidated(f"{type(config).__name__}.{field}", value))


def unvalidated(where: str, spec: Any) -> str:
    """Why a nested spec found as written cannot be used, and how to get its config."""
    return (
        f"{where} is the unvalidated spec {spec!r}: validate the component's spec with zoo.recipe.validate_spec "
        "(or load a recipe), which turns nested specs into configs"
    )
