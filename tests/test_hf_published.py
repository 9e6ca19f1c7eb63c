"""Named recipes of published checkpoints: the published config.json imports as the named recipe, and the named
recipe has exactly the parameters transformers builds from that config (both on the meta device: nothing is
allocated, nothing downloaded). Every ``PUBLISHED`` config of ``tests/hf_cases`` is checked both ways."""

from __future__ import annotations

import json
from typing import Any

import hf_cases
import pytest
import torch

import zoo
from zoo.hf import family_of, hf_recipe

PUBLISHED = {name: spec for module in hf_cases.modules() for name, spec in getattr(module, "PUBLISHED", {}).items()}

IMPORTED_FROM = {
    # The FP8 checkpoint dequantised to bf16: the same config without its quantization_config (the FP8 one is
    # refused by name: tests/test_hf_moe_families.py).
    "deepseek-v3": lambda config: {k: v for k, v in config.items() if k != "quantization_config"},
}
TRAINING_DROPOUT = {"mt5-small": 0.1, "umt5-small": 0.1, "gpt2-small": 0.1, "bert-base": 0.1, "t5-small": 0.1}
"""The published config's attention dropout, which the shipped recipe (meant for inference and fine-tuning from
zero dropout) sets to 0."""


def network(recipe) -> dict[str, Any]:
    """The recipe's network as data: MQA spelled as GQA with one K/V head (the import's spelling), the embedding
    and final norms as the stack builds them, and no ``hf_family`` (the family is compared by ``family_of``)."""
    data = recipe.model_dump(mode="json", exclude={"name", "description", "expect", "train", "hf_family"})
    for attention in [data["attention"], *(o["attention"] for o in data["layers"] if o["attention"])]:
        if attention["type"] == "mqa":
            attention.update(type="gqa", num_kv_heads=1)
    pre = recipe.block.pre_norm
    data["embed_norm"] = recipe.embed_norm if recipe.embed_norm is not None else not pre
    data["final_norm"] = recipe.final_norm if recipe.final_norm is not None else pre
    if recipe.vision is not None:  # a dual-encoder's image tower, a recipe of its own
        data["vision"] = network(recipe.vision)
    return data


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_the_published_config_imports_as_the_named_recipe(name, tmp_path):
    config = IMPORTED_FROM.get(name, lambda config: config)(PUBLISHED[name][1])
    (tmp_path / "config.json").write_text(json.dumps(config))
    imported, shipped = zoo.load_recipe(hf_recipe(tmp_path)), zoo.load_recipe(name)
    assert family_of(imported).model_type == family_of(shipped).model_type == config["model_type"]
    expected = network(imported)
    if name in TRAINING_DROPOUT:
        assert expected["attention"]["dropout"] == TRAINING_DROPOUT[name] and shipped.attention.dropout == 0
        expected["attention"]["dropout"] = 0.0
    assert expected == network(shipped)


def reference_class(transformers: Any, config: dict):
    """The published class (a seq2seq or image model) where config.json names one, else the causal LM."""
    name = (config.get("architectures") or [""])[0]
    if name and not name.endswith("ForCausalLM"):
        return getattr(transformers, name)
    return transformers.AutoModelForCausalLM.from_config


@pytest.mark.parametrize("recipe", sorted(PUBLISHED))
def test_named_recipe_has_the_published_parameter_count(recipe):
    transformers = pytest.importorskip("transformers")
    config_class, config = PUBLISHED[recipe]
    hf_config = getattr(transformers, config_class)(**config)
    with torch.device("meta"):
        hf = reference_class(transformers, config)(hf_config)
    expected = sum(p.numel() for p in hf.parameters())
    tied = config.get("tie_word_embeddings") is False  # only then can a head be tied against the config
    head, table = (hf.get_output_embeddings(), hf.get_input_embeddings()) if tied else (None, None)
    if head is not None and head.weight is table.weight:
        # Transformers 5 ties mT5's and UMT5's head whatever the config says, and unties it on loading a
        # checkpoint that holds its own lm_head.weight, as the published ones do.
        expected += head.weight.numel()
    model = zoo.build(recipe, device="meta")
    assert zoo.count_parameters(model) == expected
    assert model.recipe.expect is not None and model.recipe.expect.parameters == expected


def test_every_named_recipe_of_a_family_has_its_published_config():
    from zoo.hf import FAMILIES

    missing = [(f.name, name) for f in FAMILIES.values() for name in f.recipes if name not in PUBLISHED]
    assert not missing, f"named recipes without a PUBLISHED config in tests/hf_cases: {missing}"
