"""The older decoder families written as tables (gpt_bigcode, gpt_neo, codegen, persimmon, xglm, biogpt): what
each refuses by name, and that a family whose networks include an older family's leaves that family its exports."""

from __future__ import annotations

import json
import re

import pytest

import zoo
from zoo.hf import FAMILIES, HFImportError, family_of, hf_recipe
from zoo.hf.mapping import zoo_tensors

REFUSED = [
    ({"model_type": "gpt_bigcode", "add_cross_attention": True}, "add_cross_attention=True is not supported"),
    ({"model_type": "gpt_bigcode", "activation_function": "tanh"}, "activation_function='tanh' is not supported"),
    (
        {"model_type": "gpt_neo", "num_layers": 3, "attention_types": [[["global", "local"], 1]]},
        "attention_types=[[['global', 'local'], 1]] is not supported: zoo builds num_layers (3) layers",
    ),
    (
        {"model_type": "gpt_neo", "num_layers": 2, "attention_types": [[["global", "sparse"], 1]]},
        "each global or local",
    ),
    ({"model_type": "codegen", "tie_word_embeddings": True}, "CodeGen's LM head has a bias, zoo's tied head none"),
    ({"model_type": "codegen", "rotary_dim": None}, "rotary_dim=None is not supported: with n_head=16"),
    ({"model_type": "codegen", "n_embd": 64, "n_head": 4, "rotary_dim": 5}, "rope rotates 5 of 16 head dims"),
    ({"model_type": "persimmon", "hidden_act": "tanh"}, "hidden_act='tanh' is not supported: zoo's MLP applies"),
    (
        {"model_type": "persimmon", "rope_parameters": {"rope_type": "proportional", "rope_theta": 1.0}},
        "rope_type='proportional' is not supported",
    ),
    ({"model_type": "xglm", "pad_token_id": 5}, "pad_token_id=5 is not supported: XGLM zeroes row pad_token_id"),
    ({"model_type": "xglm", "add_cross_attention": True}, "add_cross_attention=True is not supported"),
    ({"model_type": "biogpt", "hidden_act": "tanh"}, "hidden_act='tanh' is not supported"),
]


@pytest.mark.parametrize(("config", "message"), REFUSED, ids=[m for _, m in REFUSED])
def test_what_zoo_cannot_compute_is_refused_by_name(config, message, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(HFImportError, match=re.escape(message)):
        hf_recipe(tmp_path)


@pytest.mark.parametrize(("named", "elder", "family"), [("gpt-j-6b", "gptj", "codegen"), ("opt-125m", "opt", "biogpt")])
def test_a_recipe_of_an_elder_family_exports_as_it_unless_it_names_the_newer(named, elder, family):
    recipe = zoo.load_recipe(named)
    assert recipe.hf_family is None
    assert family_of(recipe) is FAMILIES[elder]
    assert family_of(zoo.load_recipe(named, hf_family=family)) is FAMILIES[family]
    assert "name hf_family: " + family in "; ".join(FAMILIES[family].misfits(recipe))


LOCAL = {"type": "mha", "num_heads": 12, "dropout": 0.0, "scale": 1.0, "bias": False, "o_bias": True, "window": 256}


@pytest.mark.parametrize(
    ("select", "types"),
    [
        ("2::3", [[["global", "global", "local"], 4]]),
        ([0], [[["local"] + ["global"] * 11, 1]]),
        ("1::2", [[["global", "local"], 6]]),
    ],
)
def test_gpt_neo_writes_attention_types_as_the_shortest_pattern_that_repeats(select, types):
    recipe = zoo.load_recipe("gpt-neo-125m", layers=[{"select": select, "attention": LOCAL}])
    config = FAMILIES["gpt_neo"].config(recipe, zoo_tensors(zoo.build(recipe, device="meta")))
    assert config["attention_types"] == types and config["window_size"] == 256
