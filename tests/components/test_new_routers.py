"""The routers of DeepSeek-V2 (groups scored by their best expert, ``group_scoring: max``, as transformers'
``DeepseekV2TopkRouter``; groups of one expert allowed for it, not for V3's sum of the two best) and PhiMoE
(``scoring: sparsemixer``, as transformers' ``sparsemixer`` in eval mode)."""

from __future__ import annotations

import pytest
import torch

from zoo.components.ffn import SwiGLU
from zoo.components.moe import MoE, MoEConfig, check_groups

transformers = pytest.importorskip("transformers")


@pytest.mark.parametrize(("method", "n_group", "topk_group"), [("greedy", None, None), ("group_limited_greedy", 4, 2)])
def test_the_router_chooses_and_weights_as_transformers_deepseek_v2(method, n_group, topk_group):
    from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2TopkRouter

    config = transformers.DeepseekV2Config(
        hidden_size=16,
        num_attention_heads=4,
        n_routed_experts=8,
        num_experts_per_tok=3,
        topk_method=method,
        n_group=n_group,
        topk_group=topk_group,
        routed_scaling_factor=4.0,
    )
    torch.manual_seed(0)
    hf = DeepseekV2TopkRouter(config)
    with torch.no_grad():
        hf.weight.normal_()
    groups = {} if n_group is None else {"n_group": n_group, "topk_group": topk_group, "group_scoring": "max"}
    ours = MoE(
        16,
        num_experts=8,
        top_k=3,
        expert=lambda: SwiGLU(16, hidden=4),
        normalize=False,
        routed_scaling_factor=4.0,
        **groups,
    )
    with torch.no_grad():
        ours.router.weight.copy_(hf.weight)
        x = torch.randn(40, 16)
        _, hf_weights, hf_indices = hf(x)
        weights, indices, _ = ours.route(x)
    order, hf_order = indices.sort(-1), hf_indices.sort(-1)
    assert torch.equal(order.values, hf_order.values)
    assert torch.allclose(weights.gather(1, order.indices), hf_weights.gather(1, hf_order.indices), atol=1e-6)


def test_groups_of_one_expert_score_by_their_best_only():
    check_groups(4, 2, 4, 2, "max")
    with pytest.raises(ValueError, match="leaves 1 expert per group"):
        check_groups(4, 2, 4, 2, "top2")
    config = MoEConfig(num_experts=4, top_k=2, n_group=4, topk_group=2, group_scoring="max")
    assert config.group_scoring == "max"


@pytest.mark.parametrize("eps", [0.0, 0.01, 0.3, 10.0])
def test_sparsemixer_picks_and_weights_as_transformers_phimoe(eps):
    from transformers.models.phimoe.modeling_phimoe import sparsemixer

    torch.manual_seed(0)
    ours = MoE(
        8,
        num_experts=6,
        top_k=2,
        expert=lambda: SwiGLU(8, hidden=4),
        scoring="sparsemixer",
        sparsemixer_eps=eps,
        normalize=False,
    )
    x = torch.randn(200, 8)
    with torch.no_grad():
        weights, indices, probs = ours.route(x)
        expected_weights, expected_indices = sparsemixer(ours.router(x), eps, training=False)
    assert torch.equal(indices, expected_indices)
    assert torch.equal(weights, expected_weights)
    assert torch.allclose(probs.sum(-1), torch.ones(200))
    with pytest.raises(ValueError, match="sparsemixer picks its experts itself"):
        MoEConfig(num_experts=4, top_k=2, scoring="sparsemixer", n_group=2, topk_group=1)
