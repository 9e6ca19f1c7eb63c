"""The MoE router's options: unrenormalised weights and a gated shared expert (Qwen2-MoE), sigmoid scores with a
correction bias, group-limited choice and routed scaling (DeepSeek-V3); each against Hugging Face's own block."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from pydantic import ValidationError

from zoo.components.ffn import GatedMLP
from zoo.components.moe import MoE, MoEConfig
from zoo.config import BuildContext
from zoo.plugins import get_registry
from zoo.recipe import validate_spec


def validated(**options) -> MoEConfig:
    """An MoE config as a recipe's validation makes it: its expert specs turned into configs."""
    errors: list = []
    config = validate_spec(get_registry(), "ffn", {"type": "moe", **options}, "ffn", errors)
    assert config is not None, errors
    return config


D = 8  # d_model


def make_moe(num_experts: int = 4, top_k: int = 2, seed: int = 0, **kwargs) -> MoE:
    torch.manual_seed(seed)
    return MoE(D, num_experts=num_experts, top_k=top_k, expert=lambda: GatedMLP(D, hidden=12), **kwargs)


def shared(hidden: int = 6):
    return lambda: GatedMLP(D, hidden=hidden)


def n_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


class TestDefaults:
    def test_defaults_are_mixtrals_router(self):
        config = MoEConfig(num_experts=8, top_k=2)
        assert (config.normalize, config.scoring, config.correction_bias) == (True, "softmax", False)
        assert (config.n_group, config.topk_group, config.routed_scaling_factor) == (1, 1, 1.0)
        assert config.shared_expert_gate is False
        m = make_moe()
        assert m.e_score_correction_bias is None and m.shared_expert_gate is None
        assert [n for n, _ in m.named_buffers()] == []

    def test_default_weights_are_the_renormalised_top_k_softmax(self):
        m = make_moe(num_experts=6, top_k=3)
        x = torch.randn(2, 5, D)
        weights, indices, probs = m.route(x)
        top = F.linear(x.reshape(-1, D), m.router.weight).topk(3, dim=-1)
        assert torch.equal(indices, top.indices)
        torch.testing.assert_close(weights, top.values.softmax(dim=-1))


class TestQwen2MoE:
    def test_normalize_false_keeps_the_top_k_probabilities(self):
        m = make_moe(num_experts=6, top_k=2, normalize=False)
        weights, indices, probs = m.route(torch.randn(3, 4, D))
        assert torch.equal(weights, probs.gather(1, indices))
        assert (weights.sum(-1) < 1).all()

    def test_shared_expert_gate_scales_the_shared_expert_by_a_sigmoid(self):
        m = make_moe(shared_expert=shared(), shared_expert_gate=True)
        x = torch.randn(2, 5, D)
        out = m(x)
        routed = out - torch.sigmoid(m.shared_expert_gate(x)) * m.shared_expert(x)
        m.shared_expert = m.shared_expert_gate = None
        torch.testing.assert_close(routed, m(x))

    def test_gate_is_one_weight_row_without_bias(self):
        with_gate = make_moe(shared_expert=shared(), shared_expert_gate=True)
        without = make_moe(shared_expert=shared())
        assert n_params(with_gate) == n_params(without) + D
        assert dict(with_gate.named_parameters())["shared_expert_gate.weight"].shape == (1, D)
        assert with_gate.shared_expert_gate.bias is None

    def test_gate_needs_a_shared_expert(self):
        with pytest.raises(ValueError, match="shared_expert_gate scales the shared expert: give a shared_expert"):
            make_moe(shared_expert_gate=True)
        with pytest.raises(ValidationError, match="give a shared_expert too"):
            MoEConfig(num_experts=4, top_k=2, shared_expert_gate=True)

    def test_equals_transformers_sparse_moe_block(self):
        transformers = pytest.importorskip("transformers")
        from transformers.models.qwen2_moe.modeling_qwen2_moe import Qwen2MoeSparseMoeBlock

        config = transformers.Qwen2MoeConfig(
            hidden_size=D, num_experts=6, num_experts_per_tok=2, moe_intermediate_size=12,
            shared_expert_intermediate_size=10, norm_topk_prob=False,
        )  # fmt: skip
        torch.manual_seed(0)
        hf = Qwen2MoeSparseMoeBlock(config)
        for p in hf.parameters():
            torch.nn.init.normal_(p, std=0.3)
        m = make_moe(num_experts=6, top_k=2, normalize=False, shared_expert=shared(10), shared_expert_gate=True)
        with torch.no_grad():
            m.router.weight.copy_(hf.gate.weight)
            m.experts.gate_up_proj.copy_(hf.experts.gate_up_proj)  # the same stacked layout
            m.experts.down_proj.copy_(hf.experts.down_proj)
            for p in ("gate", "up", "down"):
                getattr(m.shared_expert, f"{p}_proj").weight.copy_(getattr(hf.shared_expert, f"{p}_proj").weight)
            m.shared_expert_gate.weight.copy_(hf.shared_expert_gate.weight)
        x = torch.randn(3, 7, D)
        with torch.no_grad():
            torch.testing.assert_close(m(x), hf(x), atol=1e-6, rtol=1e-5)


