"""Training as a user drives it: resume as started, Ctrl-C, schedule warnings, plots, --init-from, zoo eval."""

from __future__ import annotations

import json
import math
import signal
from pathlib import Path

import pytest
import torch
from clean_errors import FAST as TINY_RUN
from clean_errors import Crash, assert_clean_error, cli, crash_after_checkpoint

import zoo
from zoo.errors import TrainError
from zoo.train import TrainInterrupted, evaluate, load_run, metric_panels, read_metrics, train
from zoo.train import checkpoint as ckpt
from zoo.train.loop import Trainer

FAST = {**TINY_RUN, "train.checkpoint_interval": 2}


def fast(**more) -> dict:
    return {**FAST, **more}


def sets(settings: dict) -> list[str]:
    return [a for k, v in settings.items() for a in ("--set", f"{k}={v}")]


def train_losses(run: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in read_metrics(run) if r["split"] == "train"}


def notices(events) -> list[str]:
    return [e.data["message"] for e in events if e.kind == "notice"]


# ---------------------------------------------------------------------------------------------- resume


def test_resume_without_set_continues_with_the_overrides_the_run_was_started_with(tmp_path):
    settings = fast(**{"train.steps": 4})
    train("gpt-tiny", out=tmp_path / "whole", device="cpu", **settings)
    run = tmp_path / "run"
    with pytest.raises(Crash):
        train("gpt-tiny", out=run, device="cpu", callback=crash_after_checkpoint(2), **settings)
    started = ckpt.read_start(run)
    assert started["recipe"] == "gpt-tiny" and started["overrides"]["train.steps"] == 4
    result = cli("train", "gpt-tiny", "--out", str(run), "--resume", "--device", "cpu", "--no-summary")
    assert result.exit_code == 0, result.output
    assert ckpt.latest_checkpoint(run).name == "step-00000004"  # the run's 4 steps, not the file's 1000
    assert train_losses(run) == train_losses(tmp_path / "whole")  # exactly the uninterrupted run


def test_a_new_set_or_an_edited_recipe_is_refused_with_where_each_difference_comes_from(tmp_path):
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text("extends: gpt-tiny\nname: tiny\n", encoding="utf-8")
    run = tmp_path / "run"
    assert cli("train", str(recipe), "--out", str(run), "--device", "cpu", "--no-summary", *sets(fast())).exit_code == 0
    recipe.write_text("extends: gpt-tiny\nname: tiny\ntrain: {weight_decay: 0.05}\n", encoding="utf-8")
    result = cli("train", str(recipe), "--out", str(run), "--resume", "--set", "train.steps=3")
    assert_clean_error(
        result,
        "as it was started",
        "(saved → given)",
        "train.steps: 2 → 3 (a new --set)",
        "train.weight_decay: 0.1 → 0.05 (the recipe as it reads now)",
        "run.yaml",
        "--allow-changes",
    )
    assert ckpt.latest_checkpoint(run).name == "step-00000002"  # nothing trained
    args = ["train", str(recipe), "--out", str(run), "--resume", "--device", "cpu", "--no-summary"]
    result = cli(*args, "--set", "train.steps=3", "--allow-changes")
    assert result.exit_code == 0, result.output
    assert ckpt.read_start(run)["overrides"]["train.steps"] == 3  # recorded with the checkpoint of step 3
    result = cli(*args, "--set", "train.steps=4")  # the saved steps=3 -> 4 is the one change asked for
    assert_clean_error(result, "train.steps: 3 → 4 (a new --set)")
    assert "weight_decay" not in result.output  # the accepted file change is the run's own now


def test_the_library_resumes_as_started_too(tmp_path):
    run = tmp_path / "run"
    with pytest.raises(Crash):
        train("gpt-tiny", out=run, device="cpu", callback=crash_after_checkpoint(2), **fast(**{"train.steps": 4}))
    result = train("gpt-tiny", out=run, device="cpu", resume=True)  # no overrides: the run's own
    assert result.step == 4 and result.model.recipe.train.batch_size == FAST["train.batch_size"]


# ---------------------------------------------------------------------------------------------- Ctrl-C


def ctrl_c_during_step(monkeypatch, at: int) -> None:
    """A real SIGINT arriving while step ``at`` runs (after its update, as a key press would land)."""
    real = Trainer.train_step

    def step(self, n):
        out = real(self, n)
        if n == at:
            signal.raise_signal(signal.SIGINT)
        return out

    monkeypatch.setattr(Trainer, "train_step", step)


