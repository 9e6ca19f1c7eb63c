"""``MoEConfig``: the recipe options of the ``moe`` FFN, their checks, its declared cost and its label."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from zoo.config import BuildContext, ComponentConfig, Nested, Spec, nested_config
from zoo.cost import Cost, nested_cost
from zoo.label import SKIP_OPTIONS, Label, options, widths, wrap
from zoo.limits import MAX_EXPERTS

from .experts import GroupedExperts
from .layer import SPARSEMIXER_ALONE, check_groups, check_top_k


class MoEConfig(ComponentConfig):
    """Mixture of experts FFN."""

    type: Literal["moe"] = "moe"
    num_experts: int = Field(ge=1, le=MAX_EXPERTS, description="Number of routed experts.")
    top_k: int = Field(ge=1, le=MAX_EXPERTS, description="Experts each token is sent to.")
    expert: Annotated[Nested, Spec("ffn")] = Field(
        default_factory=lambda: {"type": "swiglu"}, description="FFN spec of every routed expert."
    )
    shared_expert: Annotated[Nested | None, Spec("ffn")] = Field(
        None, description="FFN spec of an expert applied to every token; none by default."
    )
    aux_loss_coef: float = Field(0.01, ge=0.0, description="Coefficient of the load-balancing loss.")
    normalize: bool = Field(
        True, description="Renormalise the chosen experts' scores to sum to 1 (Qwen2-MoE's norm_topk_prob: false)."
    )
    scoring: Literal["softmax", "sigmoid", "sparsemixer"] = Field(
        "softmax",
        description="Router scores: a softmax over experts, a sigmoid per expert (DeepSeek-V3), or PhiMoE's "
        "sparsemixer (eval mode: each pick weighted by its softmax among the experts near it, not renormalised).",
    )
    sparsemixer_eps: float = Field(
        0.01,
        ge=0,
        description="sparsemixer: a pick's softmax spans the experts whose logit is within a relative 2·eps of "
        "it (PhiMoE's router_jitter_noise: 0.01).",
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
        description="Groups each token chooses among, by their group_scoring (DeepSeek-V3: 4, DeepSeek-V2: 3).",
    )
    group_scoring: Literal["top2", "max"] = Field(
        "top2",
        description="How a group scores: the sum of its two best experts' scores (top2: DeepSeek-V3's noaux_tc) or "
        "its best one's (max: DeepSeek-V2's group_limited_greedy).",
    )
    routed_scaling_factor: float = Field(
        1.0, gt=0, description="Multiplies the routed experts' weights (DeepSeek-V3: 2.5)."
    )
    shared_expert_gate: bool = Field(
        False, description="Scale the shared expert by sigmoid(Linear(E, 1)) of the token (Qwen2-MoE)."
    )
    router_bias: bool = Field(
        False,
        description="The router learns a bias on its logits (gpt-oss, whose softmax over the top_k logits is "
        "scoring: softmax with normalize: true).",
    )
    weighted_input: bool = Field(
        False,
        description="Each chosen expert takes the token scaled by the router's weight and its output is added as it "
        "is, expert(w * x), instead of w * expert(x) (Llama 4, with scoring: sigmoid and normalize: false).",
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
        {  # DeepSeek-V2: softmax scores, groups by their best expert, the weights scaled, not renormalised
            "num_experts": 6,
            "top_k": 2,
            "expert": {"type": "swiglu", "hidden": 8},
            "shared_expert": {"type": "swiglu", "hidden": 16},
            "normalize": False,
            "n_group": 6,
            "topk_group": 2,
            "group_scoring": "max",
            "routed_scaling_factor": 16.0,
        },
        {  # PhiMoE: sparsemixer's two picks, each weighted among the experts near it
            "num_experts": 4,
            "top_k": 2,
            "expert": {"type": "swiglu", "hidden": 8},
            "scoring": "sparsemixer",
            "sparsemixer_eps": 0.1,
            "normalize": False,
        },
        {  # gpt-oss: a biased router, biased experts clamped and shifted
            "num_experts": 4,
            "top_k": 2,
            "expert": {"type": "swiglu", "hidden": 8, "bias": True, "alpha": 1.702, "limit": 0.5, "up_shift": 1.0},
            "router_bias": True,
        },
        {  # Llama 4: a sigmoid of the top-k logits scales the experts' input; a shared expert
            "num_experts": 4,
            "top_k": 2,
            "expert": {"type": "swiglu", "hidden": 8},
            "shared_expert": {"type": "swiglu", "hidden": 8},
            "scoring": "sigmoid",
            "normalize": False,
            "weighted_input": True,
        },
    )

    @model_validator(mode="after")
    def _top_k_fits(self) -> MoEConfig:
        check_top_k(self.top_k, self.num_experts)
        check_groups(self.num_experts, self.top_k, self.n_group, self.topk_group, self.group_scoring)
        if self.scoring == "sparsemixer" and (self.correction_bias or self.n_group > 1):
            raise ValueError(SPARSEMIXER_ALONE)
        if self.shared_expert_gate and self.shared_expert is None:
            raise ValueError("shared_expert_gate scales the shared expert: give a shared_expert too")
        return self

    def cost(self, ctx: BuildContext) -> Cost | None:
        E, X, K = ctx.d_model, self.num_experts, self.top_k
        expert = nested_cost("ffn", self.expert, ctx)
        shared = nested_cost("ffn", self.shared_expert, ctx) if self.shared_expert is not None else Cost(params=0)
        if expert is None or shared is None:
            return None
        # The router E·X and the shared expert's gate E·1 (Qwen2-MoE); the router's bias X (gpt-oss) is no
        # matmul; the correction bias is a buffer.
        router = E * X + (E if self.shared_expert_gate else 0)
        bias = X if self.router_bias else 0
        return Cost(
            params=router + bias + X * expert.params + shared.params,
            active=router + bias + K * expert.active_params + shared.active_params,
            matmul=router + K * expert.matmul + shared.matmul,
            acts=E + X + K * expert.acts + shared.acts,
        )

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        """The router, the routed expert and any shared expert (each by its name and widths), and a row of the
        experts with the top-k filled."""
        E, X, K = ctx.d_model, self.num_experts, self.top_k
        expert = nested_config(self, "expert")
        if isinstance(module.experts, GroupedExperts):  # stacked: the hidden width is the stacked tensors'
            activation = getattr(expert, "activation", None)
            expert_widths = f"{E} → {module.experts.hidden} → {E}"
            expert_widths += f", {activation}" if isinstance(activation, str) else ""
        else:
            expert_widths = widths(expert, ctx, module.experts[0])
        lines = [f"router: top-{K} of {X} experts", f"expert: {expert.type} {expert_widths}"]
        if self.shared_expert is not None:
            shared = nested_config(self, "shared_expert")
            lines.append(f"+ shared expert: {shared.type} {widths(shared, ctx, module.shared_expert)}")
        skip = SKIP_OPTIONS | {"num_experts", "top_k", "expert", "shared_expert", "aux_loss_coef"}
        lines += wrap(options(self, skip))
        return Label("ffn", f"Mixture of experts · {self.type}", lines, experts=(X, K))
