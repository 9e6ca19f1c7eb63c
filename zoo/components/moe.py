"""Sparse mixture-of-experts FFN: a router sends each token to its top_k experts (Switch, Mixtral).

::

    tokens (T, E) ─► router ─► softmax ─► top_k, renormalised ─► weights (T, k), indices (T, k)
    each expert e:   its rows (T_e, E) ─► expert e ─► × their weights ─► added back at their rows
    shared_expert:   every row ─► shared_expert ─► added unweighted (optional)

The experts are ordinary FFN modules (anything mapping ``(N, L, E) -> (N, L, E)`` position-wise), so an
MoE is usable without zoo: ``MoE(64, num_experts=4, top_k=2, expert=lambda: GatedMLP(64, hidden=128))``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal

import torch
import torch.nn as nn
import torch.nn.functional as F
from pydantic import Field, model_validator

from zoo.config import BuildContext, ComponentConfig, Spec
from zoo.cost import Cost, nested_cost
from zoo.hookspecs import hookimpl
from zoo.recipe.limits import MAX_EXPERTS


def check_top_k(top_k: int, num_experts: int) -> None:
    """Raise ``ValueError`` unless each token can pick ``top_k`` distinct experts."""
    if top_k > num_experts:
        raise ValueError(f"top_k ({top_k}) must be <= num_experts ({num_experts})")


def _build_expert(
    expert: Callable[[], nn.Module], device: torch.device | str | None, dtype: torch.dtype | None
) -> nn.Module:
    if isinstance(expert, nn.Module):
        raise TypeError(
            "expert must be a zero-argument callable that builds a fresh module "
            "(e.g. `lambda: GatedMLP(64)`), not a module: each expert needs its own weights"
        )
    # Building under the target device puts parameters straight where they belong (the meta device
    # included) instead of allocating them on the default device and moving them afterwards.
    with torch.device(device) if device is not None else contextlib.nullcontext():
        module = expert()
    return module if dtype is None else module.to(dtype=dtype)


class MoE(nn.Module):
    """Mixture of experts: each token goes to its top_k experts, weighted by the router.

    Each expert runs only on the tokens routed to it (grouped dispatch), so the compute per token is
    ``top_k`` experts whatever ``num_experts`` is. The dispatch has no ``.item()`` and no Python branch on
    data, and compiles with ``torch.compile(fullgraph=True)``: the number of tokens per expert is a
    data-dependent size that the compiler traces symbolically.

    Every forward stores ``self.aux_loss``, the load-balancing loss of Switch Transformer,
    ``aux_loss_coef * num_experts * Σ_e f_e * P_e``, where ``f_e`` is the fraction of (token, slot)
    assignments that went to expert ``e`` and ``P_e`` the mean router probability of ``e``. It equals
    ``aux_loss_coef`` when routing is perfectly balanced. (Hugging Face's Mixtral loss counts assignments
    per token instead of per slot, so its value is ``top_k`` times this one.)

    Args:
        d_model: width E of the input and output.
        num_experts: number of routed experts X.
        top_k: experts per token k.
        expert: zero-argument callable returning a fresh expert module; called ``num_experts`` times.
        shared_expert: zero-argument callable returning an expert that every token goes through, its
            output added unweighted (DeepSeekMoE, Qwen-MoE); ``None`` for none.
        aux_loss_coef: coefficient of the load-balancing loss.
        device: device of the parameters (experts are built under it).
        dtype: dtype of the parameters (experts are cast to it).

    Raises:
        ValueError: ``top_k`` is larger than ``num_experts``.
        TypeError: ``expert`` is a module rather than a callable that builds one.
    """

    def __init__(
        self,
        d_model: int,
        *,
        num_experts: int,
        top_k: int,
        expert: Callable[[], nn.Module],
        shared_expert: Callable[[], nn.Module] | None = None,
        aux_loss_coef: float = 0.01,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        check_top_k(top_k, num_experts)
        self.num_experts = num_experts
        self.top_k = top_k
        self.aux_loss_coef = aux_loss_coef
        self.router = nn.Linear(d_model, num_experts, bias=False, device=device, dtype=dtype)
        self.experts = nn.ModuleList(_build_expert(expert, device, dtype) for _ in range(num_experts))
        # A shared expert is a whole FFN whose output is added, so nn.Identity (which would add x) cannot
        # stand for "none", and a zero-returning module would waste a pass. None keeps it out of the
        # parameters; forward tests it on this constructor constant, which torch.compile resolves while
        # tracing (no graph break).
        self.shared_expert = _build_expert(shared_expert, device, dtype) if shared_expert is not None else None
        self.aux_loss: torch.Tensor = torch.zeros((), device=device)

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Route the tokens of ``x`` (..., E), flattened to T rows.

        Returns:
            weights (T, k) float32, summing to 1 per token; indices (T, k) of the chosen experts, most
            probable first; probs (T, X) float32, the router's softmax over all experts.
        """
        logits = self.router(x.reshape(-1, x.shape[-1]))  # (T, X)
        # float32 softmax as in Mixtral: bf16 probabilities are too coarse to rank and weight experts well.
        probs = logits.float().softmax(dim=-1)  # (T, X)
        weights, indices = probs.topk(self.top_k, dim=-1)  # (T, k), (T, k)
        # Renormalising the chosen probabilities equals a softmax over the chosen logits.
        weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights, indices, probs

    def load_balancing_loss(self, indices: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
        """``aux_loss_coef * X * Σ_e f_e * P_e`` from indices (T, k) and probs (T, X); a scalar."""
        f = F.one_hot(indices, self.num_experts).float().mean(dim=(0, 1))  # (X,) share of assignments
        p = probs.mean(dim=0)  # (X,) mean router probability; the only differentiable factor
        return self.aux_loss_coef * self.num_experts * (f * p).sum()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (N, L, E) -> (N, L, E). T = N * L tokens, X experts, k = top_k, T_e tokens sent to expert e."""
        tokens = x.reshape(-1, x.shape[-1])  # (T, E)
        weights, indices, probs = self.route(tokens)  # (T, k), (T, k), (T, X)
        weights = weights.to(x.dtype)
        out = torch.zeros_like(tokens)  # (T, E)
        for e, expert in enumerate(self.experts):
            # The (token, slot) pairs routed to e; their count is data-dependent, hence nonzero.
            token, slot = torch.nonzero(indices == e, as_tuple=True)  # (T_e,), (T_e,)
            y = expert(tokens[token].unsqueeze(0)).squeeze(0)  # (T_e, E): experts take (N, L, E)
            # A token picks an expert at most once, so `token` has no repeats and the add is deterministic.
            out.index_add_(0, token, y * weights[token, slot, None])
        out = out.view_as(x)  # (N, L, E)
        if self.shared_expert is not None:
            out = out + self.shared_expert(x)
        self.aux_loss = self.load_balancing_loss(indices, probs)
        return out


class MoEConfig(ComponentConfig):
    """Mixture of experts FFN."""

    type: Literal["moe"] = "moe"
    num_experts: int = Field(ge=1, le=MAX_EXPERTS, description="Number of routed experts.")
    top_k: int = Field(ge=1, le=MAX_EXPERTS, description="Experts each token is sent to.")
    expert: Annotated[dict[str, Any], Spec("ffn")] = Field(
        default_factory=lambda: {"type": "swiglu"}, description="FFN spec of every routed expert."
    )
    shared_expert: Annotated[dict[str, Any] | None, Spec("ffn")] = Field(
        None, description="FFN spec of an expert applied to every token; none by default."
    )
    aux_loss_coef: float = Field(0.01, ge=0.0, description="Coefficient of the load-balancing loss.")

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"num_experts": 4, "top_k": 2, "expert": {"type": "swiglu", "hidden": 16}},
        {"num_experts": 3, "top_k": 1, "expert": {"type": "mlp", "hidden": 8}, "shared_expert": {"type": "mlp"}},
    )

    @model_validator(mode="after")
    def _top_k_fits(self) -> MoEConfig:
        check_top_k(self.top_k, self.num_experts)
        return self

    def cost(self, ctx: BuildContext) -> Cost | None:
        E, X, K = ctx.d_model, self.num_experts, self.top_k
        expert = nested_cost("ffn", self.expert, ctx)
        shared = nested_cost("ffn", self.shared_expert, ctx) if self.shared_expert is not None else Cost(params=0)
        if expert is None or shared is None:
            return None
        router = E * X
        return Cost(
            params=router + X * expert.params + shared.params,
            active=router + K * expert.active_params + shared.active_params,
            matmul=router + K * expert.matmul + shared.matmul,
            acts=E + X + K * expert.acts + shared.acts,
        )


@hookimpl
def register_components(register):
    register("ffn", "moe", MoE, MoEConfig)
