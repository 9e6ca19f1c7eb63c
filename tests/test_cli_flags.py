"""One set of flags, and nothing overwritten: ``--out/-o``, ``--force``, ``--debug`` anywhere, ``--resume`` only on
a run, ``zoo export`` without ``--to``, ``zoo import`` without ``--out``, no folder written while it is read, and
every reading command saying which checkpoint it read."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import zoo
from zoo.cli import app

FAST = ["--set", "train.steps=2", "--set", "train.log_interval=1", "--no-summary", "--device", "cpu"]


def cli(*args: str, code: int = 0):
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (result.output, result.exception)
    return result


@pytest.fixture(scope="module")
def hf_folders(tmp_path_factory) -> dict[str, Path]:
    """Two tiny random Hugging Face checkpoints of different architectures."""
    transformers = pytest.importorskip("transformers")
    import torch

    root = tmp_path_factory.mktemp("hf")
    small = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_attention_heads=2, max_position_embeddings=32)
    out = {}
    for name, layers in (("llama", 1), ("llama-deeper", 2)):
        torch.manual_seed(0)
        config = transformers.LlamaConfig(num_hidden_layers=layers, **small)
        transformers.LlamaForCausalLM(config).save_pretrained(root / name)
        out[name] = root / name
    return out


def test_resume_on_a_folder_without_a_run_is_an_error(tmp_path):
    result = cli("train", "gpt-tiny", "--out", tmp_path / "nothere", "--resume", *FAST, code=2)
    assert (
        f"--resume: {tmp_path / 'nothere'} holds no run to continue (no checkpoint, no run.yaml); drop --resume to "
        "start a new run there" in result.stderr
    )
    assert not (tmp_path / "nothere" / "checkpoints").exists()


def test_debug_is_accepted_after_the_command(tmp_path):
    result = cli("build", tmp_path / "missing.yaml", "--debug", code=2)
    assert "Traceback (most recent call last)" in result.stderr and "error:" in result.stderr
    assert "Traceback" not in cli("build", tmp_path / "missing.yaml", code=2).stderr


def test_train_refuses_a_folder_of_other_files_unless_forced(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    result = cli("train", "gpt-tiny", "-o", out, *FAST, code=2)
    assert f"{out} holds something else than a run (notes.txt): pass --force" in result.stderr
    assert (out / "notes.txt").read_text() == "keep me"
    cli("train", "gpt-tiny", "-o", out, "--force", *FAST)
    assert not (out / "notes.txt").exists() and (out / "checkpoints").is_dir()


def test_import_defaults_its_folder_refuses_another_model_and_replaces_it_whole_when_forced(
    hf_folders, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    cli("import", hf_folders["llama"])  # no --out: models/<the folder's name>
    assert zoo.load_recipe("models/llama").num_layers == 1
    cli("import", hf_folders["llama"], "-o", "models/llama")  # the same model again: written in place
    (tmp_path / "models" / "llama" / "notes.txt").write_text("mine")
    refused = cli("import", hf_folders["llama-deeper"], "--out", "models/llama", code=2)
    assert (
        "models/llama already holds another model (checksums.json, config.json, hf, model.safetensors, notes.txt "
        "and 1 more): pass --force to replace it whole with the imported model, or choose another folder"
    ) in refused.stderr
    assert zoo.load_recipe("models/llama").num_layers == 1  # untouched
    cli("import", hf_folders["llama-deeper"], "--out", "models/llama", "--force")
    assert zoo.load_recipe("models/llama").num_layers == 2
    assert not (tmp_path / "models" / "llama" / "notes.txt").exists()  # replaced whole, not mixed
    assert not list((tmp_path / "models").glob(".llama.replaced-*"))


def test_a_failed_forced_write_puts_the_old_folder_back(hf_folders, tmp_path, monkeypatch):
    from zoo.checkpoint import save

    out = tmp_path / "m"
    out.mkdir()
    (out / "notes.txt").write_text("mine")

    def broken(model, directory):
        save(model, directory)
        raise OSError(28, "No space left on device", str(directory))

    monkeypatch.setattr("zoo.checkpoint.save", broken)
    result = cli("import", hf_folders["llama"], "--out", out, "--force", code=2)
    assert "No space left on device" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"] and not list(tmp_path.glob(".m.replaced-*"))


def test_no_folder_is_written_while_it_is_read(hf_folders, tmp_path):
    result = cli("import", hf_folders["llama"], "--out", hf_folders["llama"], code=2)
    assert f"{hf_folders['llama']}: that is the folder being read ({hf_folders['llama']})" in result.stderr
    cli("import", hf_folders["llama"], "--out", tmp_path / "z")
    result = cli("export", tmp_path / "z", tmp_path / "z" / "hf-out", code=2)
    assert "that is the folder being read" in result.stderr


def test_export_needs_no_to_and_takes_out_either_way(hf_folders, tmp_path):
    cli("import", hf_folders["llama"], "--out", tmp_path / "z")
    cli("export", tmp_path / "z", tmp_path / "a")
    cli("export", tmp_path / "z", "-o", tmp_path / "b")
    cli("export", tmp_path / "z", tmp_path / "b")  # the same export again: in place
    assert (tmp_path / "a" / "config.json").read_text() == (tmp_path / "b" / "config.json").read_text()
    both = cli("export", tmp_path / "z", tmp_path / "c", "--out", tmp_path / "d", code=2)
    assert "give the folder to write to once: zoo export MODEL OUT, or zoo export MODEL --out OUT" in both.stderr
    cli("import", hf_folders["llama-deeper"], "--out", tmp_path / "z2")
    other = cli("export", tmp_path / "z2", tmp_path / "a", code=2)
    assert f"{tmp_path / 'a'} already holds another model (config.json, generation_config.json, model.safetensors)" in (
        other.stderr
    )
    cli("export", tmp_path / "z2", tmp_path / "a", "--force")


def test_generate_says_which_checkpoint_it_read(tmp_path):
    cli("train", "gpt-tiny", "--out", tmp_path / "run", *FAST)
    result = cli("generate", tmp_path / "run", "--prompt", "The ", "--max-new-tokens", "2", "--temperature", "0")
    assert f"read run {tmp_path / 'run'}: its latest complete checkpoint, step-00000002" in result.stderr
    assert "read run" not in result.stdout


def test_plot_takes_o_as_every_command_does(tmp_path):
    pytest.importorskip("matplotlib")
    cli("train", "gpt-tiny", "--out", tmp_path / "run", *FAST)
    cli("plot", tmp_path / "run", "-o", tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 0


def test_build_out_keeps_to_its_own_model_unless_forced(tmp_path):
    out = tmp_path / "m"
    cli("build", "gpt-tiny", "-o", out)
    cli("build", "gpt-tiny", "-o", out)  # the same recipe: its folder, written again
    refused = cli("build", "llama-tiny", "-o", out, code=2)
    assert f"{out} already holds another model (checksums.json, config.json, model.safetensors, recipe.yaml)" in (
        refused.stderr
    )
    assert zoo.load_recipe(out).name == "gpt-tiny"
    cli("build", "llama-tiny", "-o", out, "--force")
    assert zoo.load_recipe(out).name == "llama-tiny"


def test_summary_of_a_run_says_its_weights_are_not_read_and_zero_counts_say_why(tmp_path):
    cli("train", "gpt-tiny", "--out", tmp_path / "run", *FAST)
    out = cli("summary", tmp_path / "run").stdout
    assert f"from the recipe of {tmp_path / 'run'} (its weights are not read" in " ".join(out.split())
    assert "random weights" not in out
    listed = cli("summary", "llama-tiny").stdout
    assert "positional 0: it computes without parameters of its own" in listed  # RoPE
    assert "head 0: head.proj.weight is embedding.token.weight, counted there" in listed  # tied


def test_a_plan_that_does_not_fit_names_only_what_its_layout_has():
    from zoo.analysis.plan import plan

    ddp = plan("llama-3-70b", gpu="h100-80gb", gpus=2, batch=2, seq_len=1024, parallel="ddp").error()
    assert "gathered weights" not in ddp
    fsdp = plan("llama-3-70b", gpu="l4", gpus=2, batch=2, seq_len=1024, parallel="fsdp").error()
    assert "gathered weights" in fsdp


def test_the_same_thing_is_spelled_the_same_in_every_command():
    """Each option that several commands share has one spelling everywhere (older spellings stay aliases)."""
    import typer

    command = typer.main.get_command(app)
    seen = set()
    for name, sub in command.commands.items():
        opts = {o for p in sub.params if p.param_type_name == "option" for o in p.opts}
        seen |= opts
        assert "--out" not in opts or "-o" in opts, name
        assert "--batch-size" not in opts or "--batch" in opts, name
        assert "--seq-len" not in opts or "--seq" in opts, name
        assert ("--new" in opts) == ("--max-new-tokens" in opts), name
        assert "--json" in opts or name not in ("summary", "plan", "diff", "bench", "list", "recipes", "plugins"), name
    assert {"--out", "-o", "--batch", "--seq", "--force", "--json"} <= seen
