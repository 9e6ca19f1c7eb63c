"""Bad recipes: each error names the field path, the cause and a fix; every error is reported at once."""

from __future__ import annotations

from typing import Literal

import pytest
import torch
from clean_errors import BASE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zoo
from zoo.config import ComponentConfig
from zoo.recipe import deep_merge

MOE = {"type": "moe", "num_experts": 2, "top_k": 1, "expert": {"type": "swiglu", "hidden": 8}}

BAD = [
    (
        {"attention": {"type": "mah"}},
        r"^attention\.type: unknown attention type 'mah' \(did you mean '(mha|mqa)'\?\); "
        r"registered: (\w+, )*gqa, (\w+, )*mha, (\w+, )*mqa",
    ),
    (
        {"attention": {"type": "gqa", "num_heads": 4, "num_kv_heads": 3}},
        r"^attention: num_heads \(4\) must be divisible by num_kv_heads \(3\)",
    ),
    (
        {"attention": {"num_heads": 5}},
        r"^attention: d_model \(32\) must be divisible by num_heads \(5\), or set head_dim",
    ),
    ({"ffn": {**MOE, "top_k": 3}}, r"^ffn: top_k \(3\) must be <= num_experts \(2\)"),
    (
        {"ffn": {**MOE, "expert": {"type": "swiglu", "hiden": 8}}},
        r"^ffn\.expert\.hiden: unknown key \(did you mean 'hidden'\?\)",
    ),
    (
        {"ffn": {**MOE, "expert": {"type": "swigl"}}},
        r"^ffn\.expert\.type: unknown ffn type 'swigl' \(did you mean 'swiglu'\?\)",
    ),
    ({"positional": {"type": "rope", "rotary_fraction": 0.625}}, r"^positional: rope rotates 5 of 8 head dims"),
    ({"num_layer": 2}, r"^num_layer: unknown key \(did you mean 'num_layers'\?\)"),
    ({"dropout": "high"}, r"^dropout: Input should be a valid number.*\(got 'high'\)"),
    ({"architecture": "decodr"}, r"^architecture: unknown architecture type 'decodr' \(did you mean 'decoder'\?\)"),
    (
        {"layers": [{"select": "1:x", "ffn": {"type": "mlp"}}]},
        r"^layers\.0\.select: layer selector '1:x' is not an index",
    ),
    ({"layers": [{"select": 1, "ffn": {"type": "mlp", "hiden": 3}}]}, r"^layers\.0\.ffn\.hiden: unknown key"),
    ({"head": {"type": "lm", "bias": True}}, r"^head: a tied LM head has no bias"),
    ({"vocab_size": None}, r"^vocab_size: required by architecture 'decoder'"),
    ({"train": {"seq_len": 17}}, r"^train\.seq_len: 17 positions do not fit the learned position table of max_len 16"),
    ({"attention": "nope"}, r"^attention\.type: unknown attention type 'nope'"),
    ({"attention": 3}, r"^attention: a attention spec must be a mapping"),
    ({"attention": {"num_heads": 4, "type": None}}, r"^attention\.type: required: the attention type to use"),
    (
        {"embedding": {"type": "token", "padding_idx": 64}},
        r"^embedding: padding_idx \(64\) must be < vocab_size \(64\)",
    ),
    (
        {
            "architecture": "vit",
            "image_size": 30,
            "patch_size": 4,
            "num_classes": 3,
            "embedding": {"type": "patch"},
            "head": {"type": "classification"},
        },
        r"^patch_size: image_size \(30\) must be divisible by patch_size \(4\)",
    ),
    (
        {
            "architecture": "vit",
            "image_size": 32,
            "patch_size": 4,
            "num_classes": 3,
            "max_len": 10,
            "embedding": {"type": "patch"},
            "head": {"type": "classification"},
        },
        r"^max_len: must equal the number of patch tokens \(65\) for vit",
    ),
]


