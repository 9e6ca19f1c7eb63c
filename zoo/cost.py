"""What a component costs, declared by the component's own config: parameters, work, cache and activations.

Every component config may define ``cost(ctx) -> Cost``: the textbook formula of that component at the place
``ctx`` describes (``E`` = d_model, ``H`` query heads, ``Hkv`` key/value heads, ``D`` head_dim, ``V``
vocabulary). ``zoo summary`` sums the declarations over the components of the built module tree and sets
them beside the parameters the modules actually hold, so a formula that drifts from its module is caught
by the contract tests (``zoo.testing``). A plugin declares its cost the same way::

    class MyFFNConfig(ComponentConfig):
        type: Literal["my_ffn"] = "my_ffn"
        hidden: int

        def cost(self, ctx: BuildContext) -> Cost:
            return Cost(params=2 * ctx.d_model * self.hidden, matmul=2 * ctx.d_model * self.hidden)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .config import ComponentConfig, unvalidated

if TYPE_CHECKING:
    from .config import BuildContext

__all__ = ["Cost", "nested_cost"]


@dataclass(frozen=True)
class Cost:
    """The cost of one component. Figures are per token unless ``per_sequence``; elements, not bytes.

    ``active`` defaults to ``params``; it is smaller for routed components (MoE), where a token passes
    through ``top_k`` of ``num_experts`` experts.
    """

    params: int
    active: int | None = None
    matmul: int = 0
    """Weight elements multiplied per token in a forward pass: 2 FLOPs (multiply + add) each."""
    score_width: int = 0
    """H·D of an attention: scores (QK^T) and their use (AV) cost 2·2·L·H·D FLOPs per token at length L."""
    kv_width: int = 0
    """Hkv·D of an attention: the keys (and as many values) a KV cache stores per token."""
    cache_width: int | None = None
    """Elements per token the decoding cache stores where that is not ``2 · kv_width`` (keys and values):
    multi-head latent attention caches its kv latent and one rotary key, ``kv_lora_rank + qk_rope_head_dim``."""
    window: int | None = None
    """An attention whose queries see at most this many keys (sliding window): caps the L term and the cache."""
    state: int = 0
    """Elements of a fixed-size decoding state per sequence (a recurrent mixer), whatever its length."""
    acts: int = 0
    """Activation elements per token this component keeps for the backward pass."""
    per_sequence: bool = False
    """The component runs once per sequence (a classifier on the CLS vector), not once per token."""

    @property
    def cached_per_token(self) -> int:
        """Elements per token the decoding cache of this component stores."""
        return 2 * self.kv_width if self.cache_width is None else self.cache_width

    @property
    def active_params(self) -> int:
        return self.params if self.active is None else self.active

    def with_(self, **changes: Any) -> Cost:
        """A copy with ``changes`` (``cost.with_(window=4096)``)."""
        return replace(self, **changes)


def nested_cost(kind: str, spec: Any, ctx: BuildContext) -> Cost | None:
    """The declared cost of a nested component (an MoE's ``expert``, of ``kind``) at ``ctx``; None if it declares
    none. ``spec`` is the validated config that a recipe's validation put in the nested field
    (``zoo.config.nested_config`` says how to get one otherwise)."""
    if not isinstance(spec, ComponentConfig):
        raise ValueError(unvalidated(f"the nested {kind}", spec))
    return spec.cost(ctx)
