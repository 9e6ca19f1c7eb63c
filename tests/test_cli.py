"""The ``zoo`` command: every command, its error paths, and what scripts and pipes receive."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing
from pathlib import Path
from typing import Literal

import pytest
import torch
import yaml
from safetensors.torch import load_file
from typer.testing import CliRunner

import zoo
from zoo import plugins
from zoo.cli import app
from zoo.components.ffn import Activation
from zoo.recipe import named_recipes

RECIPES = Path(__file__).resolve().parents[1] / "recipes"
REFERENCE = {
    "gpt2-small": 124_439_808,
    "bert-base": 109_482_240,
    "vit-b16": 86_567_656,
    "t5-small": 60_506_624,
    "llama-3.2-1b": 1_235_814_400,
    "mixtral-8x7b": 46_702_792_704,
}
BROKEN = """\
name: broken
architecture: decoder
vocab_size: 10
d_model: 64
num_layers: 0
max_len: 8
positional: learned
attention: {type: mah, num_heads: 4}
norm: rmsnorm
ffn: {type: mlp, hiden: 3}
"""


def zoo_cli(*args: str, code: int = 0):
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, (result.output, result.exception)
    return result


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)
    return path


def run_zoo(*args: str, **env: str) -> subprocess.CompletedProcess:
    """The real console entry point in a child process, its output piped (not a terminal)."""
    return subprocess.run(
        [sys.executable, "-m", "zoo.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


class TestBuild:
    def test_tree_shows_kind_name_plugin_and_parameters(self):
        out = zoo_cli("build", "gpt-tiny").stdout
        assert "attention: mha (zoo.components.attention)" in out
        assert "ffn: mlp (zoo.components.ffn)" in out
        assert "0-1 ×2" in out and "head: lm" in out
        assert "tied: proj.weight = embedding.token.weight" in out
        assert "124,672 parameters (tied weights counted once) on cpu, float32" in out

    def test_set_overrides_the_recipe(self):
        out = zoo_cli("build", "gpt-tiny", "--set", "num_layers=1", "--set", "ffn.hidden=128").stdout
        assert "0-1" not in out and "0  Block" in out
        assert f"{zoo.count_parameters(zoo.build('gpt-tiny', num_layers=1, **{'ffn.hidden': 128})):,}" in out

    def test_meta_builds_huge_models_without_memory(self):
        out = zoo_cli("build", "mixtral-8x7b", "--device", "meta").stdout
        assert "46,702,792,704 parameters" in out and "0-31 ×32" in out  # 32 identical blocks, folded
        assert "ffn  MoE  ffn: moe (zoo.components.moe)  1,409,318,912" in out  # 8 experts, stacked

    def test_out_saves_a_model_that_loads_bit_identical(self, tmp_path):
        out = zoo_cli("build", "moe-tiny", "--set", "num_layers=2", "--out", str(tmp_path / "m")).stdout
        assert "model.safetensors" in out
        assert yaml.safe_load((tmp_path / "m" / "recipe.yaml").read_text())["num_layers"] == 2
        saved = load_file(tmp_path / "m" / "model.safetensors")
        torch.manual_seed(1)  # a different init: only the saved weights can make them equal
        state = zoo.load(tmp_path / "m").state_dict()
        assert set(saved) <= set(state)
        for name, tensor in state.items():
            key = name if name in saved else "embedding.token.weight"  # the tied head is stored once
            assert torch.equal(tensor, saved[key]), name

    def test_out_round_trip_equals_the_built_model(self, tmp_path):
        torch.manual_seed(123)
        zoo_cli("build", "t5-tiny", "--out", str(tmp_path / "t5"))
        torch.manual_seed(123)
        expected = zoo.build("t5-tiny")
        loaded = zoo.load(tmp_path / "t5")
        assert expected.state_dict().keys() == loaded.state_dict().keys()
        for name, tensor in expected.state_dict().items():
            assert torch.equal(tensor, loaded.state_dict()[name]), name

    def test_dtype(self):
        assert "on cpu, bfloat16" in zoo_cli("build", "llama-tiny", "--dtype", "bfloat16").stdout

    def test_cuda(self):
        if torch.cuda.is_available():
            assert "on cuda" in zoo_cli("build", "gpt-tiny", "--device", "cuda").stdout
        else:
            assert "CUDA is not available" in zoo_cli("build", "gpt-tiny", "--device", "cuda", code=2).stderr

    def test_out_with_meta_is_refused(self, tmp_path):
        result = zoo_cli("build", "gpt-tiny", "--device", "meta", "--out", str(tmp_path), code=2)
        assert "meta device has none" in result.stderr


class TestErrors:
    def test_bad_recipe_reports_every_error_without_traceback(self, broken):
        result = zoo_cli("build", str(broken), code=2)
        err = result.stderr
        assert err.startswith(f"error: {broken}: 3 errors in recipe")
        assert "unknown attention type 'mah'" in err and "did you mean" in err
        assert "ffn.hiden: unknown key (did you mean 'hidden'?)" in err
        assert "num_layers" in err
        assert "Traceback" not in result.output and result.stdout == ""

    def test_unknown_component_suggests_a_name(self):
        result = zoo_cli("build", "gpt-tiny", "--set", "norm.type=rmsnrom", code=2)
        assert "unknown norm type 'rmsnrom' (did you mean 'rmsnorm'?)" in result.stderr

    def test_unknown_key(self):
        result = zoo_cli("summary", "gpt-tiny", "--set", "attention.num_head=2", code=2)
        assert "attention.num_head: unknown key (did you mean 'num_heads'?)" in result.stderr

    def test_missing_file(self):
        result = zoo_cli("build", "no/such/recipe.yaml", code=2)
        assert result.stderr.startswith("error: file not found: no/such/recipe.yaml")

    def test_os_errors_are_rendered(self, tmp_path):
        blocker = tmp_path / "file"
        blocker.write_text("")
        result = zoo_cli("schema", "--out", str(blocker / "schema.json"), code=2)
        assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr

    def test_debug_shows_the_traceback(self, broken):
        result = zoo_cli("--debug", "build", str(broken), code=2)
        assert result.stderr.startswith("Traceback (most recent call last):")
        assert "zoo.errors.RecipeError" in result.stderr
        assert f"\nerror: {broken}: 3 errors in recipe" in result.stderr

    def test_usage_errors_exit_2(self):
        result = zoo_cli("build", "gpt-tiny", "--device", "tpu", code=2)
        assert "tpu" in result.output


class TestValidate:
    def test_valid_recipes(self):
        out = zoo_cli("validate", str(RECIPES / "gpt-tiny.yaml"), "t5-small").stdout
        assert "ok" in out and "gpt-tiny (decoder)" in out and "t5-small (encoder-decoder)" in out

    def test_invalid_recipe_fails_and_reports_each(self, broken):
        result = zoo_cli("validate", "gpt-tiny", str(broken), "missing.yaml", code=2)
        assert "ok gpt-tiny" in result.stdout
        assert f"invalid {broken}" in result.stdout and "ffn.hiden" in result.stdout
        assert "invalid missing.yaml" in result.stdout
        assert result.stderr.strip() == "error: 2 of 3 recipes are invalid"


class TestSummary:
    @pytest.mark.parametrize("name, total", REFERENCE.items())
    def test_json_totals(self, name, total):
        data = json.loads(zoo_cli("summary", name, "--json", "--seq-len", "64", "--depth", "1").stdout)
        p = data["parameters"]
        assert p["total"] == total == p["analytic"]["total"] and p["agree"] and p["mismatches"] == []
        assert sum(p["by_kind"].values()) == total
        assert set(data["flops"]) >= {"forward_per_token", "train_per_token"}
        assert set(data["memory"]) >= {"weights", "adamw_state", "kv_cache", "activations"}

    def test_json_of_a_mixture_of_experts(self):
        data = json.loads(zoo_cli("summary", "mixtral-8x7b", "--json").stdout)
        assert data["parameters"]["active"] == 12_879_925_248 < data["parameters"]["total"]
        assert data["memory"]["kv_cache"]["bytes_per_token"] == 2 * 32 * 8 * 128 * 2
        assert data["torchinfo"]["forward"] == "none" and "meta device" in data["torchinfo"]["note"]
        assert data["seq_len"] == 4096 and data["built_on"] == "meta"
        assert "4,096 tokens per sequence: train.seq_len is unset (zoo train would take max_len, 32,768)" in (
            "\n".join(data["notes"])
        )

    def test_seq_is_spelled_as_plan_spells_it(self):
        assert json.loads(zoo_cli("summary", "gpt-tiny", "--json", "--seq", "64").stdout)["seq_len"] == 64
        assert json.loads(zoo_cli("summary", "gpt-tiny", "--json").stdout)["seq_len"] == 128  # train.seq_len

    def test_json_kv_cache_of_llama(self):
        data = json.loads(zoo_cli("summary", "llama-3.2-1b", "--json", "--seq-len", "8", "--batch", "2").stdout)
        assert data["memory"]["kv_cache"]["bytes_per_token"] == 32_768
        assert data["memory"]["kv_cache"]["bytes_for_batch"] == 2 * 8 * 32_768
        assert data["batch"] == 2 and data["flops"]["seq_len"] == 8

    def test_text(self):
        out = zoo_cli("summary", "gpt-tiny", "--batch", "2", "--seq-len", "32").stdout
        assert "Layer (type:depth-idx)" in out  # torchinfo's table
        for section in ("Parameters by component kind", "Parameters by layer", "FLOPs at seq_len 32", "Memory"):
            assert section in out
        assert "blocks.0-1 ×2" in out and "MISMATCH" not in out
        assert "Output Shape" in out and "[2, 32, 256]" in out  # the tree with a real forward pass's shapes
        assert "Total params" not in out and "torchinfo reports" not in out  # zoo's counts only, nothing disowned
        assert "KV cache per token (bf16)" in out and "512 B" in out

    def test_text_of_a_mixture_of_experts(self):
        out = zoo_cli("summary", "moe-tiny", "--seq-len", "16").stdout
        assert "Mixture of experts: 281,664 parameters in total, 207,936 active per token" in out

    def test_set_and_depth(self):
        out = zoo_cli("summary", "llama-tiny", "--set", "num_layers=1", "--depth", "1").stdout
        assert "Block: 2-" not in out and "blocks.1" not in out


class TestRegistryCommands:
    def test_list_everything(self):
        out = zoo_cli("list").stdout
        for kind in ("architecture", "embedding", "positional", "attention", "norm", "ffn", "head"):
            assert kind in out
        assert f"zoo.components.attention {zoo.__version__}" in out

    def test_list_one_kind_with_options(self):
        out = zoo_cli("list", "ffn").stdout
        assert "moe" in out and "swiglu" in out and "attention" not in out.split("\n")[0]
        assert "num_experts: int (required)" in out
        assert "expert: ffn spec = {'type': 'swiglu'}" in out
        choices = " | ".join(repr(a) for a in typing.get_args(Activation))  # any activation a plugin-free zoo has
        assert f"activation: {choices} = gelu" in out

    def test_list_unknown_kind(self):
        result = zoo_cli("list", "atention", code=2)
        assert "unknown component kind 'atention' (did you mean 'attention'?)" in result.stderr

    def test_recipes(self):
        out = zoo_cli("recipes").stdout
        for name in named_recipes():
            assert name in out
        for total in REFERENCE.values():
            assert f"{total:,}" in out
        assert "70,553,706,496" in out

    def test_schema_validates_every_recipe(self):
        jsonschema = pytest.importorskip("jsonschema")
        schema = json.loads(zoo_cli("schema").stdout)
        jsonschema.Draft202012Validator.check_schema(schema)
        validator = jsonschema.Draft202012Validator(schema)
        for path in named_recipes().values():
            assert list(validator.iter_errors(yaml.safe_load(path.read_text()))) == [], path
        bad = yaml.safe_load((RECIPES / "gpt-tiny.yaml").read_text())
        assert not validator.is_valid({**bad, "ffn": {"type": "mlp", "hiden": 3}})
        assert not validator.is_valid({**bad, "attention": {"type": "mah", "num_heads": 4}})
        assert validator.is_valid({**bad, "norm": "rmsnorm"})  # a bare name where no option is required
        moe = {"type": "moe", "num_experts": 4, "top_k": 2, "expert": {"type": "swiglu", "hidden": 8}}
        assert validator.is_valid({**bad, "ffn": moe})
        assert not validator.is_valid({**bad, "ffn": {**moe, "expert": {"type": "swiglu", "hiden": 8}}})
        assert validator.is_valid({"extends": "gpt-tiny", "num_layers": 4})

    def test_schema_includes_plugin_components(self, register_plugin, tmp_path):
        from zoo.components.norm import RMSNorm, RMSNormConfig

        class SchemaTestNormConfig(RMSNormConfig):
            type: Literal["schema_test_norm"] = "schema_test_norm"  # type: ignore[assignment]

        class Plugin:
            @zoo.hookimpl
            def register_components(self, register):
                register("norm", "schema_test_norm", RMSNorm, SchemaTestNormConfig)

        register_plugin(Plugin(), "schema-test-plugin")
        zoo_cli("schema", "--out", str(tmp_path / "s.json"))
        schema = json.loads((tmp_path / "s.json").read_text())
        assert "schema_test_norm" in schema["$defs"]["norm_spec"]["anyOf"][0]["discriminator"]["mapping"]

    def test_plugins(self):
        out = zoo_cli("plugins").stdout
        assert "zoo.components.attention (built-in)" in out and "attention: mha, gqa, mqa, moa" in out
        assert "ok" in out

    def test_disable_plugins(self, monkeypatch):
        installed = [p for p in plugins.plugins() if not p.builtin and p.dist is not None]
        if not installed:
            pytest.skip("no installed plugin to disable")
        name = installed[0].name
        monkeypatch.setenv("ZOO_DISABLE_PLUGINS", "")
        try:
            out = zoo_cli("--disable-plugins", name, "plugins").stdout
            assert os.environ["ZOO_DISABLE_PLUGINS"] == name
            row = next(line for line in out.splitlines() if line.strip().startswith(name))
            assert "disabled" in row
        finally:
            monkeypatch.delenv("ZOO_DISABLE_PLUGINS")
            plugins.reset()


class TestProcess:
    def test_help_does_not_import_torch(self):
        code = "import sys\nfrom zoo.cli import app\nassert 'torch' not in sys.modules, 'torch imported'"
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
        result = run_zoo("--help")
        assert result.returncode == 0 and "summary" in result.stdout

    @pytest.mark.slow
    def test_piped_output_is_plain_text(self):
        result = run_zoo("list", "norm")
        assert result.returncode == 0 and "rmsnorm" in result.stdout
        assert "\x1b" not in result.stdout
        failed = run_zoo("build", "nope.yaml")
        assert failed.returncode == 2 and failed.stderr.startswith("error: ") and "\x1b" not in failed.stderr


class TestDtypeOption:
    def test_choices_come_from_the_dtype_table(self):
        from zoo.dtypes import DTYPE_CHOICES

        for command in (("build",), ("import",)):
            out = zoo_cli(*command, "--help").stdout
            assert "|".join(DTYPE_CHOICES) in out.replace(" ", "").replace("\n", "")

    def test_float16_and_float64_build(self):
        assert "on cpu, float16" in zoo_cli("build", "gpt-tiny", "--dtype", "float16").stdout
        assert "on cpu, float64" in zoo_cli("build", "gpt-tiny", "--dtype", "float64").stdout

    def test_an_unknown_dtype_is_a_usage_error(self):
        result = CliRunner().invoke(app, ["build", "gpt-tiny", "--dtype", "fp4"])
        assert result.exit_code == 2 and "float32" in result.output and "bfloat16" in result.output


class TestRenderedFromTheLibrary:
    """What the commands print comes from library results: the CLI does no arithmetic of its own."""

    def test_training_flops_per_sequence(self):
        from zoo.analysis import FlopEstimate
        from zoo.analysis.flops import TRAIN_FACTOR

        f = FlopEstimate(seq_len=8, batch=2, matmul_per_token=10, attention_per_token=3, forward_per_sequence=104)
        assert f.train_per_sequence == TRAIN_FACTOR * 104 == 3 * f.forward_per_sequence
        assert f.to_dict()["train_per_sequence"] == 312

    def test_summary_prints_the_train_factor_and_json_has_train_per_sequence(self):
        out = zoo_cli("summary", "gpt-tiny", "--seq-len", "16", "--depth", "0").stdout
        assert "training step (3x)" in out
        data = json.loads(zoo_cli("summary", "gpt-tiny", "--seq-len", "16", "--json").stdout)
        assert data["flops"]["train_per_sequence"] == 3 * data["flops"]["forward_per_sequence"]

    @pytest.mark.parametrize(
        "env, main",
        [
            ({}, True),
            ({"WORLD_SIZE": "1", "RANK": "3", "LOCAL_RANK": "3"}, True),  # alone, as setup() treats it
            ({"WORLD_SIZE": "4", "RANK": "0", "LOCAL_RANK": "0"}, True),
            ({"WORLD_SIZE": "4", "RANK": "2", "LOCAL_RANK": "0"}, False),
            ({"WORLD_SIZE": "4", "RANK": "5", "LOCAL_RANK": "1"}, False),
        ],
    )
    def test_is_main_process_reads_the_ranks_as_setup_does(self, monkeypatch, env, main):
        from zoo.train.distributed import is_main_process, process_ranks

        for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        assert is_main_process() is main
        rank, local_rank, world_size = process_ranks()
        assert world_size == int(env.get("WORLD_SIZE", "1"))
        assert (rank, local_rank) == ((0, 0) if world_size == 1 else (int(env["RANK"]), int(env["LOCAL_RANK"])))

    def test_is_main_process_without_a_rank_is_a_clear_error(self, monkeypatch):
        from zoo.errors import TrainError
        from zoo.train.distributed import is_main_process

        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.delenv("RANK", raising=False)
        with pytest.raises(TrainError, match="RANK is not set"):
            is_main_process()

    def test_objectives_say_whether_they_generate(self):
        from zoo.train.objectives import OBJECTIVES, objective_generates, objective_maps_source_to_target

        assert {n for n in OBJECTIVES if objective_generates(n)} == {"causal_lm", "seq2seq"}
        assert {n for n in OBJECTIVES if objective_maps_source_to_target(n)} == {"seq2seq"}
        assert not objective_generates(None) and not objective_maps_source_to_target("nope")

    def test_the_train_view_renders_the_events(self, capsys):
        from types import SimpleNamespace

        from zoo.cli.train import _TrainView
        from zoo.train import TrainEvent

        view = _TrainView(summary=False)
        start = {
            "recipe": SimpleNamespace(name="gpt-tiny"),
            "objective": "causal_lm",
            "generates": True,
            "seq_len": 32,
            "device": "cpu",
            "world_size": 1,
            "strategy": "none",
            "precision": "float32",
            "examples_per_step": 4,
            "tokens_per_step": 128,
            "data": "embedded",
            "run_dir": "runs/x",
        }
        view(TrainEvent("start", 0, 2, start))
        step = {"loss": 1.5, "lr": 1e-3, "tokens_per_s": 2000.0, "unit": "tokens", "per_s": 2000.0, "eta_s": 1.0}
        view(TrainEvent("step", 1, 2, step))
        assert "2.00 k tokens/s" in str(view.progress.tasks[0].fields["figures"])
        view(TrainEvent("end", 2, 2, {"loss": 1.25, "eval": {}, "seconds": 3.0, "run_dir": "runs/x"}))
        out = capsys.readouterr().out
        assert "(causal_lm) on cpu x1" in out and "4 examples (128 tokens) per step" in out
        assert "next: zoo generate runs/x --prompt" in out
