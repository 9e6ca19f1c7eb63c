"""Sparse mixture-of-experts FFN: a router sends each token to its top_k experts (Switch, Mixtral, Qwen-MoE,
DeepSeek-V3).

::

    tokens (T, E) ─► router ─► softmax | sigmoid ─► scores (T, X)
    choosing:        scores (+ correction bias) ─► best topk_group of n_group groups ─► top_k ─► indices (T, k)
    weighting:       their scores (no bias) ─► renormalised (optional) ─► × routed_scaling_factor ─► weights (T, k)
    each expert e:   its rows (T_e, E) ─► expert e ─► × their weights ─► added back at their rows
    shared_expert:   every row ─► shared_expert ─► × sigmoid(shared_expert_gate) (optional) ─► added (optional)

The defaults are Mixtral's router (softmax, top_k renormalised, no groups, no bias, no scaling); Qwen2-MoE
keeps the top_k softmax probabilities as they are (``normalize: false``) and gates its shared expert;
DeepSeek-V3 scores with a sigmoid, chooses with a correction bias among the best groups, renormalises and
scales by 2.5.

The experts are ordinary FFN modules (anything mapping ``(N, L, E) -> (N, L, E)`` position-wise), so an
MoE is usable without zoo: ``MoE(64, num_experts=4, top_k=2, expert=lambda: GatedMLP(64, hidden=128))``.
Experts that are zoo's own MLP or gated FFN (``mlp``, ``swiglu``, ``geglu``, ...) are held stacked, one tensor
per projection for all experts (:class:`GroupedExperts`, the layout of transformers 5): a layer of 256 experts
is 2 to 4 parameters, not 768 modules, so DeepSeek-V3's 14,848 experts build on the meta device in a moment.
Any other expert module is built ``num_experts`` times into an ``nn.ModuleList``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Annotated, Any, ClassVar, Literal

import torch
import torch.nn as nn
import torch.nn.functional as F
from pydantic import Field, model_validator

from zoo.components.ffn import MLP, GatedMLP
from zoo.config import BuildContext, ComponentConfig, Spec
from zoo.cost import Cost, nested_cost
from zoo.hookspecs import hookimpl
from zoo.limits import MAX_EXPERTS


def check_top_k(top_k: int, num_experts: int) -> None:
    """Raise ``ValueError`` unless each token can pick ``top_k`` distinct experts."""
    if top_k > num_experts:
        raise ValueError(f"top_k ({top_k}) must be <= num_experts ({num_experts})")


def check_groups(num_experts: int, top_k: int, n_group: int, topk_group: int) -> None:
    """Raise ``ValueError`` unless group-limited routing can pick ``top_k`` experts from ``topk_group`` of
    ``n_group`` equal groups (each of at least two experts: a group scores by its two best)."""
    if n_group == 1 and topk_group == 1:
        return
    if num_experts % n_group:
        raise ValueError(f"num_experts ({num_experts}) must be divisible by n_group ({n_group})")
    if topk_group > n_group:
        raise ValueError(f"topk_group ({topk_group}) must be <= n_group ({n_group})")
    per_group = num_experts // n_group
    if per_group < 2:
        raise ValueError(
            f"n_group ({n_group}) leaves {per_group} expert per group; a group scores by its two best experts, "
            "so each needs at least 2 (use fewer groups)"
        )
    if top_k > topk_group * per_group:
        raise ValueError(
            f"top_k ({top_k}) must be <= the {topk_group * per_group} experts of topk_group ({topk_group}) groups "
            f"of {per_group}"
        )


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


class GroupedExperts(nn.Module):
    """``num_experts`` FFNs of one shape, each projection's weights stacked into one tensor.

    Gated experts (``down(act(gate(x)) * up(x))``) hold ``gate_up_proj`` (X, 2H, E), each expert's gate rows
    then its up rows, and ``down_proj`` (X, E, H); plain MLP experts (``down(act(up(x)))``) hold ``up_proj``
    (X, H, E) and ``down_proj`` (X, E, H). With biases: ``gate_up_bias`` (X, 2H) or ``up_bias`` (X, H), and
    ``down_bias`` (X, E). Each slice is the ``nn.Linear`` weight (out, in) of one expert, so expert ``e``
    computes exactly what its own module would.

    ``experts[e]`` is expert ``e`` as a function of ``(..., E)``; :meth:`per_expert` names each expert's
    weights as the module layout does (``3.gate_proj.weight``, a view), which is how checkpoint tables and
    zoo checkpoints written with one module per expert read and write this layout.

    Args:
        num_experts: X.
        d_model: E.
        hidden: H.
        activation: the activation module (applied to the gate, or to the up projection).
        gated: a gated FFN (three projections) rather than a two-layer MLP.
        bias: biases on the projections.
    """

    def __init__(
        self,
        num_experts: int,
        d_model: int,
        hidden: int,
        *,
        activation: nn.Module,
        gated: bool,
        bias: bool,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        X, E, H = num_experts, d_model, hidden
        self.num_experts, self.d_model, self.hidden, self.gated = X, E, H, gated
        # The first projection's parameter names: gated experts' gate and up rows together, or the MLP's up.
        self.first, self.first_bias = ("gate_up_proj", "gate_up_bias") if gated else ("up_proj", "up_bias")
        rows = 2 * H if gated else H
        self.register_parameter(self.first, nn.Parameter(torch.empty(X, rows, E, **factory)))
        self.down_proj = nn.Parameter(torch.empty(X, E, H, **factory))
        self.register_parameter(self.first_bias, nn.Parameter(torch.empty(X, rows, **factory)) if bias else None)
        self.down_bias = nn.Parameter(torch.empty(X, E, **factory)) if bias else None
        self.act = activation
        if self.down_proj.device.type != "meta":
            self.reset_parameters()

    @classmethod
    def of(cls, expert: nn.Module, num_experts: int, **factory: Any) -> GroupedExperts | None:
        """``num_experts`` experts shaped like the module ``expert`` (a zoo ``MLP`` or ``GatedMLP`` without
        dropout), or None for any other module."""
        if type(expert) not in (MLP, GatedMLP) or not isinstance(expert.dropout, nn.Identity):
            return None
        up = expert.up_proj
        return cls(
            num_experts,
            up.in_features,
            up.out_features,
            activation=expert.act,
            gated=isinstance(expert, GatedMLP),
            bias=up.bias is not None,
            **factory,
        )

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """What each expert's ``nn.Linear`` layers would get: uniform within ``1 / sqrt(fan_in)``."""
        for weight, bias, fan_in in self._projections():
            bound = 1 / math.sqrt(fan_in)
            nn.init.uniform_(weight, -bound, bound)
            if bias is not None:
                nn.init.uniform_(bias, -bound, bound)

    @torch.no_grad()
    def fill_weights(self, std: float, residual_std: float) -> None:
        """zoo's init of experts' linear layers: N(0, std), the down projection N(0, residual_std), biases 0."""
        for weight, bias, _ in self._projections():
            nn.init.normal_(weight, 0.0, residual_std if weight is self.down_proj else std)
            if bias is not None:
                nn.init.zeros_(bias)

    def _projections(self) -> Iterator[tuple[torch.Tensor, torch.Tensor | None, int]]:
        """(weight, bias, fan_in) of the first and the down projection."""
        yield getattr(self, self.first), getattr(self, self.first_bias), self.d_model
        yield self.down_proj, self.down_bias, self.hidden

    def forward(self, x: torch.Tensor, e: int) -> torch.Tensor:
        """Expert ``e`` on ``x`` (..., E) -> (..., E)."""
        first, first_bias = getattr(self, self.first)[e], getattr(self, self.first_bias)
        h = F.linear(x, first, None if first_bias is None else first_bias[e])  # (..., 2H) or (..., H)
        if self.gated:
            gate, up = h.chunk(2, dim=-1)
            h = self.act(gate) * up  # (..., H)
        else:
            h = self.act(h)
        return F.linear(h, self.down_proj[e], None if self.down_bias is None else self.down_bias[e])

    def __getitem__(self, e: int) -> Callable[[torch.Tensor], torch.Tensor]:
        if not -self.num_experts <= e < self.num_experts:
            raise IndexError(f"expert {e} of {self.num_experts}")
        return lambda x: self(x, e % self.num_experts)

    def __len__(self) -> int:
        return self.num_experts

    def __iter__(self) -> Iterator[Callable[[torch.Tensor], torch.Tensor]]:
        return (self[e] for e in range(self.num_experts))

    def per_expert(self) -> dict[str, torch.Tensor]:
        """Each expert's weights under the names one module per expert has (``0.up_proj.weight``, ...), as
        views of the stacked tensors (writing into one writes the stacked tensor)."""
        H, out = self.hidden, {}
        first, first_bias = getattr(self, self.first), getattr(self, self.first_bias)
        for e in range(self.num_experts):
            if self.gated:
                out[f"{e}.gate_proj.weight"], out[f"{e}.up_proj.weight"] = first[e, :H], first[e, H:]
                if first_bias is not None:
                    out[f"{e}.gate_proj.bias"], out[f"{e}.up_proj.bias"] = first_bias[e, :H], first_bias[e, H:]
            else:
                out[f"{e}.up_proj.weight"] = first[e]
                if first_bias is not None:
                    out[f"{e}.up_proj.bias"] = first_bias[e]
            out[f"{e}.down_proj.weight"] = self.down_proj[e]
            if self.down_bias is not None:
                out[f"{e}.down_proj.bias"] = self.down_bias[e]
        return out

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        # A checkpoint written with one module per expert (zoo before the stacked layout): stack it.
        if f"{prefix}0.down_proj.weight" in state_dict and f"{prefix}down_proj" not in state_dict:
            names = self.per_expert()
            for name in names:
                if f"{prefix}{name}" not in state_dict:
                    missing.append(f"{prefix}{name}")
            with torch.no_grad():
                for name, view in names.items():
                    if f"{prefix}{name}" in state_dict:
                        view.copy_(state_dict.pop(f"{prefix}{name}"))
            return
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing, unexpected, errors)

    def extra_repr(self) -> str:
        kind = "gated" if self.gated else "mlp"
        return f"num_experts={self.num_experts}, {kind} {self.d_model} -> {self.hidden} -> {self.d_model}"


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
    per token instead of per slot, so its value is ``top_k`` times this one.) Sigmoid scores are first
    normalised to sum to one per token, as in DeepSeek-V3's sequence-wise balance loss.

    Args:
        d_model: width E of the input and output.
        num_experts: number of routed experts X.
        top_k: experts per token k.
        expert: zero-argument callable returning a fresh expert module; called ``num_experts`` times.
        shared_expert: zero-argument callable returning an expert that every token goes through, its
            output added unweighted (DeepSeekMoE, Qwen-MoE); ``None`` for none.
        aux_loss_coef: coefficient of the load-balancing loss.
        normalize: renormalise the chosen experts' scores to sum to one (Mixtral, DeepSeek-V3); False keeps
            them as scored (Qwen2-MoE's ``norm_topk_prob: false``).
        scoring: ``softmax`` over the router logits (Mixtral, Qwen) or an independent ``sigmoid`` per expert
            (DeepSeek-V3), computed in float32 from a float32 copy of the router weight.
        correction_bias: a per-expert float32 buffer ``e_score_correction_bias`` (zeros until loaded; DeepSeek
            adjusts it outside the gradient to balance the load) added to the scores to choose the experts,
            not to weight them.
        n_group: experts form this many equal groups (of at least two); each group scores by the sum of
            its two best scores (bias included), and a token chooses only among ``topk_group`` best groups.
            1 (with ``topk_group`` 1): no groups.
        topk_group: groups each token chooses among.
        routed_scaling_factor: multiplies the routed experts' weights, after any renormalisation
            (DeepSeek-V3: 2.5).
        shared_expert_gate: scale the shared expert's output by ``sigmoid(shared_expert_gate(x))``, a learned
            ``Linear(E, 1)`` without bias (Qwen2-MoE); needs a ``shared_expert``.
        device: device of the parameters (experts are built under it).
        dtype: dtype of the parameters (experts are cast to it).

    Raises:
        ValueError: ``top_k`` is larger than ``num_experts``; groups that do not fit (see ``check_groups``);
            a ``shared_expert_gate`` without a shared expert.
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
        normalize: bool = True,
        scoring: Literal["softmax", "sigmoid"] = "softmax",
        correction_bias: bool = False,
        n_group: int = 1,
        topk_group: int = 1,
        routed_scaling_factor: float = 1.0,
        shared_expert_gate: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        check_top_k(top_k, num_experts)
        check_groups(num_experts, top_k, n_group, topk_group)
        if scoring not in ("softmax", "sigmoid"):
            raise ValueError(f"scoring must be 'softmax' or 'sigmoid', not {scoring!r}")
        if shared_expert_gate and shared_expert is None:
            raise ValueError("shared_expert_gate scales the shared expert: give a shared_expert too")
        self.num_experts = num_experts
        self.top_k = top_k
        self.aux_loss_coef = aux_loss_coef
        self.normalize = normalize
        self.scoring = scoring
        self.n_group = n_group
        self.topk_group = topk_group
        self.routed_scaling_factor = routed_scaling_factor
        self.router = nn.Linear(d_model, num_experts, bias=False, device=device, dtype=dtype)
        # A buffer, not a parameter: no gradient moves it (DeepSeek-V3 nudges it by the load), and Hugging Face
        # holds it as one. float32 whatever the model's dtype, as the scores it is added to.
        bias = torch.zeros(num_experts, device=device, dtype=torch.float32) if correction_bias else None
        self.register_buffer("e_score_correction_bias", bias)
        # zoo's own FFNs as experts are stacked (one tensor per projection); others are built one by one.
        # The first expert is built on the meta device only to read its shape.
        self.experts: GroupedExperts | nn.ModuleList
        grouped = GroupedExperts.of(_build_expert(expert, "meta", dtype), num_experts, device=device, dtype=dtype)
        if grouped is not None:
            self.experts = grouped
        else:
            self.experts = nn.ModuleList(_build_expert(expert, device, dtype) for _ in range(num_experts))
        # A shared expert is a whole FFN whose output is added, so nn.Identity (which would add x) cannot
        # stand for "none", and a zero-returning module would waste a pass. None keeps it out of the
        # parameters; forward tests it on this constructor constant, which torch.compile resolves while
        # tracing (no graph break).
        self.shared_expert = _build_expert(shared_expert, device, dtype) if shared_expert is not None else None
        self.shared_expert_gate = (
            nn.Linear(d_model, 1, bias=False, device=device, dtype=dtype) if shared_expert_gate else None
        )
        self.aux_loss: torch.Tensor = torch.zeros((), device=device)

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Route the tokens of ``x`` (..., E), flattened to T rows.

        Returns:
            weights (T, k) float32 (summing to ``routed_scaling_factor`` per token when ``normalize``); indices
            (T, k) of the chosen experts, best first; probs (T, X) float32, the router's scores of all experts
            (softmax probabilities or sigmoids, without the correction bias).
        """
        tokens = x.reshape(-1, x.shape[-1])  # (T, E)
        if self.scoring == "softmax":
            # float32 softmax as in Mixtral: bf16 probabilities are too coarse to rank and weight experts well.
            probs = self.router(tokens).float().softmax(dim=-1)  # (T, X)
        else:  # DeepSeek-V3 keeps its router in float32 and scores there
            probs = F.linear(tokens.float(), self.router.weight.float()).sigmoid()  # (T, X)
        if self.e_score_correction_bias is None and self.n_group == 1:
            weights, indices = probs.topk(self.top_k, dim=-1)  # (T, k), (T, k)
        else:
            choice = probs if self.e_score_correction_bias is None else probs + self.e_score_correction_bias
            if self.n_group > 1:
                choice = self._best_groups(choice)
            indices = choice.topk(self.top_k, dim=-1).indices  # (T, k): chosen with the bias ...
            weights = probs.gather(1, indices)  # ... weighted without it
        if self.normalize:
            # Renormalising softmax probabilities equals a softmax over the chosen logits. The 1e-20 is
            # DeepSeek-V3's guard for sigmoid scores; it cannot change a softmax sum (at least top_k / X).
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
        if self.routed_scaling_factor != 1.0:
            weights = weights * self.routed_scaling_factor
        return weights, indices, probs

    def _best_groups(self, choice: torch.Tensor) -> torch.Tensor:
        """``choice`` (T, X) with the experts outside each token's ``topk_group`` best groups at -inf.

        A group scores by the sum of its two best experts' scores (DeepSeek-V3's ``noaux_tc``), exactly as
        Hugging Face's ``DeepseekV3TopkRouter``.
        """
        t, G = choice.shape[0], self.n_group
        grouped = choice.view(t, G, self.num_experts // G)  # (T, G, X/G)
        group_scores = grouped.topk(2, dim=-1).values.sum(dim=-1)  # (T, G)
        best = group_scores.topk(self.topk_group, dim=-1, sorted=False).indices  # (T, topk_group)
        keep = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, best, True)  # (T, G)
        keep = keep.unsqueeze(-1).expand_as(grouped).reshape(t, self.num_experts)  # (T, X)
        return choice.masked_fill(~keep, float("-inf"))

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
        grouped = isinstance(self.experts, GroupedExperts)
        for e in range(self.num_experts):
            # The (token, slot) pairs routed to e; their count is data-dependent, hence nonzero.
            token, slot = torch.nonzero(indices == e, as_tuple=True)  # (T_e,), (T_e,)
            if grouped:
                y = self.experts(tokens[token], e)  # (T_e, E)
            else:
                y = self.experts[e](tokens[token].unsqueeze(0)).squeeze(0)  # (T_e, E): experts take (N, L, E)
            # A token picks an expert at most once, so `token` has no repeats and the add is deterministic.
            out.index_add_(0, token, y * weights[token, slot, None])
        out = out.view_as(x)  # (N, L, E)
        if self.shared_expert is not None:
            shared = self.shared_expert(x)
            if self.shared_expert_gate is not None:
                shared = torch.sigmoid(self.shared_expert_gate(x)) * shared  # (N, L, 1) gate per token
            out = out + shared
        if self.scoring == "sigmoid":
            probs = probs / probs.sum(dim=-1, keepdim=True)  # sigmoids as a distribution, for the loss only
        self.aux_loss = self.load_balancing_loss(indices, probs)
        return out

    def extra_repr(self) -> str:
        extra = "" if self.normalize else ", normalize=False"
        if self.scoring != "softmax":
            extra += f", scoring={self.scoring}"
        if self.n_group > 1:
            extra += f", n_group={self.n_group}, topk_group={self.topk_group}"
        if self.routed_scaling_factor != 1.0:
            extra += f", routed_scaling_factor={self.routed_scaling_factor}"
        return f"num_experts={self.num_experts}, top_k={self.top_k}{extra}"


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
    normalize: bool = Field(
        True, description="Renormalise the chosen experts' scores to sum to 1 (Qwen2-MoE's norm_topk_prob: false)."
    )
    scoring: Literal["softmax", "sigmoid"] = Field(
        "softmax", description="Router scores: a softmax over experts, or a sigmoid per expert (DeepSeek-V3)."
    )
    correction_bias: bool = Field(
        False,
        description="A per-expert bias buffer (e_score_correction_bias) added to the scores to choose experts, "
        "not to weight them (DeepSeek-V3).",
    )
    n_group: int = Field(
        1, ge=1, le=MAX_EXPERTS, description="Expert groups; tokens choose within the topk_group best (DeepSeek-V3: 8)."
    )
    topk_group: int = Field(
        1,
        ge=1,
        le=MAX_EXPERTS,
        description="Groups each token chooses among, by their two best scores (DeepSeek-V3: 4).",
    )
    routed_scaling_factor: float = Field(
        1.0, gt=0, description="Multiplies the routed experts' weights (DeepSeek-V3: 2.5)."
    )
    shared_expert_gate: bool = Field(
        False, description="Scale the shared expert by sigmoid(Linear(E, 1)) of the token (Qwen2-MoE)."
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"num_experts": 4, "top_k": 2, "expert": {"type": "swiglu", "hidden": 16}},
        {"num_experts": 3, "top_k": 1, "expert": {"type": "mlp", "hidden": 8}, "shared_expert": {"type": "mlp"}},
        {  # Qwen2-MoE
            "num_experts": 4,
            "top_k": 2,
            "expert": {"type": "swiglu", "hidden": 8},
            "shared_expert": {"type": "swiglu", "hidden": 12},
            "shared_expert_gate": True,
            "normalize": False,
        },
        {  # DeepSeek-V3
            "num_experts": 8,
            "top_k": 2,
            "expert": {"type": "swiglu", "hidden": 8},
            "shared_expert": {"type": "swiglu", "hidden": 8},
            "scoring": "sigmoid",
            "correction_bias": True,
            "n_group": 4,
            "topk_group": 2,
            "routed_scaling_factor": 2.5,
        },
    )

    @model_validator(mode="after")
    def _top_k_fits(self) -> MoEConfig:
        check_top_k(self.top_k, self.num_experts)
        check_groups(self.num_experts, self.top_k, self.n_group, self.topk_group)
        if self.shared_expert_gate and self.shared_expert is None:
            raise ValueError("shared_expert_gate scales the shared expert: give a shared_expert too")
        return self

    def cost(self, ctx: BuildContext) -> Cost | None:
        E, X, K = ctx.d_model, self.num_experts, self.top_k
        expert = nested_cost("ffn", self.expert, ctx)
        shared = nested_cost("ffn", self.shared_expert, ctx) if self.shared_expert is not None else Cost(params=0)
        if expert is None or shared is None:
            return None
        # The router E·X and the shared expert's gate E·1 (Qwen2-MoE); the correction bias is a buffer.
        router = E * X + (E if self.shared_expert_gate else 0)
        return Cost(
            params=router + X * expert.params + shared.params,
            active=router + K * expert.active_params + shared.active_params,
            matmul=router + K * expert.matmul + shared.matmul,
            acts=E + X + K * expert.acts + shared.acts,
        )


@hookimpl
def register_components(register):
    register("ffn", "moe", MoE, MoEConfig)
