"""Every recipe error in one pass: field errors and the rules between fields together, --set reaching list
entries and naming itself as the source, YAML errors that quote the line, and a file that does not exist."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from zoo.cli import app
from zoo.errors import RecipeError
from zoo.recipe import load_recipe, load_with_assignments, named_recipes

GPT = """\
name: six
architecture: decoder
vocab_size: 256
d_model: 64
num_layers: 2
max_len: 128
attention: {type: gqa, num_heads: 6, num_kv_heads: 4}
positional: {type: learned}
norm: {type: layernorm}
ffn: {type: mlp, hidden: 256}
head: {type: lm, tie_embeddings: true}
"""
TINY = str(named_recipes()["gpt-tiny"])


def message(source, **overrides) -> str:
    with pytest.raises(RecipeError) as info:
        load_recipe(source, **overrides)
    return str(info.value)


def write(tmp_path: Path, text: str, name: str = "r.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------------------------- 1. one pass


def test_field_errors_and_cross_field_rules_come_together(tmp_path):
    text = GPT.replace("vocab_size: 256", "vocab_size: -1").replace("max_len: 128", "max_len: 128\ndropout: 2")
    text = text.replace("{type: layernorm}", "{type: layernorm, eps: -1}") + "train: {lr: abc, steps: -5}\n"
    path = write(tmp_path, text)
    assert message(path) == "\n".join(
        [
            f"{path}: 7 errors in recipe",
            "  norm.eps: Input should be greater than 0 (got -1)",
            "  train.steps: Input should be greater than or equal to 1 (got -5)",
            "  train.lr: Input should be a valid number, unable to parse string as a number (got 'abc')",
            "  vocab_size: Input should be greater than or equal to 1 (got -1)",
            "  dropout: Input should be less than 1 (got 2)",
            "  attention: num_heads (6) must be divisible by num_kv_heads (4)",
            "  attention: d_model (64) must be divisible by num_heads (6), or set head_dim",
        ]
    )


def test_a_boolean_for_a_number_does_not_hide_the_other_fields_errors():
    assert message("gpt-tiny", num_layers=True, vocab_size=-1).endswith(
        "2 errors in recipe\n"
        "  override num_layers=True: num_layers: Input should be a number, not a boolean (got True)\n"
        "  override vocab_size=-1: vocab_size: Input should be greater than or equal to 1 (got -1)"
    )
    assert message("gpt-tiny", **{"ffn.hidden": True, "ffn.activation": "nope"}).endswith(
        "  override ffn.hidden=True: ffn.hidden: Input should be a number, not a boolean (got True)\n"
        "  override ffn.activation='nope': ffn.activation: Input should be 'relu', 'relu2', 'gelu', 'gelu_tanh', "
        "'quick_gelu', 'silu', 'xielu' or 'identity' "
        "(got 'nope')"
    )


def test_a_models_own_rules_run_beside_its_field_errors():
    got = message("gpt-tiny", **{"train.lr": "abc", "train.checkpoint_every": 2})
    assert got.endswith(
        "  override train.lr='abc': train.lr: Input should be a valid number, unable to parse string as a number "
        "(got 'abc')\n"
        f"  {TINY} with override train.checkpoint_every=2, override train.lr='abc': train: checkpoint_every (2) "
        "applies to "
        "activation_checkpointing: every_k only, not none: set "
        "activation_checkpointing: every_k or drop checkpoint_every"
    )


def test_a_rule_reading_a_failed_field_is_skipped_the_others_run():
    got = message("gpt-tiny", max_len=-1, **{"train.seq_len": 4096, "attention.num_heads": 5})
    assert got.endswith(
        "2 errors in recipe\n"
        "  override max_len=-1: max_len: Input should be greater than or equal to 1 (got -1)\n"
        f"  {TINY} with override attention.num_heads=5: attention: d_model (64) must be divisible by num_heads (5), "
        "or set head_dim"
    )  # no knock-on of max_len: train.seq_len's rule reads it


def test_the_architectures_errors_do_not_hide_the_components_rules():
    got = message("gpt-tiny", vocab_size=None, pad_token_id=300, **{"attention.num_heads": 5})
    assert got.endswith(
        "2 errors in recipe\n"
        "  override vocab_size=None: vocab_size: required by architecture 'decoder'\n"
        f"  {TINY} with override attention.num_heads=5: attention: d_model (64) must be divisible by num_heads (5), "
        "or set head_dim"
    )  # pad_token_id's rule reads vocab_size: skipped


def test_a_spec_with_a_bad_option_still_has_its_models_rules_checked():
    expert = {"type": "swiglu", "hidden": 8}
    spec = {"type": "moe", "num_experts": 2, "top_k": 3, "expert": expert, "aux_loss_coef": "x"}
    got = message("gpt-tiny", ffn=spec)
    assert "  ffn: top_k (3) must be <= num_experts (2)" in got.splitlines()


# ---------------------------------------------------------------------------------------------- 2. --set into lists


def test_set_reaches_a_per_layer_override_by_index():
    recipe = load_with_assignments("moe-tiny", ["layers.0.ffn.num_experts=3"])
    assert recipe.layers[0].ffn.num_experts == 3
    assert load_recipe("moe-tiny", **{"layers.-1.ffn.top_k": 1}).layers[0].ffn.top_k == 1
    recipe = load_with_assignments("moe-tiny", ["layers.0.norm.type=rmsnorm"])  # creates the nested mapping
    assert recipe.layers[0].norm.type == "rmsnorm"


def test_set_past_the_end_of_a_list_says_how_many_entries_there_are():
    with pytest.raises(RecipeError) as info:
        load_with_assignments("moe-tiny", ["layers.5.ffn.num_experts=3"])
    assert (
        str(info.value) == "--set layers.5.ffn.num_experts=3: layers.5: index 5 is past the end: layers has 1 entry (0)"
    )
    with pytest.raises(RecipeError) as info:
        load_with_assignments("gpt-tiny", ["layers.0.ffn.num_experts=3"])
    assert (
        str(info.value) == "--set layers.0.ffn.num_experts=3: layers.0: index 0 is past the end: layers has no entries"
    )
    with pytest.raises(RecipeError) as info:
        load_with_assignments("moe-tiny", ["layers.first.ffn=mlp"])
    assert str(info.value) == (
        "--set layers.first.ffn=mlp: layers.first: layers is a list: give an index, not 'first'; it has 1 entry (0)"
    )


# ---------------------------------------------------------------------------------------------- 3. --set as source


def test_an_error_in_a_set_value_names_the_flag_not_the_file():
    with pytest.raises(RecipeError) as info:
        load_with_assignments("gpt-tiny", ["train.lr=abc"])
    assert str(info.value) == (
        "--set train.lr=abc: train.lr: Input should be a valid number, unable to parse string as a number (got 'abc')"
    )


def test_errors_from_the_file_and_from_set_each_name_their_source(tmp_path):
    path = write(tmp_path, GPT.replace("d_model: 64", "d_model: -64").replace("num_kv_heads: 4", "num_kv_heads: 2"))
    with pytest.raises(RecipeError) as info:
        load_with_assignments(path, ["train.lr=abc", "train.steps=0"])
    assert str(info.value) == "\n".join(
        [
            f"{path}: 3 errors in recipe",
            "  --set train.steps=0: train.steps: Input should be greater than or equal to 1 (got 0)",
            "  --set train.lr=abc: train.lr: Input should be a valid number, unable to parse string as a number "
            "(got 'abc')",
            "  d_model: Input should be greater than or equal to 1 (got -64)",
        ]
    )


def test_a_rule_that_read_a_set_value_names_the_file_and_the_flag():
    with pytest.raises(RecipeError) as info:
        load_with_assignments("gpt-tiny", ["attention.num_heads=5"])
    assert str(info.value).endswith(
        "gpt-tiny.yaml with --set attention.num_heads=5: attention: d_model (64) must be divisible by num_heads (5), "
        "or set head_dim"
    )


def test_keyword_overrides_name_themselves():
    assert message("gpt-tiny", num_layers=0) == (
        "override num_layers=0: num_layers: Input should be greater than or equal to 1 (got 0)"
    )


def test_the_cli_names_the_flag():
    result = CliRunner().invoke(app, ["validate", "gpt-tiny", "--set", "train.lr=abc"])
    assert result.exit_code != 0
    assert "--set train.lr=abc: train.lr: Input should be a valid number" in result.output
    assert "Traceback" not in result.output


# ---------------------------------------------------------------------------------------------- 4. YAML errors


def test_a_tab_is_named_and_its_line_quoted(tmp_path):
    path = write(tmp_path, "name: x\nffn:\n  type: mlp\n\thidden: 3\n")
    assert message(path) == (
        f"{path}: line 4, column 1: tabs are not allowed in YAML: indent with spaces\n    \thidden: 3\n    ^"
    )


def test_a_misaligned_key_gets_its_likely_cause_and_a_caret(tmp_path):
    path = write(tmp_path, "name: x\nffn:\n  type: mlp\n hidden: 3\n")
    assert message(path) == (
        f"{path}: line 4, column 2: invalid YAML: did not find expected key (a key that lines up with no key above "
        "it: indent it as the other keys of its section)\n     hidden: 3\n     ^"
    )


def test_a_section_key_at_the_top_level_says_where_it_belongs(tmp_path):
    path = write(
        tmp_path,
        GPT.replace("num_heads: 6, num_kv_heads: 4", "num_heads: 4, num_kv_heads: 2") + "hidden: 256\nlr: 0.1\n",
    )
    assert message(path) == "\n".join(
        [
            f"{path}: 2 errors in recipe",
            "  hidden: not a top-level field; did you mean ffn.hidden? (indent it under ffn:)",
            "  lr: not a top-level field; did you mean train.lr? (indent it under train:)",
        ]
    )


# ---------------------------------------------------------------------------------------------- 5. not found


def test_a_path_that_is_no_file_is_file_not_found(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, GPT, "mine.yaml")
    assert message("nofile.yaml") == "file not found: nofile.yaml"
    assert message("mine.yml") == "file not found: mine.yml (did you mean mine.yaml?)"
    assert message("gpt-tiny.yaml") == "file not found: gpt-tiny.yaml (did you mean the named recipe 'gpt-tiny'?)"
    assert message("sub/mine.yaml") == "file not found: sub/mine.yaml"


def test_an_unknown_name_lists_a_few_close_names_not_all():
    got = message("gpt2-smal")
    assert got.startswith("no recipe file or named recipe 'gpt2-smal' (did you mean 'gpt2-small'")
    assert got.count("'") <= 8 and got.endswith(f"; `zoo recipes` lists all {len(named_recipes())}")
    assert message("xyzzy") == f"no recipe file or named recipe 'xyzzy'; `zoo recipes` lists all {len(named_recipes())}"


def test_the_cli_says_the_file_does_not_exist():
    result = CliRunner().invoke(app, ["build", "nofile.yaml"])
    assert result.exit_code != 0 and "file not found: nofile.yaml" in result.output
    assert "gpt-tiny" not in result.output and "Traceback" not in result.output


def test_a_rule_of_train_or_block_reading_a_failed_field_is_skipped_not_raised():
    assert message("gpt-tiny", **{"train.betas": "x"}) == (
        "override train.betas='x': train.betas: Input should be a valid tuple (got 'x')"
    )
    assert message("gpt-tiny", **{"block.parallel": True, "block.norm_position": "x"}) == (
        "override block.norm_position='x': block.norm_position: Input should be 'pre', 'post', 'sandwich' or "
        "'output' (got 'x')"
    )
