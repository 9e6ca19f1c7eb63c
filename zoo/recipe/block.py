"""The recipe's ``block:`` section: how a block arranges its sub-layers (``zoo.components.block`` builds it).

Plain data, no torch: the recipe validates it, the builder hands its ``arguments`` to ``make_block``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, model_validator

from zoo.config import StrictNumbers

__all__ = ["BlockConfig", "NormPosition"]

NormPosition = Literal["pre", "post", "sandwich", "output"]


class BlockConfig(StrictNumbers):
    """How a block arranges its sub-layers; the recipe's ``block:`` section."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    norm_position: NormPosition = Field(
        "pre",
        description="pre: x + f(n(x)); post: n(x + f(x)); sandwich: x + n'(f(n(x))); output: x + n(f(x)) (OLMo 2).",
    )

    parallel: bool = Field(False, description="Attention and FFN both read the block's input; outputs are added.")
    shared_norm: bool = Field(False, description="parallel: one norm feeds attention and FFN (GPT-J, Falcon).")
    first_attention_norm: bool = Field(
        True,
        description="The first block normalises its attention input; false: it reads the (normalised) embeddings "
        "as they are (ModernBERT).",
    )
    residual_multiplier: float = Field(
        1.0,
        gt=0,
        description="Multiply each sub-layer's output by this constant before it joins the residual stream "
        "(Granite's residual_multiplier: 0.22); default 1.0, no multiply.",
    )
    layer_scale: float | None = Field(
        None,
        gt=0,
        description="Layer scale (CaiT, DINOv2, BEiT): each sub-layer's output times a learned per-channel vector "
        "(d_model wide, one per sub-layer) initialised to this value, x + gamma * f(n(x)); default none, no scale.",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"norm_position": "post"},
        {"norm_position": "sandwich"},
        {"norm_position": "output"},
        {"parallel": True},
        {"parallel": True, "shared_norm": True},
        {"first_attention_norm": False, "norm_position": "pre"},
        {"residual_multiplier": 0.22},
        {"residual_multiplier": 0.5, "norm_position": "post"},
        {"residual_multiplier": 2.0, "parallel": True},
        {"layer_scale": 1.0e-5},
        {"layer_scale": 0.1, "norm_position": "post"},
    )
    """Layouts the contract tests of ``zoo.testing`` build a model with."""

    @model_validator(mode="after")
    def _parallel_is_pre_norm(self) -> BlockConfig:
        if self.parallel and self.norm_position != "pre":
            raise ValueError(
                f"a parallel block normalises its input (pre-norm), not norm_position {self.norm_position}"
            )
        if self.shared_norm and not self.parallel:
            raise ValueError("shared_norm needs parallel: true (a sequential block normalises each input anew)")
        if not self.first_attention_norm and (self.parallel or self.norm_position not in ("pre", "sandwich")):
            raise ValueError("first_attention_norm: false needs a sequential pre or sandwich block (the norm it drops)")
        if self.layer_scale is not None and self.parallel:
            raise ValueError(
                "layer_scale scales each sub-layer's output apart; a parallel block adds them at once: "
                "set parallel: false, or leave layer_scale out"
            )
        return self

    @property
    def pre_norm(self) -> bool:
        """The stream itself is never normalised inside the blocks, so the stack ends with a final norm."""
        return self.norm_position != "post"

    def arguments(self, layer_idx: int = 0) -> dict[str, Any]:
        """The keyword arguments of :class:`Block` that this config sets, for the block at ``layer_idx``."""
        out = self.model_dump()
        out["attention_norm"] = out.pop("first_attention_norm") or layer_idx > 0
        return out
