"""The families added as tables: what each refuses by name (a config zoo cannot compute exactly never imports),
and the recipes their configs import as."""

from __future__ import annotations

import json

import pytest

from zoo.hf import HFImportError, hf_recipe

REFUSED = [
    (
        {"model_type": "phimoe", "lm_head_bias": True, "tie_word_embeddings": True},
        "lm_head_bias=True with tie_word_embeddings=True is not supported: PhiMoE's tied head keeps a bias",
    ),
    ({"model_type": "olmoe", "clip_qkv": 8.0}, "clip_qkv=8.0 is not supported: OLMoE clamps the queries and keys"),
    ({"model_type": "arcee", "hidden_act": "relu6"}, "hidden_act='relu6' is not supported: zoo's MLP applies"),
    ({"model_type": "helium", "hidden_act": "tanh"}, "hidden_act='tanh' is not supported: zoo's gated FFNs apply"),
    (
        {"model_type": "exaone4", "sliding_window_pattern": "LLLG", "num_hidden_layers": 4},
        "sliding_window_pattern='LLLG' without layer_types: Exaone4Config derives layer types from an integer",
    ),
]


@pytest.mark.parametrize(("config", "message"), REFUSED, ids=[c["model_type"] for c, _ in REFUSED])
def test_what_zoo_cannot_compute_is_refused_by_name(config, message, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(HFImportError, match=message):
        hf_recipe(tmp_path)


def test_seed_oss_keeps_its_family_though_its_network_is_qwen2s(tmp_path):
    config = {"model_type": "seed_oss", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1}
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert hf_recipe(tmp_path)["hf_family"] == "seed_oss"
