"""Base classes of component configs and the build context that the builder hands to factories.

A component config is a pydantic model with ``type: Literal["name"] = "name"`` and forbidden extra keys.
Its fields become the keyword arguments of the component's factory. A field annotated with
``Spec("ffn")`` holds a nested component spec (``{type: swiglu, hidden: 1024}``): it is validated
against that kind's registry and the factory receives a zero-argument callable that builds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict


class ComponentConfig(BaseModel):
    """Base of every component config: strict keys, immutable once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    requires_causal: ClassVar[bool] = False
    """True for components that only work in a causal (decoder) stack."""

    def check(self, ctx: BuildContext) -> list[str]:
        """Rules that need the model around the component (``d_model``, heads, ...): messages, or []."""
        return []


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
