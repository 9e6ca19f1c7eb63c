"""Every attribute of each family's Hugging Face config is read by zoo's translation, checked by one of its
options, or named as not needed with the reason: a new option of a new transformers cannot pass unnoticed."""

from __future__ import annotations

import json

import pytest

from zoo.hf import FAMILIES
from zoo.hf.mapping import flatten

transformers = pytest.importorskip("transformers")

GENERIC = set(transformers.PretrainedConfig().to_dict())
"""What every config has (architectures, id2label, return_dict, ...): none of it shapes the network."""


def config_class(model_type: str):
    return transformers.AutoConfig.for_model(model_type).__class__


def attributes(model_type: str, generic: bool = True) -> set[str]:
    """The config's attributes, a nested config's (CLIP's ``text_config``) dotted; ``generic``: with the ones every
    config has (at the top or in a nested config)."""
    family = FAMILIES[model_type]
    config = config_class(model_type)().to_dict()
    names = set(flatten(config, family.nested))
    return names if generic else {n for n in names if n.rpartition(".")[2] not in GENERIC}


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_every_config_attribute_is_read_checked_or_named(model_type):
    family = FAMILIES[model_type]
    names = attributes(model_type, generic=False)
    read = set(family.defaults)
    checked = {option.key.split(".")[0] for option in family.options if option.key.split(".")[0] not in family.nested}
    checked |= {option.key for option in family.options}
    unaccounted = names - read - checked - set(family.unread_keys)
    assert not unaccounted, f"{model_type}: config attributes neither read, checked nor named: {sorted(unaccounted)}"


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_nothing_is_named_that_the_config_does_not_have(model_type):
    family = FAMILIES[model_type]
    stale = set(family.unread) - attributes(model_type)
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


def declared_defaults(cls) -> dict:
    """What a config class fills in for a key config.json leaves out: its dataclass fields' defaults (transformers
    5) or ``__init__``'s (4.x), and its ``default_theta`` for ``rope_theta``."""
    import dataclasses
    import inspect

    out = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            for f in dataclasses.fields(klass):
                if f.default is not dataclasses.MISSING:
                    out[f.name] = f.default
                elif f.default_factory is not dataclasses.MISSING:
                    out[f.name] = f.default_factory()
    for name, parameter in inspect.signature(cls.__init__).parameters.items():
        if parameter.default is not inspect.Parameter.empty:
            out.setdefault(name, parameter.default)
    if getattr(cls, "default_theta", None) is not None:
        out.setdefault("rope_theta", cls.default_theta)
    return out


SAME_NETWORK = {
    ("gpt_neo", "attention_types"): "GPTNeoConfig fills its None with zoo's default, [[['global', 'local'], 12]]",
    ("gemma3_text", "rope_theta"): "default_theta is {'global': 1e6, 'local': 1e4}: zoo's rope_theta and "
    "rope_local_base_freq",
    ("olmo3", "rope_theta"): "None: the full layers' base falls back to Olmo3Config's 500000 (olmo3.py)",
    ("apertus", "rope_parameters"): "ApertusConfig fills its None with zoo's default, Llama 3 scaling of 12e6",
    ("deepseek_v3", "num_key_value_heads"): "None: as many as the query heads, which MLA's latent always gives",
}
"""Family defaults that differ from what the config class declares, and why the network is the same."""


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_defaults_are_what_the_config_class_fills_in(model_type):
    """A config.json that leaves a key out means the config class's default: zoo fills in the same value."""
    declared = declared_defaults(config_class(model_type))
    family = FAMILIES[model_type]
    wrong = {
        key: (value, declared[key])
        for key, value in family.defaults.items()
        if key in declared and declared[key] != value and (model_type, key) not in SAME_NETWORK
    }
    assert not wrong, f"{model_type}: defaults (zoo, transformers) differ: {wrong}"
    assert all(key in family.defaults for (name, key) in SAME_NETWORK if name == model_type)


def rope_cases():
    """The first parity case of every family whose import reads a RoPE (its ``rope_parameters``)."""
    from tests.hf_cases import modules

    seen = {}
    for module in modules():
        for name, case in getattr(module, "CASES", {}).items():
            family = FAMILIES.get(case["family"])
            if family is not None and "rope_parameters" in family.defaults and case["family"] not in seen:
                seen[case["family"]] = (name, case)
    return [pytest.param(case, id=name) for name, case in seen.values()]


ROPE_KEYS = ("rope_theta", "rope_parameters", "rope_scaling", "rope_local_base_freq", "global_rope_theta")


def without_rope(config: dict) -> dict:
    """``config`` without its rope keys, at any depth (DBRX keeps its base in ``attn_config``)."""
    return {k: without_rope(v) if isinstance(v, dict) else v for k, v in config.items() if k not in ROPE_KEYS}


@pytest.mark.parametrize("case", rope_cases())
def test_a_config_without_rope_keys_imports_the_rope_transformers_fills_in(case, tmp_path):
    """config.json without rope keys: zoo's rope is the one written out as transformers fills it in."""
    from zoo.hf import hf_recipe

    family = FAMILIES[case["family"]]
    bare = {**without_rope(case["config"]), "model_type": family.model_type}
    filled = config_class(family.model_type).from_dict(dict(bare))
    imported = []
    for config in (bare, {**bare, "rope_parameters": filled.rope_parameters}):
        (tmp_path / "config.json").write_text(json.dumps(config))
        imported.append(hf_recipe(tmp_path))
    assert imported[0] == imported[1]
