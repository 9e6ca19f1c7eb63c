"""Gemma, Gemma 2 and Gemma 3 configs as published (transformers 4's keys): the layer patterns become ``layers:``
overrides, and what zoo cannot reproduce is refused by name. (Each imports as its named recipe:
tests/test_hf_published.py.)"""

from __future__ import annotations

import json

import pytest
from hf_cases import gemma, gemma2, gemma3

import zoo
from zoo.errors import HFImportError
from zoo.hf import hf_recipe

PUBLISHED = {**gemma.PUBLISHED, **gemma2.PUBLISHED, **gemma3.PUBLISHED}


def recipe_of(tmp_path, config: dict):
    (tmp_path / "config.json").write_text(json.dumps(config))
    return zoo.load_recipe(hf_recipe(tmp_path))


def test_gemma2_local_layers_are_the_even_ones(tmp_path):
    recipe = recipe_of(tmp_path, PUBLISHED["gemma-2-2b"][1])
    windows = [placed["attention"][0].window for placed in recipe.layer_plan("decoder")]
    assert windows == [4096 if i % 2 == 0 else None for i in range(26)]


def test_gemma3_global_layers_rotate_with_their_own_base(tmp_path):
    config = {**PUBLISHED["gemma-3-1b"][1], "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
    recipe = recipe_of(tmp_path, config)
    plan = recipe.layer_plan("decoder")
    assert [i for i, placed in enumerate(plan) if placed["attention"][0].window is None] == [5, 11, 17, 23]
    assert recipe.positional.theta == 10000.0 and recipe.positional.scaling == "none"  # local layers
    rotary = plan[5]["attention"][0].rotary  # rope_scaling scales the global layers only, as transformers does
    assert rotary.model_dump(exclude_unset=True) == {
        "type": "rope",
        "theta": 1000000.0,
        "scaling": "linear",
        "scaling_factor": 8.0,
    }


def test_irregular_layer_types_are_a_list_of_layers(tmp_path):
    types = ["full_attention", "sliding_attention", "sliding_attention", "full_attention", "full_attention"]
    config = {**PUBLISHED["gemma-2-2b"][1], "num_hidden_layers": 5, "layer_types": types}
    recipe = recipe_of(tmp_path, config)
    assert [o.select for o in recipe.layers] == [[1, 2]]


@pytest.mark.parametrize(
    "name,changes,message",
    [
        ("gemma-2b", {"use_bidirectional_attention": True}, "use_bidirectional_attention=True is not supported"),
        ("gemma-2b", {"hidden_act": "gelu_new"}, "hidden_act='gelu_new' is not supported"),
        ("gemma-2-2b", {"sliding_window": None}, "sliding_window=None with sliding_attention layers"),
        ("gemma-2-2b", {"layer_types": ["chunked_attention"] * 26}, "layer_types=.* is not supported"),
        ("gemma-2-2b", {"layer_types": ["full_attention"] * 3}, "layer_types has 3 entries"),
        (
            "gemma-3-1b",
            {"rope_parameters": {"full_attention": {"rope_type": "proportional", "rope_theta": 1e6}}},
            "rope_parameters.full_attention.rope_type='proportional' is not supported",
        ),
    ],
)
def test_what_zoo_cannot_reproduce_is_refused_by_name(name, changes, message, tmp_path):
    with pytest.raises(HFImportError, match=message):
        recipe_of(tmp_path, {**PUBLISHED[name][1], **changes})