def test_ctrl_c_checkpoints_the_step_prints_the_resume_command_and_exits_130(tmp_path, monkeypatch):
    settings = fast(**{"train.steps": 6, "train.checkpoint_interval": 4})
    train("gpt-tiny", out=tmp_path / "whole", device="cpu", **settings)
    run = tmp_path / "run"
    ctrl_c_during_step(monkeypatch, 3)
    result = cli("train", "gpt-tiny", "--out", str(run), "--device", "cpu", "--no-summary", *sets(settings))
    assert result.exit_code == 130, result.output
    assert "Traceback" not in result.output and "Aborted" not in result.output
    text = " ".join(result.output.split())
    assert "stopping after this step" in text  # said at the key press
    assert "interrupted at step 3 of 6" in text
    assert f"Wrote the checkpoint of that step, {run / 'checkpoints' / 'step-00000003'}" in text
    assert f"Resume with: zoo train gpt-tiny --out {run} --resume" in text
    assert ckpt.latest_checkpoint(run).name == "step-00000003"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is put back
    monkeypatch.undo()
    result = cli("train", "gpt-tiny", "--out", str(run), "--resume", "--device", "cpu", "--no-summary")  # as printed
    assert result.exit_code == 0, result.output
    assert train_losses(run) == train_losses(tmp_path / "whole")  # the interrupt checkpoint is exact


def test_a_ctrl_c_that_cannot_wait_stops_at_once_and_names_the_last_checkpoint(tmp_path):
    def hard_stop(event):
        if event.kind == "step" and event.step == 3:
            raise KeyboardInterrupt  # what a second Ctrl-C raises wherever the loop is

    with pytest.raises(TrainInterrupted) as info:
        train("gpt-tiny", out=tmp_path / "run", device="cpu", callback=hard_stop, **fast(**{"train.steps": 6}))
    stop = info.value
    assert isinstance(stop, KeyboardInterrupt) and not stop.written
    assert stop.step == 3 and stop.checkpoint.name == "step-00000002"
    assert "the 1 step after it is lost" in stop.message
    assert stop.resume_command == f"zoo train gpt-tiny --out {tmp_path / 'run'} --resume"
    assert ckpt.latest_checkpoint(tmp_path / "run").name == "step-00000002"


# ---------------------------------------------------------------------------------------------- schedule


@pytest.mark.parametrize(("warmup", "steps", "warned"), [(5, 5, True), (9, 5, True), (1, 5, False)])
def test_warmup_that_never_ends_is_a_notice_naming_both_values(tmp_path, warmup, steps, warned):
    events = []
    recipe = zoo.load_recipe("gpt-tiny", **fast(**{"train.warmup_steps": warmup, "train.steps": steps}))
    trainer = Trainer(recipe, data=None, out=tmp_path / "run", device="cpu", resume=False, callback=events.append)
    trainer.close()
    said = [m for m in notices(events) if "warmup" in m]
    assert bool(said) == warned
    if warned:
        assert f"train.warmup_steps ({warmup}) >= train.steps ({steps})" in said[0]
        assert "never leaves its warmup" in said[0] and "--set train.warmup_steps=" in said[0]


# ---------------------------------------------------------------------------------------------- plot


RECORDS = [
    {"split": "train", "step": 1, "loss": 5.0, "lr": 1e-4, "grad_norm": 2.0, "tokens_per_s": 900.0},
    {"split": "train", "step": 2, "loss": 4.0, "lr": 2e-4, "grad_norm": 1.5, "tokens_per_s": 950.0},
    {"split": "eval", "step": 2, "loss": 4.1, "accuracy": 0.3, "perplexity": 60.3, "exact_match": 0.1},
]


def test_plot_panels_keep_each_scale_on_its_own_axis():
    panels = {p.title: p for p in metric_panels(RECORDS)}
    assert list(panels) == ["loss", "accuracy", "perplexity", "learning rate", "gradient norm", "tokens/s"]
    assert [s.label for s in panels["loss"].series] == ["train", "held-out"]
    assert [s.label for s in panels["accuracy"].series] == ["accuracy", "exact_match"]
    assert panels["accuracy"].ylim == (0.0, 1.0) and panels["perplexity"].log
    assert panels["gradient norm"].series[0].values == [2.0, 1.5]
    gpu = [{**r, "peak_memory_bytes": 3 << 29} for r in RECORDS[:2]]
    memory = {p.title: p for p in metric_panels(gpu)}["peak memory"]
    assert memory.ylabel == "GiB" and memory.series[0].values == [1.5, 1.5]
    only_train = [r for r in RECORDS if r["split"] == "train"]
    assert "accuracy" not in {p.title for p in metric_panels(only_train)}  # no data, no panel


