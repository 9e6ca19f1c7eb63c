"""What a new user meets at the command line: --version, completion, --json on every listing and inspecting
command, --set on validate, listings that hold at 80 columns, a type switch that keeps what still applies,
saved recipes that speak only of their architecture, and a summary that shows torchinfo's module tree but
none of its totals."""

from __future__ import annotations

import json
import re
import warnings

import pytest
from clean_errors import BASE, assert_clean_error
from rich.cells import cell_len
from typer.testing import CliRunner

import zoo
from zoo.cli import app
from zoo.cli.build import complete_recipe
from zoo.cli.registry import plain_doc
from zoo.errors import RecipeWarning
from zoo.recipe import load_recipe


def run(*args: str, columns: int = 120):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)})


def ok(*args: str, columns: int = 120) -> str:
    result = run(*args, columns=columns)
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_version():
    assert ok("--version").strip() == f"zoo {zoo.__version__}"


def test_shell_completion_script_and_recipe_names(tmp_path, monkeypatch):
    assert "_zoo_completion" in ok("--show-completion", "bash")
    assert complete_recipe("gpt2") == ["gpt2-small"]
    assert {"gpt-tiny", "gpt2-small"} <= set(complete_recipe("gpt"))
    assert all(name.startswith("gpt") for name in complete_recipe("gpt"))
    (tmp_path / "mine.yaml").write_text("x")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "runs").mkdir()
    monkeypatch.chdir(tmp_path)
    assert complete_recipe("")[-2:] == ["mine.yaml", "runs/"]  # files of recipes and folders, nothing else
    assert "notes.txt" not in complete_recipe("")


# ---------------------------------------------------------------------------------------------- --json


def test_list_json_has_every_component_with_its_options():
    data = json.loads(ok("list", "--json"))
    gqa = next(c for c in data if c["kind"] == "attention" and c["name"] == "gqa")
    assert gqa["plugin"] == "zoo.components.attention" and gqa["version"] == zoo.__version__
    assert {"name": "num_kv_heads", "type": "int", "default": None, "required": True} in gqa["options"]
    assert len(data) == len(zoo.list_components())


def test_recipes_and_plugins_json():
    recipes = {r["name"]: r for r in json.loads(ok("recipes", "--json"))}
    assert recipes["gpt2-small"]["parameters"] == 124_439_808 and recipes["gpt2-small"]["architecture"] == "decoder"
    plugins = {p["name"]: p for p in json.loads(ok("plugins", "--json"))}
    assert {"mha", "gqa", "mqa", "moa"} <= set(plugins["zoo.components.attention"]["registered"]["attention"])


def test_build_json_is_the_component_tree():
    data = json.loads(ok("build", "gpt-tiny", "--device", "meta", "--json"))
    assert data["parameters"] == 124_672 and data["device"] == "meta"
    kinds = set()

    def walk(node):
        kinds.add(node["kind"])
        for child in node["children"]:
            walk(child)

    walk(data["tree"])
    assert {"attention", "ffn", "norm", "embedding", "head"} <= kinds


def test_validate_json_and_set(tmp_path):
    (tmp_path / "r.yaml").write_text(json.dumps(BASE))
    results = json.loads(ok("validate", str(tmp_path / "r.yaml"), "gpt-tiny", "--json"))
    assert [r["ok"] for r in results] == [True, True]
    bad = run("validate", str(tmp_path / "r.yaml"), "--set", "attention.num_heads=5", "--json")
    assert bad.exit_code == 2
    (result,) = json.loads(bad.output)
    assert not result["ok"] and "num_heads" in result["error"]
    assert_clean_error(run("validate", "gpt-tiny", "--set", "d_model=65"), "1 of 1 recipes are invalid")


# ---------------------------------------------------------------------------------------------- at 80 columns


def test_list_at_80_columns_breaks_no_word_and_shows_no_markup():
    out = ok("list", columns=80)
    assert "``" not in out and ":class:" not in out
    assert max(cell_len(line.rstrip()) for line in out.splitlines()) <= 80
    words = set(out.split())
    for c in zoo.list_components():
        assert c.name in words
        for word in plain_doc(c.description).split():
            assert word in words, (c.name, word)  # each word whole, on one line