def deepseek_moe(num_experts=8, top_k=2, n_group=4, topk_group=2, scale=2.5, **kwargs) -> MoE:
    return make_moe(
        num_experts=num_experts, top_k=top_k, scoring="sigmoid", correction_bias=True, n_group=n_group,
        topk_group=topk_group, routed_scaling_factor=scale, **kwargs,
    )  # fmt: skip


class TestDeepSeekRouting:
    def test_sigmoid_scores_weighted_and_scaled(self):
        m = make_moe(num_experts=6, top_k=2, scoring="sigmoid", routed_scaling_factor=2.5)
        x = torch.randn(2, 5, D)
        weights, indices, probs = m.route(x)
        scores = F.linear(x.reshape(-1, D), m.router.weight).sigmoid()
        torch.testing.assert_close(probs, scores)
        top = scores.topk(2, dim=-1)
        assert torch.equal(indices, top.indices)
        torch.testing.assert_close(weights, 2.5 * top.values / top.values.sum(-1, keepdim=True))
        torch.testing.assert_close(weights.sum(-1), torch.full((10,), 2.5))

    def test_correction_bias_chooses_but_does_not_weight(self):
        m = deepseek_moe(n_group=1, topk_group=1, scale=1.0, normalize=False)
        m.e_score_correction_bias[5] = 100.0  # expert 5 always wins the choice
        x = torch.randn(3, 4, D)
        weights, indices, probs = m.route(x)
        assert (indices == 5).any(-1).all()
        assert torch.equal(weights, probs.gather(1, indices))  # the scores, not the biased scores
        assert (weights < 1).all()

    def test_only_the_best_groups_are_chosen_from(self):
        m = deepseek_moe(num_experts=12, top_k=3, n_group=4, topk_group=2)
        with torch.no_grad():
            m.e_score_correction_bias.normal_(std=0.5)
        x = torch.randn(4, 6, D)
        _, indices, probs = m.route(x)
        choice = probs + m.e_score_correction_bias
        group_scores = choice.view(-1, 4, 3).topk(2, dim=-1).values.sum(-1)  # (T, 4): sum of the best two
        best = group_scores.topk(2, dim=-1).indices  # (T, 2)
        for t in range(choice.shape[0]):
            allowed = {g * 3 + i for g in best[t].tolist() for i in range(3)}
            assert set(indices[t].tolist()) <= allowed
            masked = torch.full_like(choice[t], float("-inf"))
            masked[list(allowed)] = choice[t, list(allowed)]
            assert set(indices[t].tolist()) == set(masked.topk(3).indices.tolist())
        assert len(best.unique()) > 1  # the tokens do not all pick the same groups

    def test_bias_is_a_float32_buffer_not_a_parameter(self):
        m = deepseek_moe(dtype=torch.bfloat16)
        assert m.e_score_correction_bias.dtype == torch.float32
        assert "e_score_correction_bias" in m.state_dict()
        assert "e_score_correction_bias" not in dict(m.named_parameters())

    def test_runs_in_bfloat16(self):
        m = deepseek_moe(dtype=torch.bfloat16, shared_expert=shared())
        out = m(torch.randn(2, 5, D, dtype=torch.bfloat16))
        assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
        assert torch.isfinite(m.aux_loss)

    def test_aux_loss_of_sigmoid_scores_normalises_them(self):
        m = deepseek_moe(n_group=1, topk_group=1, aux_loss_coef=0.1)
        torch.nn.init.zeros_(m.router.weight)  # every score 0.5: a uniform distribution once normalised
        m(torch.randn(2, 5, D))
        torch.testing.assert_close(m.aux_loss, torch.tensor(0.1))

    @pytest.mark.parametrize("normalize", [True, False])
    def test_equals_transformers_router_and_moe(self, normalize):
        transformers = pytest.importorskip("transformers")
        from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE

        config = transformers.DeepseekV3Config(
            hidden_size=D, n_routed_experts=12, num_experts_per_tok=3, n_group=4, topk_group=2,
            moe_intermediate_size=12, n_shared_experts=2, routed_scaling_factor=2.5, norm_topk_prob=normalize,
        )  # fmt: skip
        torch.manual_seed(0)
        hf = DeepseekV3MoE(config)
        for p in hf.parameters():
            torch.nn.init.normal_(p, std=0.3)
        torch.nn.init.normal_(hf.gate.e_score_correction_bias, std=0.3)
        m = deepseek_moe(num_experts=12, top_k=3, normalize=normalize, shared_expert=shared(24))
        with torch.no_grad():
            m.router.weight.copy_(hf.gate.weight)
            m.e_score_correction_bias.copy_(hf.gate.e_score_correction_bias)
            m.experts.gate_up_proj.copy_(hf.experts.gate_up_proj)  # the same stacked layout
            m.experts.down_proj.copy_(hf.experts.down_proj)
            for p in ("gate", "up", "down"):
                getattr(m.shared_expert, f"{p}_proj").weight.copy_(getattr(hf.shared_experts, f"{p}_proj").weight)
        x = torch.randn(3, 7, D)
        with torch.no_grad():
            _, hf_weights, hf_indices = hf.gate(x)
            weights, indices, _ = m.route(x)
            order, hf_order = indices.argsort(-1), hf_indices.argsort(-1)
            assert torch.equal(indices.gather(1, order), hf_indices.gather(1, hf_order))
            torch.testing.assert_close(weights.gather(1, order), hf_weights.gather(1, hf_order))
            torch.testing.assert_close(m(x), hf(x), atol=1e-6, rtol=1e-5)


