"""Named recipes of published checkpoints have exactly the parameters transformers builds from the published
config (both on the meta device: nothing is allocated, nothing downloaded)."""

from __future__ import annotations

import hf_cases
import pytest
import torch

import zoo

transformers = pytest.importorskip("transformers")

PUBLISHED = {name: spec for module in hf_cases.modules() for name, spec in getattr(module, "PUBLISHED", {}).items()}


def reference_class(config: dict):
    """The published class (a seq2seq or image model) where config.json names one, else the causal LM."""
    name = (config.get("architectures") or [""])[0]
    if name and not name.endswith("ForCausalLM"):
        return getattr(transformers, name)
    return transformers.AutoModelForCausalLM.from_config


@pytest.mark.parametrize("recipe", sorted(PUBLISHED))
def test_named_recipe_has_the_published_parameter_count(recipe):
    config_class, config = PUBLISHED[recipe]
    hf_config = getattr(transformers, config_class)(**config)
    with torch.device("meta"):
        hf = reference_class(config)(hf_config)
    expected = sum(p.numel() for p in hf.parameters())
    head, table = hf.get_output_embeddings(), hf.get_input_embeddings()
    if config.get("tie_word_embeddings") is False and head is not None and head.weight is table.weight:
        # Transformers 5 ties mT5's and UMT5's head whatever the config says, and unties it on loading a
        # checkpoint that holds its own lm_head.weight, as the published ones do.
        expected += head.weight.numel()
    model = zoo.build(recipe, device="meta")
    assert zoo.count_parameters(model) == expected
    assert model.recipe.expect is not None and model.recipe.expect.parameters == expected
