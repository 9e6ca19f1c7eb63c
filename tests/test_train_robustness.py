"""Training never keeps a broken checkpoint as good, never silently changes a resumed run, refuses binary
data, and cleans what a killed run left behind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from clean_errors import FAST as TINY_RUN

import zoo
from zoo.errors import RecipeError, TrainError, ZooError
from zoo.train import checkpoint as ckpt
from zoo.train import read_metrics, train
from zoo.train.loop import Trainer, default_run_dir, lr_factor

FAST = {
    **TINY_RUN,
    "train.checkpoint_interval": 1,
    "train.lr": 1e-3,
}


def fast(**more) -> dict:
    return {**FAST, **more}


def all_finite(checkpoint: Path) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in ckpt.read_model_state(checkpoint).values())


class Crash(Exception):
    pass


# ---------------------------------------------------------------------------------------------- NaN / inf


def test_weights_that_became_non_finite_are_never_saved_as_good(tmp_path):
    """The reproducer: train.lr=1e38 breaks the weights in the step whose loss is still finite."""
    run = tmp_path / "run"
    with pytest.raises(TrainError, match=r"weights became non-finite by step 1 .*none was written"):
        train("gpt-tiny", out=run, device="cpu", **fast(**{"train.steps": 4, "train.lr": 1e38}))
    assert ckpt.latest_checkpoint(run) is None


def test_a_divergence_keeps_and_names_the_last_checkpoint_with_finite_weights(tmp_path, monkeypatch):
    # Steps 1-2 train normally; from step 3 the learning rate overflows float32, which ruins the weights.
    monkeypatch.setattr("zoo.train.loop.lr_factor", lambda step, **kw: 1.0 if step < 2 else 1e45)
    run = tmp_path / "run"
    with pytest.raises(TrainError, match=r"non-finite by step 3 .*The last good checkpoint is kept \(step-00000002\)"):
        train("gpt-tiny", out=run, device="cpu", **fast(**{"train.steps": 5}))
    latest = ckpt.latest_checkpoint(run)
    assert latest.name == "step-00000002" and all_finite(latest)


def test_a_checkpoint_with_non_finite_weights_is_refused_on_resume(tmp_path):
    run = tmp_path / "run"
    train("gpt-tiny", out=run, device="cpu", **fast())
    latest = ckpt.latest_checkpoint(run)
    from safetensors.torch import load_file, save_file

    state = load_file(latest / "model.safetensors")
    state["final_norm.weight"] = torch.full_like(state["final_norm.weight"], float("nan"))
    save_file(state, latest / "model.safetensors")
    info = ckpt.read_info(latest)
    info.pop("sha256")  # as an older zoo wrote it: no checksum to catch the change
    (latest / "run.json").write_text(json.dumps(info))
    with pytest.raises(zoo.ZooError, match=r"model.safetensors: 1 weights hold nan or inf \(e.g. final_norm.weight\)"):
        train("gpt-tiny", out=run, device="cpu", resume=True, **fast())


# ---------------------------------------------------------------------------------------------- resume


def test_resume_refuses_a_changed_setting_with_the_difference(tmp_path):
    run = tmp_path / "run"
    train("gpt-tiny", out=run, device="cpu", **fast())
    with pytest.raises(TrainError) as info:
        train("gpt-tiny", out=run, device="cpu", resume=True, **fast(**{"train.lr": 2e-3, "train.steps": 3}))
    message = str(info.value)
    assert "as it was started" in message and "(saved → given)" in message
    assert "train.lr: 0.001 → 0.002" in message and "train.steps: 2 → 3" in message
    assert "--allow-changes" in message
    assert [r["step"] for r in read_metrics(run) if r["split"] == "train"] == [1, 2]  # nothing trained


def test_model_changes_are_refused_even_when_changes_are_allowed(tmp_path):
    run = tmp_path / "run"
    train("gpt-tiny", out=run, device="cpu", **fast())
    with pytest.raises(TrainError, match=r"different recipe(.|\n)*d_model: 64 → 32"):
        train("gpt-tiny", out=run, device="cpu", resume=True, allow_changes=True, d_model=32, **fast())
    with pytest.raises(TrainError, match=r"train.tokenizer: 'byte' → 'bpe'"):
        train("gpt-tiny", out=run, device="cpu", resume=True, allow_changes=True, **fast(**{"train.tokenizer": "bpe"}))


def test_allowed_changes_reach_the_optimizer_the_schedule_and_the_logs(tmp_path):
    run = tmp_path / "run"
    train("gpt-tiny", out=run, device="cpu", **fast())
    events = []
    changed = fast(**{"train.lr": 2e-3, "train.steps": 4, "train.weight_decay": 0.05})
    recipe = zoo.load_recipe("gpt-tiny", **changed)
    trainer = Trainer(recipe, data=None, out=run, device="cpu", resume=True, allow_changes=True, callback=events.append)
    try:
        expected = [2e-3 * lr_factor(s, warmup=1, total=4, min_ratio=0.1) for s in (2, 3)]
        assert trainer.scheduler.base_lrs == [2e-3, 2e-3]
        assert [g["lr"] for g in trainer.optimizer.param_groups] == [expected[0]] * 2
        assert [g["weight_decay"] for g in trainer.optimizer.param_groups] == [0.05, 0.0]
        notices = [e.data["message"] for e in events if e.kind == "notice"]
        assert any("train.lr: 0.001 → 0.002" in m and "train.steps: 2 → 4" in m for m in notices)
        trainer.run()
    finally:
        trainer.close()
    logged = {r["step"]: r["lr"] for r in read_metrics(run) if r["split"] == "train"}
    assert logged[1] == logged[2] == 1e-3  # the first run's own rates stay as they were
    assert [logged[3], logged[4]] == expected  # the new peak, on the new schedule: what the optimizer used
    assert ckpt.read_info(ckpt.latest_checkpoint(run))["step"] == 4
    assert zoo.load_recipe(ckpt.latest_checkpoint(run) / "recipe.yaml").train.lr == 2e-3  # the next resume's base


def test_fewer_steps_than_the_checkpoint_is_an_error(tmp_path):
    run = tmp_path / "run"
    train("gpt-tiny", out=run, device="cpu", **fast(**{"train.steps": 3}))
    with pytest.raises(TrainError, match=r"train.steps \(2\) is below the step of .*step-00000003 \(3\)"):
        train("gpt-tiny", out=run, device="cpu", resume=True, allow_changes=True, **fast())


# ---------------------------------------------------------------------------------------------- data


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (bytes(range(256)) * 40, r"is not a text file: it holds NUL bytes \(the first at byte 0\)"),
        ("café au lait\n".encode("latin-1") * 200, r"is not a text file: it is not UTF-8 \(byte 3 is b'\\xe9'\)"),
    ],
    ids=["binary", "latin-1"],
)
def test_binary_data_is_refused_naming_the_file(tmp_path, content, message):
    data = tmp_path / "weights.bin"
    data.write_bytes(content)
    with pytest.raises(TrainError, match=message) as info:
        train("gpt-tiny", data=data, out=tmp_path / "run", device="cpu", **fast())
    assert str(data) in str(info.value)


def test_utf8_text_cut_at_the_sample_boundary_still_trains(tmp_path):
    from zoo.train.data import TEXT_SAMPLE, load_documents

    text = "a" * (TEXT_SAMPLE - 1) + "é" + " more text" * 100  # the sample ends inside the two bytes of é
    (tmp_path / "t.txt").write_text(text, encoding="utf-8")
    assert load_documents(tmp_path / "t.txt")[0][1] == text


# ---------------------------------------------------------------------------------------------- leftovers


def leave_leftovers(run: Path, *, step_folders: bool) -> list[str]:
    root = run / "checkpoints"
    (root / ".tmp-step-00000003-x1y2").mkdir()
    (root / ".tmp-step-00000003-x1y2" / "model.safetensors").write_bytes(b"half")
    (root / ".old-step-00000002").mkdir()
    (root / ".del-step-00000001").mkdir()
    (root / ".latest.abc123.tmp").write_text("step-0000")
    (run / ".metrics.jsonl.q9.tmp").write_text("{")
    left = [
        "checkpoints/.tmp-step-00000003-x1y2",
        "checkpoints/.old-step-00000002",
        "checkpoints/.del-step-00000001",
        "checkpoints/.latest.abc123.tmp",
        ".metrics.jsonl.q9.tmp",
    ]
    if step_folders:
        (root / "step-00000000").mkdir()  # half-deleted by an older zoo's pruning: no run.json, no weights
        (root / "step-00000000" / "optimizer.pt").write_bytes(b"")
        (root / "step-00000009").mkdir()  # newer than every checkpoint: not zoo's leftover, so it stays
        left.append("checkpoints/step-00000000")
    return sorted(left)


@pytest.mark.parametrize("resume", [True, False], ids=["resume", "fresh"])
def test_a_run_removes_what_a_killed_run_left_and_says_so(tmp_path, resume):
    run = tmp_path / "run"
    if resume:
        train("gpt-tiny", out=run, device="cpu", **fast())
    else:
        (run / "checkpoints").mkdir(parents=True)
    expected = leave_leftovers(run, step_folders=resume)
    events = []
    train("gpt-tiny", out=run, device="cpu", resume=resume, callback=events.append, **fast())
    removed = [e.data["removed"] for e in events if e.kind == "notice" and "removed" in e.data]
    assert len(removed) == 1 and sorted(removed[0]) == expected
    assert not [p.name for p in (run / "checkpoints").iterdir() if p.name.startswith(".")]
    assert not list(run.glob(".*.tmp"))
    assert not (run / "checkpoints" / "step-00000000").exists()
    assert (run / "checkpoints" / "step-00000009").exists() == resume
    assert ckpt.latest_checkpoint(run).name == "step-00000002"
    events.clear()
    train("gpt-tiny", out=run, device="cpu", resume=True, callback=events.append, **fast())  # nothing left now
    assert not [e for e in events if e.kind == "notice" and "removed" in e.data]


def test_a_kill_while_pruning_never_leaves_a_half_deleted_checkpoint(tmp_path, monkeypatch):
    real_rmtree = shutil.rmtree

    def dying_rmtree(path, *args, **kwargs):
        path = Path(path)
        if path.is_dir() and "step-00000001" in path.name:
            (path / "model.safetensors").unlink()  # one file gone, then the process dies
            raise Crash
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr("zoo.train.checkpoint.shutil.rmtree", dying_rmtree)
    run = tmp_path / "run"
    with pytest.raises(Crash):
        train("gpt-tiny", out=run, device="cpu", **fast(**{"train.keep_checkpoints": 1}))
    monkeypatch.undo()
    visible = sorted(p for p in (run / "checkpoints").iterdir() if p.name.startswith("step-"))
    assert [p.name for p in visible] == ["step-00000002"]  # step 1 went hidden before its deletion began
    for folder in visible:  # every visible checkpoint folder is whole
        assert all((folder / name).is_file() for name in ckpt.REQUIRED), folder
    assert ckpt.latest_checkpoint(run).name == "step-00000002"


# ---------------------------------------------------------------------------------------------- settings


@pytest.mark.parametrize("name", ["../escaped-run", "a/b", "/tmp/abs", "..", ".", " "])
def test_a_run_name_never_escapes_the_runs_folder(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TrainError, match="cannot name a run folder inside runs/"):
        default_run_dir(name, resume=False)
    with pytest.raises(ZooError):
        train("gpt-tiny", device="cpu", name=name, **fast())
    assert not (tmp_path / "escaped-run").exists() and sorted(p.name for p in tmp_path.iterdir()) in ([], ["runs"])


def test_glob_characters_in_a_run_name_are_plain_characters(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "x-2").mkdir(parents=True)  # matches the pattern "[x]-*" if it were a glob
    assert default_run_dir("[x]", resume=False) == Path("runs") / "[x]"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"train.seed": 10**26}, r"train.seed: Input should be less than or equal to 9223372036854775807"),
        ({"train.lr": float("inf")}, r"train.lr: Input should be a finite number"),
        ({"train.steps": 10**26}, r"train.steps: Input should be less than or equal to 2147483647"),
        ({"train.batch_size": 10**12}, r"train.batch_size: Input should be less than or equal to 2147483647"),
    ],
    ids=["seed", "lr-inf", "steps", "batch"],
)
def test_training_numbers_are_bounded(override, message):
    with pytest.raises(RecipeError, match=message):
        zoo.load_recipe("gpt-tiny", **override)