def test_zoo_plot_draws_the_panels_under_the_recipe_name(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    run = tmp_path / "run"
    train("bert-tiny", out=run, device="cpu", **fast())
    drawn = {}
    real = Figure.savefig

    def capture(fig, *args, **kwargs):
        drawn["title"] = fig._suptitle.get_text()
        drawn["axes"] = {
            ax.get_title(): [line.get_label() for line in ax.get_lines()] for ax in fig.axes if ax.get_visible()
        }
        return real(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", capture)
    result = cli("plot", str(run))
    assert result.exit_code == 0, result.output
    assert drawn["title"] == "bert-tiny - run"
    assert set(drawn["axes"]) == {"loss", "accuracy", "learning rate", "gradient norm", "tokens/s"}
    assert drawn["axes"]["loss"] == ["train", "held-out"]
    assert {"accuracy"} == set(drawn["axes"]["accuracy"])  # accuracy is never beside perplexity or loss
    assert (run / "metrics.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="peak memory is recorded on CUDA")
def test_a_gpu_run_records_its_peak_memory(tmp_path):
    train("gpt-tiny", out=tmp_path / "run", device="cuda", **fast())
    peaks = [r["peak_memory_bytes"] for r in read_metrics(tmp_path / "run") if r["split"] == "train"]
    assert len(peaks) == 2 and all(p > 0 for p in peaks)
    assert "peak memory" in {p.title for p in metric_panels(read_metrics(tmp_path / "run"))}


# ---------------------------------------------------------------------------------------------- --init-from


def test_init_from_an_encoder_run_copies_it_and_starts_a_new_classification_head(tmp_path):
    source = tmp_path / "mlm"
    train("bert-tiny", out=source, device="cpu", **fast())
    events = []
    recipe = zoo.load_recipe("bert-tiny", head={"type": "classification"}, num_classes=4, **fast())
    trainer = Trainer(
        recipe, data=None, out=tmp_path / "cls", device="cpu", resume=False, callback=events.append, init_from=source
    )
    trainer.close()
    theirs, ours = load_run(source).model.state_dict(), trainer.model.state_dict()
    body = [n for n in ours if not n.startswith("head.")]
    assert body and all(torch.equal(ours[n], theirs[n]) for n in body)
    torch.manual_seed(recipe.train.seed)
    fresh = zoo.build(recipe).state_dict()  # the head as a new model of the recipe starts
    assert all(torch.equal(ours[n], fresh[n]) for n in ours if n.startswith("head."))
    message = next(m for m in notices(events) if m.startswith("initialised from"))
    assert f"{len(body)} tensors loaded" in message
    assert "left at their initialisation (the recipe's classification head is new, the folder's is mlm)" in message
    assert (
        "head.proj.weight, head.proj.bias" in message and "not used from the folder: head.transform.weight" in message
    )
    assert trainer.tokenizer.to_json() == load_run(source).tokenizer.to_json()


def test_cli_init_from_fine_tunes_and_records_where_the_weights_came_from(tmp_path):
    source = tmp_path / "mlm"
    train("bert-tiny", out=source, device="cpu", **fast())
    run = tmp_path / "cls"
    args = ["train", "bert-tiny", "--out", str(run), "--device", "cpu", "--no-summary", "--init-from", str(source)]
    result = cli(*args, "--set", "head.type=classification", "--set", "num_classes=4", *sets(fast()))
    assert result.exit_code == 0, result.output
    assert "left at their initialisation" in " ".join(result.output.split())
    assert load_run(run).info["init_from"] == str(source)
    assert ckpt.read_start(run)["init_from"] == str(source)
    assert_clean_error(cli(*args, "--resume"), "--init-from starts a new run", "--resume")


def test_init_from_weights_of_another_shape_names_the_first_tensor(tmp_path):
    zoo.save(zoo.build("gpt-tiny"), tmp_path / "model")
    changed = {"d_model": 32, "attention.num_heads": 2}
    model = zoo.build("gpt-tiny", **changed)
    theirs = zoo.load(tmp_path / "model").state_dict()
    first = next(n for n, t in model.state_dict().items() if n in theirs and theirs[n].shape != t.shape)
    shape = tuple(theirs[first].shape)
    with pytest.raises(TrainError) as info:
        train("gpt-tiny", out=tmp_path / "run", device="cpu", init_from=tmp_path / "model", **changed, **fast())
    message = str(info.value)
    assert f"{first} has shape {shape} in the folder but {tuple(model.state_dict()[first].shape)}" in message
    assert "in the recipe's model" in message and str(tmp_path / "model") in message
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_init_from_a_hugging_face_folder_continues_training_its_decoder(tmp_path):
    pytest.importorskip("transformers")
    from zoo.hf import to_hf

    torch.manual_seed(3)
    original = zoo.build("gpt-tiny")
    to_hf(original, tmp_path / "hf")
    events = []
    recipe = zoo.load_recipe("gpt-tiny", **fast())
    hf = tmp_path / "hf"
    trainer = Trainer(
        recipe, data=None, out=tmp_path / "run", device="cpu", resume=False, callback=events.append, init_from=hf
    )
    trainer.close()
    for name, tensor in original.state_dict().items():
        assert torch.equal(trainer.model.state_dict()[name], tensor), name
    message = next(m for m in notices(events) if m.startswith("initialised from"))
    assert "a Hugging Face checkpoint" in message and "none left at initialisation" in message
    assert "no zoo tokenizer" in message


def test_init_from_with_resume_is_refused(tmp_path):
    with pytest.raises(TrainError, match="--init-from starts a new run .* give one of them"):
        train("gpt-tiny", out=tmp_path / "run", resume=True, init_from=tmp_path / "x", **fast())


# ---------------------------------------------------------------------------------------------- zoo eval


def test_zoo_eval_scores_every_token_of_a_text_file_once(tmp_path):
    run = tmp_path / "run"
    train("gpt-tiny", out=run, device="cpu", **fast())
    text = tmp_path / "held.txt"
    text.write_text("Evaluation reads every window of this file once. " * 6, encoding="utf-8")
    result = cli("eval", str(run), "--data", str(text), "--device", "cpu", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    m = data["metrics"]
    assert data["objective"] == "causal_lm" and set(m) == {"loss", "accuracy", "perplexity"}
    assert m["perplexity"] == pytest.approx(math.exp(m["loss"])) and 0 <= m["accuracy"] <= 1
    loaded = load_run(run)  # the same figure by hand: the mean next-token loss over the whole file
    ids = torch.tensor(loaded.tokenizer.encode(text.read_text()))
    seq_len = loaded.info["seq_len"]
    total = 0.0
    with torch.no_grad():
        for start in range(0, len(ids) - 1, seq_len):
            w = ids[start : start + seq_len + 1][None]
            logits = loaded.model(w[:, :-1]).logits
            total += torch.nn.functional.cross_entropy(logits[0], w[0, 1:], reduction="sum").item()
    assert m["loss"] == pytest.approx(total / (len(ids) - 1), rel=1e-5)
    assert evaluate(run, text, device="cpu").metrics == pytest.approx(m)
    table = cli("eval", str(run), "--data", str(text), "--device", "cpu")
    assert table.exit_code == 0 and "perplexity" in table.output and "loss" in table.output


def test_zoo_eval_of_a_classifier_matches_classes_by_name(tmp_path):
    rows = tmp_path / "train.tsv"
    rows.write_text("".join(f"{'pos' if i % 2 else 'neg'}\t{'good' if i % 2 else 'bad'} text {i}\n" for i in range(40)))
    run = tmp_path / "run"
    train("bert-tiny", data=rows, out=run, device="cpu", num_classes=2, head={"type": "classification"}, **fast())
    held = tmp_path / "held.tsv"
    held.write_text("pos\tgood text again\nneg\tbad text again\npos\tgood\n")
    result = evaluate(run, held, device="cpu", batch_size=2)
    assert result.examples == 3 and set(result.metrics) == {"loss", "accuracy"}
    assert result.metrics["accuracy"] in (0, 1 / 3, 2 / 3, 1)
    held.write_text("pos\tgood\nmaybe\tunsure\n")
    assert_clean_error(
        cli("eval", str(run), "--data", str(held), "--device", "cpu"), "the class 'maybe' is not one the model knows"
    )


def test_zoo_eval_of_seq2seq_and_of_a_model_folder(tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{w}\t{w[::-1]}\n" for w in ["cat", "dog", "bird", "fish", "cow"]))
    run = tmp_path / "run"
    train("t5-tiny", data=pairs, out=run, device="cpu", **fast(**{"train.seq_len": 6}))
    result = evaluate(run, pairs, device="cpu")
    assert result.examples == 5 and set(result.metrics) == {"loss", "token_accuracy", "exact_match"}
    zoo.save(zoo.build("gpt-tiny"), tmp_path / "model")  # no tokenizer.json: bytes, as its recipe trains
    text = tmp_path / "t.txt"
    text.write_text("a few words of text " * 10)
    result = evaluate(tmp_path / "model", text, device="cpu")
    assert "text is read as UTF-8 bytes" in result.notes[0]
    assert result.metrics["loss"] == pytest.approx(math.log(256), abs=0.5)  # untrained: about uniform
