"""Every attribute of each family's Hugging Face config is read by zoo's translation, checked by one of its
options, or named as not needed with the reason: a new option of a new transformers cannot pass unnoticed."""

from __future__ import annotations

import pytest

from zoo.hf import FAMILIES

transformers = pytest.importorskip("transformers")

GENERIC = set(transformers.PretrainedConfig().to_dict())
"""What every config has (architectures, id2label, return_dict, ...): none of it shapes the network."""


def config_class(model_type: str):
    return transformers.AutoConfig.for_model(model_type).__class__


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_every_config_attribute_is_read_checked_or_named(model_type):
    family = FAMILIES[model_type]
    attributes = set(config_class(model_type)().to_dict()) - GENERIC
    read = set(family.defaults)
    checked = {option.key.split(".")[0] for option in family.options}
    unaccounted = attributes - read - checked - set(family.unread_keys)
    assert not unaccounted, f"{model_type}: config attributes neither read, checked nor named: {sorted(unaccounted)}"


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_nothing_is_named_that_the_config_does_not_have(model_type):
    family = FAMILIES[model_type]
    attributes = set(config_class(model_type)().to_dict())
    stale = set(family.unread) - attributes
    assert not stale, f"{model_type}: 'unread' names keys its config does not have: {sorted(stale)}"
