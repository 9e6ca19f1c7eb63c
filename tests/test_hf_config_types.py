"""Mistyped config.json files: every family, every key it reads, each given a value of the wrong type or out of
range, imports as zoo computes it or is refused with one HFImportError naming the key. Never another exception,
never a hang, and never a default in place of a value that was given."""

from __future__ import annotations

import json

import pytest

from zoo.errors import HFImportError
from zoo.hf import FAMILIES, hf_recipe
from zoo.hf.checks import EITHER, OBJECTS, POSITIVE, RANGES
from zoo.hf.mapping import flatten, nest


def first_cases():
    from tests.hf_cases import modules

    seen = {}
    for module in modules():
        for case in getattr(module, "CASES", {}).values():
            if case["family"] in FAMILIES and case["family"] not in seen:
                seen[case["family"]] = case
    return [pytest.param(case, id=family) for family, case in sorted(seen.items())]


def wrong_values(key, default):
    """Values of another JSON type than ``default``'s, and for sizes and counts, out of their range."""
    if isinstance(default, bool):
        out = ["true", 1, [True]]
    elif isinstance(default, int | float):
        out = [str(default), [default], {"value": default}, True]
    elif isinstance(default, str):  # a number may stand for "auto"
        out = [True, [default], {"name": default}]
    elif isinstance(default, list):
        out = [5, "list", {"a": 1}]
    elif isinstance(default, dict):
        out = [5, "dict", [1, 2]]
    else:
        out = []
    if key in RANGES:
        out += [RANGES[key][0] - 1, 1e30, 10**30, 2.5, "32"]
    if key in POSITIVE:
        out += [0, -1.0, float("nan"), "abc"]
    if key in OBJECTS:
        out += [[1, 2], "linear", 5]
    return out


@pytest.mark.parametrize("case", first_cases())
def test_every_mistyped_key_is_refused_by_name(case, tmp_path):
    family = FAMILIES[case["family"]]
    base = {**case["config"], "model_type": family.model_type}
    known = [*family.defaults, *(k for k in OBJECTS if k not in family.defaults)]
    typed = [k for k in known if family.defaults.get(k) is not None or k in RANGES or k in POSITIVE or k in OBJECTS]
    keys = [k for k in typed if k not in EITHER]
    tried = 0
    for key in keys:
        for value in wrong_values(key, family.defaults.get(key)):
            config = nest({**flatten(base, family.nested), key: value}, family.nested)  # CLIP's keys in their config
            (tmp_path / "config.json").write_text(json.dumps(config))
            tried += 1
            try:
                hf_recipe(tmp_path)
            except HFImportError as exc:
                assert key in str(exc), (key, value, str(exc))
            except Exception as exc:  # noqa: BLE001 - the point: nothing but HFImportError escapes
                pytest.fail(f"{family.name}: {key}={value!r} raised {type(exc).__name__}: {exc}")
            else:
                pytest.fail(f"{family.name}: {key}={value!r} imported instead of being refused")
    assert tried > 0


def test_top_level_types_are_refused_by_name(tmp_path):
    for config, said in (
        ({"model_type": ["gpt2"]}, "model_type ['gpt2'] is not supported"),
        ({"model_type": "gpt2", "architectures": 5}, "architectures=5 must be a list of class names"),
        ({"model_type": "llama", "rope_theta": 0}, "rope_theta=0 must be a finite number above 0"),
        ({"model_type": "llama", "rope_parameters": {"rope_theta": 0}}, "rope_theta=0 must be a finite number"),
        ({"model_type": "gpt2", "n_embd": "32"}, "n_embd='32' must be an integer"),
        ({"model_type": "qwen2_moe", "num_hidden_layers": 1e30}, "num_hidden_layers=1e+30 must be an integer"),
        ({"model_type": "gpt_neox", "num_attention_heads": 0}, "num_attention_heads=0 is out of range"),
        ({"model_type": "llama", "rope_scaling": [1, 2]}, "rope_scaling=[1, 2] must be an object"),
        ({"model_type": "bert", "num_labels": "x"}, "num_labels='x' must be an integer"),
    ):
        (tmp_path / "config.json").write_text(json.dumps(config))
        with pytest.raises(HFImportError, match=said.replace("[", r"\[").replace("]", r"\]").replace("+", r"\+")):
            hf_recipe(tmp_path)