@pytest.mark.parametrize(("change", "message"), BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_recipe_message(change, message):
    with pytest.raises(zoo.RecipeError, match=message):
        zoo.load_recipe(deep_merge(BASE, change))


def test_every_error_is_reported_at_once():
    with pytest.raises(zoo.RecipeError) as info:
        zoo.load_recipe(deep_merge(BASE, {"d_model": 0, "num_layers": -1, "attention": {"type": "mah"}, "x": 1}))
    paths = [path for path, _ in info.value.errors]
    assert paths == ["attention.type", "d_model", "num_layers", "x"]
    assert str(info.value).startswith("4 errors in recipe")


def test_file_errors_name_the_file_line_and_column(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nattention: {type: mha\nffn: 1\n")
    # libyaml's wording, or PyYAML's where libyaml is not installed.
    expected = (
        r"bad\.yaml: line 3, column 4: invalid YAML: "
        r"(did not find expected .,. or .}.|expected .,. or .}., but got .:.)"
    )
    with pytest.raises(zoo.RecipeError, match=expected):
        zoo.load_recipe(bad)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(zoo.RecipeError, match=r"empty\.yaml: the recipe file is empty"):
        zoo.load_recipe(empty)
    with pytest.raises(
        zoo.RecipeError, match=r"no recipe file or named recipe 'gpt2-smal' \(did you mean 'gpt2-small'"
    ):
        zoo.load_recipe("gpt2-smal")


def test_yaml_cannot_execute_code(tmp_path):
    evil = tmp_path / "evil.yaml"
    evil.write_text("name: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(zoo.RecipeError, match="invalid YAML"):
        zoo.load_recipe(evil)


def test_extends_merges_deeply_and_replaces_a_changed_type(tmp_path):
    child = tmp_path / "child.yaml"
    child.write_text("extends: gpt-tiny\nname: child\nattention: {num_heads: 2}\nffn: {type: swiglu, hidden: 32}\n")
    recipe = zoo.load_recipe(child)
    assert recipe.attention.num_heads == 2 and recipe.attention.type == "mha"
    assert recipe.ffn.type == "swiglu" and recipe.ffn.hidden == 32
    assert recipe.vocab_size == 256
    loop = tmp_path / "loop.yaml"
    loop.write_text("extends: loop.yaml\nname: loop\n")
    with pytest.raises(zoo.RecipeError, match="extends: cycle"):
        zoo.load_recipe(loop)


def test_causal_only_component_refused_in_an_encoder(register_plugin):
    class CausalOnlyConfig(ComponentConfig):
        type: Literal["causal-only"] = "causal-only"
        requires_causal = True
        num_heads: int = 4

    class Plugin:
        @zoo.hookimpl
        def register_components(self, register):
            attention = zoo.get_registry().get("attention", "mha").factory
            register("attention", "causal-only", attention, CausalOnlyConfig)

    register_plugin(Plugin(), "causal-only-plugin")
    zoo.load_recipe(deep_merge(BASE, {"attention": {"type": "causal-only"}}))  # fine in a decoder
    with pytest.raises(zoo.RecipeError, match=r"attention: attention 'causal-only' needs a causal \(decoder\) stack"):
        zoo.load_recipe(deep_merge(BASE, {"architecture": "encoder", "attention": {"type": "causal-only"}}))


def _errors(source, **overrides) -> list[tuple[str, str]]:
    with pytest.raises(zoo.RecipeError) as info:
        zoo.load_recipe(source, **overrides)
    return info.value.errors


ROPE_KNOCK_ON = "rope rotates"


def test_a_failed_spec_does_not_hide_the_rules_of_the_rest():
    # The kv-heads rule fails the attention spec; the d_model / num_heads rule is still checked.
    errors = _errors("llama-3.2-1b", d_model=100, **{"attention.num_kv_heads": 3})
    assert errors == [
        ("attention", "num_heads (32) must be divisible by num_kv_heads (3)"),
        ("attention", "d_model (100) must be divisible by num_heads (32), or set head_dim"),
    ]


def test_one_wrong_head_count_is_one_error_without_a_rotary_knock_on():
    errors = _errors("llama-3.2-1b", d_model=100)
    assert errors == [("attention", "d_model (100) must be divisible by num_heads (32), or set head_dim")]
    assert not any(ROPE_KNOCK_ON in m for _, m in errors)


def test_a_component_that_failed_outright_is_skipped_by_the_rules_that_read_it():
    # An unknown attention type: nothing about heads is known, so rope is not checked against them.
    errors = _errors("llama-tiny", **{"attention.type": "mah"})
    assert [p for p, _ in errors] == ["attention.type"]
    # An unknown ffn type leaves the attention's own rules to run.
    errors = _errors(deep_merge(BASE, {"ffn": {"type": "nope"}, "attention": {"num_heads": 5}}))
    assert [p for p, _ in errors] == ["ffn.type", "attention"]
    assert errors[1][1] == "d_model (32) must be divisible by num_heads (5), or set head_dim"


def test_rules_still_run_beside_an_unknown_key_and_a_nested_spec():
    errors = _errors(deep_merge(BASE, {"x": 1, "attention": {"num_heads": 5}}))
    assert [p for p, _ in errors] == ["x", "attention"]
    # A model-level rule of an MoE (top_k) and its expert's own spec are both reported.
    errors = _errors(deep_merge(BASE, {"ffn": {**MOE, "top_k": 3, "expert": {"type": "swiglu", "hiden": 8}}}))
    assert [p for p, _ in errors] == ["ffn", "ffn.expert.hiden"]


# ---------------------------------------------------------------------------------------------- fuzzing

MUTATION_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 300),
    st.floats(-2, 2),
    st.just(float("nan")),
    st.just(float("inf")),
    st.text(max_size=8),
    st.lists(st.integers(-2, 5), max_size=3),
    st.sampled_from(["mha", "gqa", "rope", "moe", "swiglu", "alibi", "1::2", "all"]),
    st.dictionaries(st.sampled_from(["type", "num_heads", "hidden", "x"]), st.integers(-1, 9), max_size=3),
)
KEYS = [
    "d_model",
    "num_layers",
    "max_len",
    "vocab_size",
    "dropout",
    "architecture",
    "norm_position",
    "nonsense",
    "attention",
    "attention.type",
    "attention.num_heads",
    "attention.num_kv_heads",
    "attention.head_dim",
    "attention.scale",
    "positional",
    "positional.type",
    "positional.rotary_fraction",
    "ffn",
    "ffn.type",
    "ffn.hidden",
    "ffn.num_experts",
    "ffn.top_k",
    "ffn.expert",
    "ffn.expert.type",
    "norm.type",
    "norm.eps",
    "head.type",
    "head.tie_embeddings",
    "embedding.type",
    "layers",
    "expect.parameters",
    "image_size",
]
STARTS = ["gpt-tiny", "llama-tiny", "moe-tiny", "bert-tiny", "t5-tiny", "vit-tiny"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    start=st.sampled_from(STARTS),
    changes=st.lists(st.tuples(st.sampled_from(KEYS), MUTATION_VALUES), max_size=3),
    delete=st.lists(st.sampled_from(["d_model", "attention", "ffn", "architecture", "name"]), max_size=1),
)
def test_any_mutation_builds_or_raises_recipe_error(start, changes, delete):
    data = zoo.load_recipe(start).to_dict()
    for key in delete:
        data.pop(key, None)
    try:  # an override that cannot apply (a key under what became a list) is a RecipeError too
        for key, value in changes:
            data = deep_merge(data, zoo.recipe.overrides_to_tree({key: value}))
        model = zoo.build(data, device="meta")
    except zoo.RecipeError:
        return
    assert isinstance(model, torch.nn.Module)
