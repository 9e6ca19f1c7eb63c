"""gpt-oss's config quirks beyond the parity cases (tests/hf_cases/gpt_oss.py): the default layer types, the
refused MXFP4 checkpoint and windowless sliding layers, and the fused experts' layout both ways."""

from __future__ import annotations

import json

import pytest
import torch

import zoo
from zoo.errors import HFImportError
from zoo.hf import hf_recipe
from zoo.hf.gpt_oss import fuse, unfuse

TINY = {
    "model_type": "gpt_oss",
    "vocab_size": 64,
    "hidden_size": 16,
    "intermediate_size": 8,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "num_local_experts": 3,
    "num_experts_per_tok": 2,
    "sliding_window": 5,
    "rope_parameters": {"rope_type": "default", "rope_theta": 150000.0},
}


def imported(tmp_path, **changes) -> dict:
    (tmp_path / "config.json").write_text(json.dumps({**TINY, **changes}))
    return hf_recipe(tmp_path)


def test_without_layer_types_every_other_layer_slides_the_first_too(tmp_path):
    recipe = zoo.load_recipe(imported(tmp_path))
    windows = [placed["attention"][0].window for placed in recipe.layer_plan("decoder")]
    assert windows == [5, None, 5, None]
    assert recipe.attention.sinks and recipe.ffn.router_bias and recipe.ffn.expert.up_shift == 1.0
    assert (recipe.ffn.expert.alpha, recipe.ffn.expert.limit) == (1.702, 7.0)


def test_every_layer_sliding_puts_the_window_on_the_attention(tmp_path):
    recipe = zoo.load_recipe(imported(tmp_path, layer_types=["sliding_attention"] * 4))
    assert recipe.attention.window == 5 and not recipe.layers


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"quantization_config": {"quant_method": "mxfp4"}}, "quantization_config=.* is not supported: the published"),
        ({"sliding_window": None}, "sliding_attention but there is no window"),
        ({"layer_types": ["chunked_attention"] * 4}, "layer_types=.* is not supported"),
        ({"swiglu_limit": None}, "swiglu_limit=None is not supported"),
    ],
)
def test_what_zoo_cannot_build_is_refused_by_name(tmp_path, changes, message):
    with pytest.raises(HFImportError, match=message):
        imported(tmp_path, **changes)


def test_fused_experts_come_apart_and_back_bit_for_bit():
    g = torch.Generator().manual_seed(0)
    prefix = "model.layers.0.mlp.experts"
    fused = {
        f"{prefix}.gate_up_proj": torch.randn(3, 16, 2 * 8, generator=g),  # (X, E, 2H): gate, up interleaved
        f"{prefix}.gate_up_proj_bias": torch.randn(3, 2 * 8, generator=g),
        f"{prefix}.down_proj": torch.randn(3, 8, 16, generator=g),  # (X, H, E)
        f"{prefix}.down_proj_bias": torch.randn(3, 16, generator=g),
        "model.norm.weight": torch.randn(16, generator=g),
    }
    one = unfuse(fused)
    assert torch.equal(one[f"{prefix}.2.gate_proj.weight"], fused[f"{prefix}.gate_up_proj"][2, :, ::2].t())
    assert torch.equal(one[f"{prefix}.2.up_proj.bias"], fused[f"{prefix}.gate_up_proj_bias"][2, 1::2])
    assert torch.equal(one[f"{prefix}.1.down_proj.weight"], fused[f"{prefix}.down_proj"][1].t())
    again = fuse(one)
    assert sorted(again) == sorted(fused) and all(torch.equal(again[n], fused[n]) for n in fused)