class TestGroupChecks:
    @pytest.mark.parametrize(
        "experts, top_k, n_group, topk_group, message",
        [
            (10, 2, 4, 2, r"num_experts \(10\) must be divisible by n_group \(4\)"),
            (8, 2, 4, 5, r"topk_group \(5\) must be <= n_group \(4\)"),
            (8, 2, 8, 2, r"n_group \(8\) leaves 1 expert per group; a group scores by its two best"),
            (8, 5, 4, 2, r"top_k \(5\) must be <= the 4 experts of topk_group \(2\) groups of 2"),
        ],
    )
    def test_groups_that_cannot_be_chosen_from_are_refused(self, experts, top_k, n_group, topk_group, message):
        with pytest.raises(ValueError, match=message):
            make_moe(num_experts=experts, top_k=top_k, n_group=n_group, topk_group=topk_group)
        with pytest.raises(ValidationError, match=message):
            MoEConfig(num_experts=experts, top_k=top_k, n_group=n_group, topk_group=topk_group)

    def test_scoring_must_be_softmax_sigmoid_or_sparsemixer(self):
        with pytest.raises(ValueError, match="scoring must be 'softmax', 'sigmoid' or 'sparsemixer', not 'relu'"):
            make_moe(scoring="relu")


class TestCost:
    def ctx(self) -> BuildContext:
        return BuildContext(d_model=D)

    def test_gate_counts_and_the_bias_buffer_does_not(self):
        expert, shared_spec = {"type": "swiglu", "hidden": 12}, {"type": "swiglu", "hidden": 6}
        gated = validated(num_experts=4, top_k=2, expert=expert, shared_expert=shared_spec, shared_expert_gate=True)
        plain = validated(num_experts=4, top_k=2, expert=expert, shared_expert=shared_spec)
        biased = validated(num_experts=4, top_k=2, expert=expert, scoring="sigmoid", correction_bias=True)
        assert gated.cost(self.ctx()).params == plain.cost(self.ctx()).params + D
        assert gated.cost(self.ctx()).params == n_params(make_moe(shared_expert=shared(), shared_expert_gate=True))
        assert biased.cost(self.ctx()).params == n_params(deepseek_moe(num_experts=4, n_group=1, topk_group=1))
