"""zoo/hf/rope.py: every rope scaling read alike from transformers 5's ``rope_parameters`` and 4.x's
``rope_scaling`` (legacy ``type`` key included), written back so that it reads the same, Phi-3's legacy LongRoPE
names and top-level original length, what transformers computes that zoo does not refused by name, and the
scaling a family's config cannot say refused on export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import zoo
from zoo.errors import HFExportError, HFImportError
from zoo.hf import family_of, hf_recipe
from zoo.hf.io import CONFIG_FILE
from zoo.hf.rope import hf_rope_parameters, rope_spec
from zoo.recipe import load_recipe

ORIGINAL = "original_max_position_embeddings"
SHORT = [1.0, 1.1, 1.3, 1.6, 2.0, 2.5, 3.0, 4.0]
LONG = [1.0, 1.5, 2.5, 4.0, 6.0, 9.0, 12.0, 16.0]  # a factor for each of 8 pairs: heads of 16 dims

PARAMETERS = {
    # rope_type: (parameters after rope_type, zoo's rope spec with max_position_embeddings 64 and base 500)
    "linear": ({"factor": 4.0}, {"scaling": "linear", "scaling_factor": 4.0}),
    "dynamic": ({"factor": 2.0}, {"scaling": "dynamic", "scaling_factor": 2.0, "original_max_len": 64}),
    "yarn": (
        {"factor": 8.0, ORIGINAL: 16, "beta_fast": 0, "mscale": 0.7, "mscale_all_dim": 0.9, "truncate": False},
        {
            "scaling": "yarn",
            "scaling_factor": 8.0,
            "original_max_len": 16,
            "beta_fast": 32.0,  # transformers' `beta_fast or 32`
            "beta_slow": 1.0,
            "truncate": False,
            "mscale": 0.7,
            "mscale_all_dim": 0.9,
        },
    ),
    "yarn-factor-fallback": (
        {"factor": None, ORIGINAL: 16, "attention_factor": 1.5},
        {
            "scaling": "yarn",
            "scaling_factor": 4.0,  # max_position_embeddings / original, as transformers falls back
            "original_max_len": 16,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": True,
            "attention_factor": 1.5,
        },
    ),
    "longrope": (
        {"short_factor": SHORT, "long_factor": LONG, ORIGINAL: 8},
        {
            "scaling": "longrope",
            "scaling_factor": 8.0,
            "original_max_len": 8,
            "short_factor": SHORT,
            "long_factor": LONG,
        },
    ),
    "llama3": (
        {"factor": 8.0, "low_freq_factor": 2.0, "high_freq_factor": 8.0},  # no original: max_position_embeddings
        {
            "scaling": "llama3",
            "scaling_factor": 8.0,
            "low_freq_factor": 2.0,
            "high_freq_factor": 8.0,
            "original_max_len": 64,
        },
    ),
}


def kind(name: str) -> str:
    return name.split("-")[0]


@pytest.mark.parametrize("name", sorted(PARAMETERS))
def test_both_transformers_layouts_read_the_same_scaling(name):
    params, expected = PARAMETERS[name]
    base = {"max_position_embeddings": 64, "rope_theta": 10000.0, "rope_parameters": None, "rope_scaling": None}
    five = rope_spec({**base, "rope_parameters": {"rope_type": kind(name), "rope_theta": 500.0, **params}})
    four = rope_spec({**base, "rope_theta": 500.0, "rope_scaling": {"type": kind(name), **params}})
    assert five == four == {"type": "rope", "theta": 500.0, **expected}


@pytest.mark.parametrize("name", sorted(PARAMETERS))
def test_written_parameters_read_back_as_the_same_rope(name):
    rope = load_recipe("llama-tiny", max_len=64, positional={"type": "rope", **PARAMETERS[name][1]}).positional
    config = {"max_position_embeddings": 64, "rope_parameters": hf_rope_parameters(rope), "rope_scaling": None}
    assert load_recipe("llama-tiny", max_len=64, positional=rope_spec(config)).positional == rope


def hf_folder(tmp_path: Path, config: dict) -> Path:
    folder = tmp_path / "hf"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CONFIG_FILE).write_text(json.dumps(config))
    return folder


PHI3 = {"model_type": "phi3", "max_position_embeddings": 32, ORIGINAL: 8, "hidden_size": 128, "num_attention_heads": 8}


@pytest.mark.parametrize("legacy", ["longrope", "su", "yarn"])
def test_phi3_legacy_names_are_longrope_from_the_top_level_original_length(legacy, tmp_path):
    """Phi3Config renames ``su`` and ``yarn`` to ``longrope`` and prefers its own original length."""
    scaling = {"type": legacy, "short_factor": SHORT, "long_factor": LONG, ORIGINAL: 16}
    positional = hf_recipe(hf_folder(tmp_path, {**PHI3, "rope_scaling": scaling}))["positional"]
    assert positional == {
        "type": "rope",
        "theta": 10000.0,
        "scaling": "longrope",
        "scaling_factor": 4.0,  # 32 / 8: the default attention factor's
        "original_max_len": 8,
        "short_factor": SHORT,
        "long_factor": LONG,
        "rotary_fraction": 1.0,
    }


def test_phi3_exports_longrope_with_its_original_length_at_the_top(tmp_path):
    from zoo.hf import FAMILIES
    from zoo.hf.mapping import zoo_tensors

    scaling = {"type": "longrope", "short_factor": SHORT, "long_factor": LONG, "attention_factor": 1.2}
    recipe = load_recipe(hf_recipe(hf_folder(tmp_path, {**PHI3, "rope_scaling": scaling})))
    config = FAMILIES["phi3"].config(recipe, zoo_tensors(zoo.build(recipe, device="meta")))
    assert config[ORIGINAL] == config["rope_parameters"][ORIGINAL] == 8
    assert config["rope_parameters"]["attention_factor"] == 1.2


@pytest.mark.parametrize(
    "config, message",
    [
        (
            {"model_type": "llama", "rope_parameters": {"rope_type": "proportional", "rope_theta": 1e4}},
            "rope_parameters.rope_type='proportional' is not supported: zoo's rope computes the rope types",
        ),
        ({"model_type": "mistral", "rope_scaling": {"type": "dynamic"}}, "rope_type 'dynamic' needs its 'factor'"),
        ({**PHI3, "rope_scaling": {"type": "su", "short_factor": SHORT}}, "needs its short_factor and long_factor"),
        ({**PHI3, "rope_scaling": {"type": "dynamic", "factor": 2.0}}, "Phi3Config takes an unscaled rope or LongRoPE"),
        (
            {"model_type": "gemma3_text", "rope_parameters": {"full_attention": {"rope_type": "proportional"}}},
            "rope_parameters.full_attention.rope_type='proportional' is not supported",
        ),
    ],
)
def test_what_zoo_does_not_compute_is_refused_by_name(config, message, tmp_path):
    with pytest.raises(HFImportError, match=message):
        hf_recipe(hf_folder(tmp_path, config))


def test_gemma3_yarn_truncates_as_transformers_does(tmp_path):
    """transformers 5 reads ``truncate`` from the top of Gemma 3's nested parameters: it always truncates."""
    yarn = {"rope_type": "yarn", "rope_theta": 1e6, "factor": 8.0, ORIGINAL: 4096, "truncate": False}
    config = {"model_type": "gemma3_text", "num_hidden_layers": 6, "rope_parameters": {"full_attention": yarn}}
    recipe = load_recipe(hf_recipe(hf_folder(tmp_path, config)))
    rotary = recipe.layer_plan("decoder")[5]["attention"][0].rotary
    assert (rotary.scaling, rotary.original_max_len, rotary.truncate) == ("yarn", 4096, True)
    untruncated = recipe.to_dict()
    untruncated["layers"][0]["attention"]["rotary"]["truncate"] = False
    with pytest.raises(HFExportError, match="transformers' Gemma 3 always truncates YaRN's ramp"):
        family_of(load_recipe(untruncated))


def test_a_dynamic_rope_exports_with_the_model_length_as_its_original_one():
    dynamic = {"type": "rope", "scaling": "dynamic", "scaling_factor": 2.0, "original_max_len": 64}
    assert family_of(load_recipe("llama-tiny", max_len=64, positional=dynamic)).name == "llama"
    with pytest.raises(HFExportError, match=r"original_max_len is 64, needs max_len \(128\): transformers grows"):
        family_of(load_recipe("llama-tiny", positional=dynamic))
