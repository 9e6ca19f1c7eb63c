"""Named recipes of published checkpoints have exactly the parameters transformers builds from the published
config (both on the meta device: nothing is allocated, nothing downloaded)."""

from __future__ import annotations

import hf_cases
import pytest
import torch

import zoo

transformers = pytest.importorskip("transformers")

PUBLISHED = {name: spec for module in hf_cases.modules() for name, spec in getattr(module, "PUBLISHED", {}).items()}


@pytest.mark.parametrize("recipe", sorted(PUBLISHED))
def test_named_recipe_has_the_published_parameter_count(recipe):
    config_class, config = PUBLISHED[recipe]
    hf_config = getattr(transformers, config_class)(**config)
    with torch.device("meta"):
        hf = transformers.AutoModelForCausalLM.from_config(hf_config)
    expected = sum(p.numel() for p in hf.parameters())
    model = zoo.build(recipe, device="meta")
    assert zoo.count_parameters(model) == expected
    assert model.recipe.expect is not None and model.recipe.expect.parameters == expected
