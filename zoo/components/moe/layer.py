"""The MoE layer: the router (softmax or sigmoid scores, correction bias, group-limited top_k), the dispatch
of each token to its experts, the load-balancing loss, and the checks that routing options fit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import torch
import torch.distributed
import torch.nn as nn
import torch.nn.functional as F

from zoo.tensor_parallel import check_divides, copy_to_ranks, refuse, sum_over_ranks

from .experts import GroupedExperts, _build_expert

SPARSEMIXER_ALONE = "sparsemixer picks its experts itself: no correction_bias, no groups"


def check_top_k(top_k: int, num_experts: int) -> None:
    """Raise ``ValueError`` unless each token can pick ``top_k`` distinct experts."""
    if top_k > num_experts:
        raise ValueError(f"top_k ({top_k}) must be <= num_experts ({num_experts})")


def check_groups(num_experts: int, top_k: int, n_group: int, topk_group: int, group_scoring: str = "top2") -> None:
    """Raise ``ValueError`` unless group-limited routing can pick ``top_k`` experts from ``topk_group`` of
    ``n_group`` equal groups (each of at least two experts where a group scores by its two best)."""
    if n_group == 1 and topk_group == 1:
        return
    if num_experts % n_group:
        raise ValueError(f"num_experts ({num_experts}) must be divisible by n_group ({n_group})")
    if topk_group > n_group:
        raise ValueError(f"topk_group ({topk_group}) must be <= n_group ({n_group})")
    per_group = num_experts // n_group
    if per_group < 2 and group_scoring == "top2":
        raise ValueError(
            f"n_group ({n_group}) leaves {per_group} expert per group; a group scores by its two best experts, "
            "so each needs at least 2 (use fewer groups)"
        )
    if top_k > topk_group * per_group:
        raise ValueError(
            f"top_k ({top_k}) must be <= the {topk_group * per_group} experts of topk_group ({topk_group}) groups "
            f"of {per_group}"
        )


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
            (DeepSeek-V3), computed in float32 from a float32 copy of the router weight; or ``sparsemixer``
            (PhiMoE, in float32: see :meth:`_sparsemixer`), which picks and weights its experts itself (in eval
            mode, as zoo always does: transformers trains it by sampling, which zoo does not).
        sparsemixer_eps: how near, relatively, an expert's logit must be to a pick's to share its softmax
            (PhiMoE's ``router_jitter_noise``: 0.01).
        correction_bias: a per-expert float32 buffer ``e_score_correction_bias`` (zeros until loaded; DeepSeek
            adjusts it outside the gradient to balance the load) added to the scores to choose the experts,
            not to weight them.
        n_group: experts form this many equal groups; each group scores by ``group_scoring`` (bias included),
            and a token chooses only among ``topk_group`` best groups. 1 (with ``topk_group`` 1): no groups.
        topk_group: groups each token chooses among.
        group_scoring: ``top2``, a group's score is the sum of its two best experts' (DeepSeek-V3's
            ``noaux_tc``; groups of at least two), or ``max``, its best expert's (DeepSeek-V2's
            ``group_limited_greedy``).
        routed_scaling_factor: multiplies the routed experts' weights, after any renormalisation
            (DeepSeek-V3: 2.5).
        shared_expert_gate: scale the shared expert's output by ``sigmoid(shared_expert_gate(x))``, a learned
            ``Linear(E, 1)`` without bias (Qwen2-MoE); needs a ``shared_expert``.
        router_bias: the router's linear layer learns a bias, added to the logits before they are scored
            (gpt-oss; with softmax scoring and ``normalize``, its weights are a softmax over the top_k logits).
        weighted_input: each chosen expert takes the token scaled by its weight, and its output is added as it
            is (Llama 4: ``expert(w * x)``), instead of ``w * expert(x)``.
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
        scoring: Literal["softmax", "sigmoid", "sparsemixer"] = "softmax",
        sparsemixer_eps: float = 0.01,
        correction_bias: bool = False,
        n_group: int = 1,
        topk_group: int = 1,
        group_scoring: Literal["top2", "max"] = "top2",
        routed_scaling_factor: float = 1.0,
        shared_expert_gate: bool = False,
        router_bias: bool = False,
        weighted_input: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        check_top_k(top_k, num_experts)
        check_groups(num_experts, top_k, n_group, topk_group, group_scoring)
        if group_scoring not in ("top2", "max"):
            raise ValueError(f"group_scoring must be 'top2' or 'max', not {group_scoring!r}")
        if scoring not in ("softmax", "sigmoid", "sparsemixer"):
            raise ValueError(f"scoring must be 'softmax', 'sigmoid' or 'sparsemixer', not {scoring!r}")
        if scoring == "sparsemixer" and (correction_bias or n_group > 1):
            raise ValueError(SPARSEMIXER_ALONE)
        if shared_expert_gate and shared_expert is None:
            raise ValueError("shared_expert_gate scales the shared expert: give a shared_expert too")
        self.num_experts = num_experts
        self.top_k = top_k
        self.aux_loss_coef = aux_loss_coef
        self.normalize = normalize
        self.scoring = scoring
        self.sparsemixer_eps = sparsemixer_eps
        self.n_group = n_group
        self.topk_group = topk_group
        self.group_scoring = group_scoring
        self.routed_scaling_factor = routed_scaling_factor
        self.weighted_input = weighted_input
        self.router = nn.Linear(d_model, num_experts, bias=router_bias, device=device, dtype=dtype)
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
        # The experts this rank runs, and the group whose ranks run the others (``shard_tensor``; None: all here).
        self.local_experts = range(num_experts)
        self.expert_group: Any = None
        # The data-parallel ranks whose batches make one batch (set by the trainer; None: this batch is the batch).
        self.balance_group: Any = None

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Route the tokens of ``x`` (..., E), flattened to T rows.

        Returns:
            weights (T, k) float32 (summing to ``routed_scaling_factor`` per token when ``normalize``); indices
            (T, k) of the chosen experts, best first; probs (T, X) float32, the router's scores of all experts
            (softmax probabilities or sigmoids, without the correction bias).
        """
        tokens = x.reshape(-1, x.shape[-1])  # (T, E)
        if self.scoring == "sparsemixer":
            weights, indices, probs = self._sparsemixer(self.router(tokens).float())
        elif self.scoring == "softmax":
            # float32 softmax as in Mixtral: bf16 probabilities are too coarse to rank and weight experts well.
            probs = self.router(tokens).float().softmax(dim=-1)  # (T, X)
        else:  # DeepSeek-V3 keeps its router in float32 and scores there
            bias = None if self.router.bias is None else self.router.bias.float()
            probs = F.linear(tokens.float(), self.router.weight.float(), bias).sigmoid()  # (T, X)
        if self.scoring == "sparsemixer":
            pass  # chosen one by one above
        elif self.e_score_correction_bias is None and self.n_group == 1:
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

    def _sparsemixer(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """PhiMoE's sparsemixer as transformers computes it in eval mode, from float32 ``logits`` (T, X): the
        experts are picked one at a time, best logit first; each pick's weight is its softmax among the experts not
        yet picked whose logit ``s`` is near the pick's ``m``, ``(m - s) / max(|s|, m) <= 2 * sparsemixer_eps``.
        Returns (weights, indices, the softmax of all logits for the load-balancing loss)."""
        weights, indices, left = [], [], logits
        for _ in range(self.top_k):
            best, index = left.max(dim=-1, keepdim=True)  # (T, 1)
            far = (best - logits) / logits.abs().clamp(min=best) > 2 * self.sparsemixer_eps  # (T, X)
            weights.append(left.masked_fill(far, float("-inf")).softmax(dim=-1).gather(-1, index))
            indices.append(index)
            left = left.scatter(-1, index, float("-inf"))
        return torch.cat(weights, dim=-1), torch.cat(indices, dim=-1), logits.softmax(dim=-1)

    def _best_groups(self, choice: torch.Tensor) -> torch.Tensor:
        """``choice`` (T, X) with the experts outside each token's ``topk_group`` best groups at -inf.

        A group scores by the sum of its two best experts' scores (DeepSeek-V3's ``noaux_tc``), exactly as
        Hugging Face's ``DeepseekV3TopkRouter``, or by its best one (``max``: ``DeepseekV2TopkRouter``).
        """
        t, G = choice.shape[0], self.n_group
        grouped = choice.view(t, G, self.num_experts // G)  # (T, G, X/G)
        if self.group_scoring == "max":
            group_scores = grouped.max(dim=-1).values  # (T, G)
        else:
            group_scores = grouped.topk(2, dim=-1).values.sum(dim=-1)  # (T, G)
        best = group_scores.topk(self.topk_group, dim=-1, sorted=False).indices  # (T, topk_group)
        keep = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, best, True)  # (T, G)
        keep = keep.unsqueeze(-1).expand_as(grouped).reshape(t, self.num_experts)  # (T, X)
        return choice.masked_fill(~keep, float("-inf"))

    def load_balancing_loss(self, indices: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
        """``aux_loss_coef * X * Σ_e f_e * P_e`` from indices (T, k) and probs (T, X); a scalar."""
        f = F.one_hot(indices, self.num_experts).float().mean(dim=(0, 1))  # (X,) share of assignments
        if self.balance_group is not None and self.training:
            # Shares of the whole batch of every data-parallel rank, as one process counts them; with each rank's
            # own P_e, the ranks' averaged gradients are those of the whole batch's loss.
            f = f.clone()
            torch.distributed.all_reduce(f, group=self.balance_group)
            f = f / torch.distributed.get_world_size(self.balance_group)
        p = probs.mean(dim=0)  # (X,) mean router probability; the only differentiable factor
        return self.aux_loss_coef * self.num_experts * (f * p).sum()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (N, L, E) -> (N, L, E). T = N * L tokens, X experts, k = top_k, T_e tokens sent to expert e."""
        tokens = x.reshape(-1, x.shape[-1])  # (T, E)
        weights, indices, probs = self.route(tokens)  # (T, k), (T, k), (T, X)
        weights = weights.to(x.dtype)
        out = torch.zeros_like(tokens)  # (T, E)
        grouped = isinstance(self.experts, GroupedExperts)
        inputs = tokens
        if self.expert_group is not None:  # experts split over ranks: the gradients of their inputs add up
            inputs, weights = copy_to_ranks(tokens, self.expert_group), copy_to_ranks(weights, self.expert_group)
        first = self.local_experts.start
        for e in self.local_experts:
            # The (token, slot) pairs routed to e; their count is data-dependent, hence nonzero.
            token, slot = torch.nonzero(indices == e, as_tuple=True)  # (T_e,), (T_e,)
            w = weights[token, slot, None]  # (T_e, 1)
            routed = inputs[token] * w if self.weighted_input else inputs[token]  # (T_e, E)
            if grouped:
                y = self.experts(routed, e - first)  # (T_e, E)
            else:
                y = self.experts[e](routed.unsqueeze(0)).squeeze(0)  # (T_e, E): experts take (N, L, E)
            # A token picks an expert at most once, so `token` has no repeats and the add is deterministic.
            out.index_add_(0, token, y if self.weighted_input else y * w)
        if self.expert_group is not None:
            out = sum_over_ranks(out, self.expert_group)  # every rank's experts' outputs
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

    def shard_tensor(self, mesh: Any) -> None:
        """Tensor parallelism (``zoo.tensor_parallel``): the experts split over the ranks, whole (expert
        parallelism within the tensor-parallel group: each rank runs its ``num_experts / ranks`` experts on the
        tokens routed to them, and the outputs are summed over the ranks). The router is whole on every rank, so
        each routes every token alike; a shared expert splits as an FFN does."""
        size = mesh.size()
        check_divides(f"MoE of {self.num_experts} experts", size, num_experts=self.num_experts)
        if not isinstance(self.experts, GroupedExperts):
            refuse("MoE", f"experts of type {type(self.experts[0]).__name__} (not zoo's MLP or gated FFN)", size)
        self.experts.shard_tensor(mesh)
        if self.shared_expert is not None:
            shard = getattr(self.shared_expert, "shard_tensor", None)
            if shard is None:
                refuse("MoE", f"a shared expert of type {type(self.shared_expert).__name__}", size)
            shard(mesh)
        per_rank, rank = self.num_experts // size, mesh.get_local_rank()
        self.local_experts = range(rank * per_rank, (rank + 1) * per_rank)
        self.expert_group = mesh.get_group()

    def extra_repr(self) -> str:
        extra = "" if self.normalize else ", normalize=False"
        if self.scoring != "softmax":
            extra += f", scoring={self.scoring}"
        if self.n_group > 1:
            extra += f", n_group={self.n_group}, topk_group={self.topk_group}"
            extra += f", group_scoring={self.group_scoring}" if self.group_scoring != "top2" else ""
        if self.routed_scaling_factor != 1.0:
            extra += f", routed_scaling_factor={self.routed_scaling_factor}"
        if self.router.bias is not None:
            extra += ", router_bias=True"
        if self.weighted_input:
            extra += ", weighted_input=True"
        return f"num_experts={self.num_experts}, top_k={self.top_k}{extra}"
