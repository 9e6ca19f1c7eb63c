"""The families written as tables (``zoo/hf/table.py``): each config key a table names goes to the recipe and
comes back to the same value, every key it reads it writes, and ``derive`` states a family as its difference."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_hf import CASES

import zoo
from zoo.hf import FAMILIES, Family
from zoo.hf.mapping import zoo_tensors
from zoo.hf.table import Computed, Key, Unread

TABLES = {family.name: family for family in FAMILIES.values() if family.table is not None}  # as cases name them
TABLE_CASES = sorted(name for name, case in CASES.items() if case.family in TABLES)


def round_trip(family: Family, config: dict, hf_class: str) -> tuple[dict, object, dict]:
    """(config with defaults, the recipe it imports as, the config that recipe exports as)."""
    config = {**family.defaults, **config}
    recipe = zoo.load_recipe({"name": "probe", **family.recipe(config, hf_class, None)})
    model = zoo.build(recipe, device="meta")
    return config, recipe, family.config(recipe, zoo_tensors(model))


def test_the_llama_line_is_written_as_tables():
    assert {"llama", "mixtral", "mistral", "qwen2", "qwen3"} <= set(TABLES)


def test_the_neox_line_is_written_as_tables():
    assert {"gpt_neox", "gptj", "falcon", "phi", "stablelm", "opt", "bloom"} <= set(TABLES)


@pytest.mark.parametrize("name", TABLE_CASES)
def test_every_key_goes_to_the_recipe_and_back_to_the_same_value(name):
    case = CASES[name]
    family = TABLES[case.family]
    config, recipe, exported = round_trip(family, case.config, case.hf_class)
    unwritten = {
        key for row in family.table.rows if isinstance(row, Computed) for key in (*row.legacy, *row.conditional)
    }
    missing = set(family.defaults) - set(exported) - unwritten
    assert not missing, f"{family.name} reads these keys but does not write them: {sorted(missing)}"
    for row in family.table.rows:
        if isinstance(row, Key):
            assert row.read(exported[row.hf]) == row.read(config[row.hf]), row.hf
    assert family.misfits(recipe) == []
    assert round_trip(family, exported, case.hf_class)[2] == exported  # the network's config is a fixed point


def test_derive_replaces_adds_and_drops_rows_and_changes_defaults():
    llama, mistral = FAMILIES["llama"], FAMILIES["mistral"]
    assert mistral.rules == llama.rules and mistral.ignored == llama.ignored
    assert mistral.defaults["intermediate_size"] == 14336 and llama.defaults["intermediate_size"] == 11008
    assert "attention_bias" in llama.defaults and "attention_bias" not in mistral.defaults
    assert mistral.defaults["sliding_window"] == 4096 and "sliding_window" not in llama.defaults
    assert mistral.hf_class(None) == "MistralForCausalLM"
    assert "pretraining_tp" in llama.unread and "pretraining_tp" not in mistral.unread
    variant = llama.derive("variant", classes=("VariantForCausalLM",), rows=(Unread("extra", "why"),))
    assert variant.unread["extra"] == "why" and variant.rules == llama.rules
    with pytest.raises(ValueError, match=r"defaults for keys no row reads: \['nonexistent'\]"):
        llama.derive("broken", classes=("X",), defaults={"nonexistent": 1})
    by_hand = replace(llama, name="by_hand", table=None)  # a family whose recipe and config are written by hand
    with pytest.raises(ValueError, match="by_hand is not written as a table; derive from one that is"):
        by_hand.derive("broken", classes=("X",))


def test_a_component_field_no_row_writes_must_hold_its_default():
    recipe = zoo.load_recipe("llama-tiny", **{"attention.softcap": 30.0, "block.parallel": True})
    problems = FAMILIES["llama"].misfits(recipe)
    assert "block.parallel is True, needs False" in problems
    assert "attention.softcap is 30.0, needs None" in problems


def test_rows_declare_what_they_own():
    for family in TABLES.values():
        for row in family.table.rows:
            if isinstance(row, Computed):
                assert row.paths, f"{family.name}: {row.name} owns no recipe path"
