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


def test_the_readme_family_table_is_current():
    from pathlib import Path

    from zoo.hf import family_table

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    start = readme.index("<!-- family table:")
    start = readme.index("\n", start) + 1
    table = readme[start : readme.index("<!-- end of family table -->")].strip()
    assert table == family_table(), "README's family table is stale: run python tools/update_readme_families.py"


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_every_family_names_its_published_recipes_and_they_fit_it(model_type):
    import zoo
    from zoo.hf import family_of

    family = FAMILIES[model_type]
    assert family.recipes, f"{model_type}: no named recipe of a published checkpoint"
    for name in family.recipes:
        assert family_of(zoo.load_recipe(name)) is family, name