def test_plain_doc_takes_out_rst():
    assert (
        plain_doc("penalises by ``slope * d`` (:class:`zoo.X`, `y`, **z**)") == "penalises by slope * d (zoo.X, y, z)"
    )


@pytest.mark.parametrize("recipe", ["gpt2-small", "t5-small", "vit-b16", "moe-tiny"])
def test_summary_fits_80_columns(recipe):
    out = ok("summary", recipe, columns=80)
    too_wide = [line for line in out.splitlines() if cell_len(line.rstrip()) > 80]
    assert not too_wide


def test_summary_shows_torchinfo_tree_at_depth_one_and_none_of_its_totals():
    out = ok("summary", "gpt2-small")
    assert "├─ModuleList: 1-5" in out and "Block: 2-" not in out  # depth 1 by default
    assert "├─LMHead: 1-7                  [1, 1024, 50257]" in out  # each module's output shape, no Param #
    for torchinfo_total in ("Param #", "Total params", "mult-adds", "Units.", "Params size", "pass size"):
        assert torchinfo_total not in out  # zoo prints its own exact figures: nothing to disown
    assert "torchinfo" not in out.replace("Modules with output shapes (torchinfo)", "")
    assert "Block: 2-" in ok("summary", "gpt2-small", "--depth", "2")
    raw = json.loads(ok("summary", "gpt2-small", "--json"))["torchinfo"]["raw_figures"]  # kept for scripts
    assert raw["total_params"] == 163_037_184 and raw["mult_adds"] == 163_037_184
    assert "it counts a tied tensor once per module" in raw["total_params_note"]


# ---------------------------------------------------------------------------------------------- --set type switch


def test_a_type_switch_keeps_the_options_the_new_type_accepts():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is dropped: no warning
        recipe = load_recipe("gpt2-small", **{"attention.type": "gqa", "attention.num_kv_heads": 4})
    assert (recipe.attention.type, recipe.attention.num_heads, recipe.attention.num_kv_heads) == ("gqa", 12, 4)


def test_a_type_switch_says_which_options_it_dropped():
    with pytest.warns(RecipeWarning, match=re.escape("ffn: 'swiglu' -> 'moe' keeps no options; dropped hidden")):
        recipe = load_recipe("llama-tiny", **{"ffn.type": "moe", "ffn.num_experts": 4, "ffn.top_k": 2})
    assert recipe.ffn.num_experts == 4
    result = run("build", "llama-tiny", "--device", "meta", "--set", "ffn.type=moe", "--set", "ffn.num_experts=4")
    assert "warning: ffn: 'swiglu' -> 'moe' keeps no options; dropped hidden" in " ".join(result.output.split())


# ---------------------------------------------------------------------------------------------- saved recipes


@pytest.mark.parametrize(
    ("recipe", "absent", "present"),
    [
        ("gpt-tiny", {"num_channels", "image_size", "train.task", "train.mask_prob"}, {"vocab_size", "train.steps"}),
        ("bert-tiny", {"num_channels", "train.task"}, {"train.mask_prob", "type_vocab_size"}),
        ("t5-tiny", {"num_channels", "train.mask_prob"}, {"train.task", "num_decoder_layers"}),
        ("vit-tiny", {"type_vocab_size", "train.task", "train.tokenizer"}, {"num_channels", "patch_size"}),
    ],
)
def test_saved_recipes_carry_only_the_fields_of_their_architecture(recipe, absent, present):
    loaded = load_recipe(recipe)
    data = loaded.to_dict()
    flat = set(data) | {f"train.{k}" for k in data["train"]}
    assert not absent & flat and present <= flat
    assert load_recipe(data) == loaded  # what is left out is the default it loads back as


def test_a_field_set_on_purpose_is_kept_even_where_unused():
    data = load_recipe("gpt-tiny", num_channels=1).to_dict()
    assert data["num_channels"] == 1
