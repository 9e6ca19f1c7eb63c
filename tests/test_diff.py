"""``zoo diff``: two architectures field by field, per-layer patterns, costs, and two runs side by side."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from zoo.analysis.diff import Difference, brief, diff, pattern
from zoo.cli import app
from zoo.recipe import load_recipe


def fields(result) -> dict[tuple[str, str], tuple[str, str]]:
    return {(d.section, d.field): (d.a, d.b) for d in result.differences}


def test_llama_against_qwen_names_every_architectural_change_and_its_cost():
    d = diff("llama-3.2-1b", "qwen2.5-0.5b")
    f = fields(d)
    assert f[("positional", "theta")] == ("500,000", "1,000,000")
    assert f[("positional", "scaling")] == ("llama3", "none")
    assert f[("attention", "num_kv_heads")] == ("8", "2")
    assert f[("attention", "bias")] == ("false", "true")
    assert f[("model", "num_layers")] == ("16", "24")
    assert ("model", "name") not in f and ("model", "description") not in f
    costs = {c.name: c for c in d.costs}
    assert costs["parameters"].a == 1_235_814_400 and costs["parameters"].b == 494_032_768
    assert costs["KV cache per token (bf16)"].a == 2 * 16 * 8 * 64 * 2  # k and v, layers, kv heads, head dim, bf16
    assert costs["KV cache per token (bf16)"].delta == 2 * 24 * 2 * 64 * 2 - 2 * 16 * 8 * 64 * 2
    assert "active parameters per token" not in costs  # dense on both sides
    assert d.seq_len == 4096 and d.seq_why == "4,096 on both sides"


def test_a_mixture_of_experts_shows_its_active_parameters_and_routing():
    d = diff("mistral-7b-v0.1", "mixtral-8x7b")
    f = fields(d)
    assert f[("ffn", "type")] == ("swiglu", "moe")
    assert f[("ffn", "top_k")] == ("-", "2") and f[("ffn", "num_experts")] == ("-", "8")
    costs = {c.name: c for c in d.costs}
    assert costs["active parameters per token"].b == 12_879_925_248 < costs["parameters"].b


def test_a_per_layer_pattern_is_compared_as_the_pattern_it_is():
    d = diff("gemma-3-1b", "gemma-2-2b")
    f = fields(d)
    assert f[("layers", "attention.window")] == ("repeats every 6: 512 x5, none", "repeats every 2: 4,096, none")
    assert f[("layers", "attention.rotary")] == ("repeats every 6: none x5, rope(theta=1,000,000)", "none on all 26")
    assert f[("attention", "qk_norm")] == ("rmsnorm(offset=1)", "none")  # a nested config in one cell
    window = next(x for x in d.differences if x.field == "attention.window")
    assert window.a_value == ([512] * 5 + [None]) * 4 + [512, 512] and len(window.b_value) == 26


def test_pattern_and_brief():
    assert pattern(["a", "a", "a"]) == "a on all 3"
    assert pattern(["a", "b", "a", "b", "a"]) == "repeats every 2: a, b"
    assert pattern(["x", "x", "y", "y", "y"]) == "x at 0-1, y at 2-4"
    assert pattern(["x", "y", "y", "z"]) == "x at 0, y at 1-2, z at 3"
    assert brief(load_recipe("llama-3.2-1b").positional) == ("rope(theta=500,000, scaling=llama3, scaling_factor=32)")


def test_the_same_recipe_written_twice_is_no_difference(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("extends: llama-tiny\nname: mine\ndescription: the same network\nnorm: {eps: 1.0e-5}\n")
    assert load_recipe("llama-tiny").norm.eps == 1e-5  # written out at its default
    d = diff("llama-tiny", path)
    assert d.same and d.differences == [] and all(c.delta == 0 for c in d.costs)


def test_a_hugging_face_folder_and_its_import_do_not_differ(tmp_path):
    transformers = pytest.importorskip("transformers")
    import torch

    config = transformers.LlamaConfig(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path / "hf")
    from zoo.hf import import_checkpoint

    import_checkpoint(tmp_path / "hf", tmp_path / "zoo")
    d = diff(tmp_path / "hf", tmp_path / "zoo")
    assert d.same and [c.delta for c in d.costs] == [0, 0, 0, 0]
    other = diff(tmp_path / "hf", "llama-tiny")
    assert fields(other)[("head", "tie_embeddings")] == ("false", "true")


def train_tiny(out, *settings):
    runner = CliRunner()
    sets = [
        x for s in ("train.steps=4", "train.log_interval=2", "train.eval_interval=2", *settings) for x in ("--set", s)
    ]
    result = runner.invoke(app, ["train", "gpt-tiny", "--out", str(out), *sets])
    assert result.exit_code == 0, result.output


def test_two_runs_show_their_overrides_and_last_metrics_side_by_side(tmp_path):
    train_tiny(tmp_path / "a")
    train_tiny(tmp_path / "b", "train.lr=0.001")
    d = diff(tmp_path / "a", tmp_path / "b")
    assert fields(d)[("train", "lr")] == ("0.003", "0.001")
    runs = {(x.section, x.field): x for x in d.runs}
    assert runs[("--set", "train.lr")] == Difference("--set", "train.lr", "-", "0.001", None, 0.001)
    assert ("--set", "train.steps") not in runs  # the same on both
    assert runs[("last train", "step")].a_value == runs[("last train", "step")].b_value == 4
    assert isinstance(runs[("last eval", "loss")].a_value, float)
    assert runs[("last eval", "loss")].a_value != runs[("last eval", "loss")].b_value
    assert not diff("gpt-tiny", tmp_path / "a").runs  # a recipe and a run: architectures only


def test_the_command_prints_tables_and_json():
    runner = CliRunner()
    result = runner.invoke(app, ["diff", "mistral-7b-v0.1", "llama-3-70b"])
    assert result.exit_code == 0, result.output
    assert "8 fields differ" in result.output and "window" in result.output and "Costs" in result.output
    data = json.loads(runner.invoke(app, ["diff", "llama-tiny", "llama-tiny", "--json"]).output)
    assert data["same"] is True and data["differences"] == []
    same = runner.invoke(app, ["diff", "llama-tiny", "llama-tiny"])
    assert "The architectures are the same: no recipe field differs." in same.output
    bad = runner.invoke(app, ["diff", "llama-tiny", "llama-tiny", "--seq", "0"])
    assert bad.exit_code == 2 and "--batch and --seq must be at least 1 (got 1 and 0)" in bad.output


@pytest.mark.parametrize("a, b", [("llama-3.2-1b", "qwen2.5-0.5b"), ("mistral-7b-v0.1", "llama-3-70b")])
def test_the_readme_shows_the_real_output(a, b, monkeypatch):
    from pathlib import Path

    monkeypatch.delenv("COLUMNS", raising=False)
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    start = readme.index(f"$ zoo diff {a} {b}\n") + len(f"$ zoo diff {a} {b}\n")
    shown = readme[start : readme.index("```", start)].rstrip("\n")
    output = CliRunner().invoke(app, ["diff", a, b]).stdout.rstrip("\n")
    assert shown == "\n".join(line.rstrip() for line in output.splitlines())
