"""Base classes of component configs and the build context that the builder hands to factories.

A component config is a pydantic model with ``type: Literal["name"] = "name"`` and forbidden extra keys.
Its fields become the keyword arguments of the component's factory. A field annotated with
``Spec("ffn")`` holds a nested component spec (``{type: swiglu, hidden: 1024}``): it is validated
against that kind's registry and the factory receives a callable that builds it: ``build()`` at the
component's own width, ``build(width)`` at another (a norm over one head's ``head_dim``).

A config owns everything said about its component: its fields (the recipe keys), ``check(ctx)`` (the rules
that need the model around it), ``cost(ctx)`` (its parameters, work, cache and activations, see
``zoo.cost``), ``arguments()`` (how fields become the factory's keywords) and ``examples`` (the options
the contract tests of ``zoo.testing`` build it with).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from .cost import Cost


class ComponentConfig(BaseModel):
    """Base of every component config: strict keys, immutable once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    requires_causal: ClassVar[bool] = False
    """True for components that only work in a causal (decoder) stack."""

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({},)
    """Options (besides ``type``) that ``zoo.testing`` builds this component with, each a contract case.
    A config with required fields must list values for them; add one per option that changes ``forward``."""

    def check(self, ctx: BuildContext) -> list[str]:
        """Rules that need the model around the component (``d_model``, heads, ...): messages, or []."""
        return []

    def cost(self, ctx: BuildContext) -> Cost | None:
        """What the component costs at ``ctx`` (see ``zoo.cost``); None: not declared (summaries say so)."""
        return None

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

    def as_kwargs(self, names: frozenset[str]) -> dict[str, Any]:
        fields = self.__dataclass_fields__
        if "**" in names:
            return {k: getattr(self, k) for k in fields if k != "d_model"}
        return {k: getattr(self, k) for k in names if k in fields and k != "d_model"}


def spec_fields(config: type[BaseModel]) -> dict[str, str]:
    """``{field_name: kind}`` for the fields of ``config`` that hold nested component specs."""
    out = {}
    for name, f in config.model_fields.items():
        for meta in f.metadata:
            if isinstance(meta, Spec):
                out[name] = meta.kind
    return out
