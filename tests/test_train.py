"""Training: every family learns, checkpoints resume exactly and survive kills, bad input is a clear error."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import typer
from clean_errors import Crash, crash_after_checkpoint
from typer.testing import CliRunner

import zoo
from zoo.errors import RecipeError, TrainError
from zoo.files import WriteError
from zoo.train import checkpoint as ckpt
from zoo.train import load_run, read_metrics, train
from zoo.train.data import seven_segment_digits
from zoo.train.loop import Trainer, lr_factor, parameter_groups
from zoo.train.objectives import mask_tokens
from zoo.train.tokenizer import BPETokenizer, ByteTokenizer

# Small and fast: a few steps of a few short sequences; held-out metrics at the end only.
FAST = {
    "train.batch_size": 4,
    "train.seq_len": 32,
    "train.warmup_steps": 2,
    "train.eval_interval": 0,
    "train.eval_batches": 2,
    "train.log_interval": 1,
}


def fast(steps: int, **more) -> dict:
    return {**FAST, "train.steps": steps, "train.checkpoint_interval": steps, **more}


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return ckpt.read_model_state(ckpt.latest_checkpoint(run_dir))


def losses(run_dir: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in read_metrics(run_dir) if r["split"] == "train"}


# ---------------------------------------------------------------------------------------------- pieces


def test_learning_rate_warms_up_then_follows_a_cosine_to_the_floor():
    f = [lr_factor(s, warmup=10, total=110, min_ratio=0.1) for s in range(110)]
    assert f[0] == pytest.approx(0.1) and f[9] == pytest.approx(1.0)
    assert all(a < b for a, b in zip(f[:9], f[1:10], strict=True))  # rising during warmup
    assert all(a >= b for a, b in zip(f[10:-1], f[11:], strict=True))  # then never rising
    assert f[60] == pytest.approx(0.1 + 0.9 * 0.5)  # half way through the cosine
    assert lr_factor(110, warmup=10, total=110, min_ratio=0.1) == pytest.approx(0.1)


def test_weight_decay_skips_norms_biases_and_embeddings():
    model = zoo.build("gpt-tiny")
    decay, rest = parameter_groups(model, 0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    assert decayed and all(n.endswith("_proj.weight") for n in decayed)
    assert "embedding.token.weight" in {names[id(p)] for p in rest["params"]}  # the tied head's weight too
    assert not any("norm" in n or n.endswith(".bias") or "positional" in n for n in decayed)
    assert len(decay["params"]) + len(rest["params"]) == len(list(model.parameters()))
    assert rest["weight_decay"] == 0.0


def test_masked_lm_masks_fifteen_percent_eighty_ten_ten():
    tok = ByteTokenizer()
    ids = torch.randint(32, 127, (64, 512), generator=torch.Generator().manual_seed(0))
    inputs, labels = mask_tokens(ids, tok, 256, 0.15, torch.Generator().manual_seed(1))
    chosen = labels != -100
    assert chosen.float().mean().item() == pytest.approx(0.15, abs=0.01)
    assert torch.equal(labels[chosen], ids[chosen])
    masked = (inputs == tok.mask_id) & chosen
    kept = (inputs == ids) & chosen
    assert (masked.sum() / chosen.sum()).item() == pytest.approx(0.8, abs=0.02)
    assert (kept.sum() / chosen.sum()).item() == pytest.approx(0.1 + 0.1 / 250, abs=0.02)
    assert torch.equal(inputs[~chosen], ids[~chosen])
    assert not torch.isin(inputs, torch.tensor(sorted(tok.special_ids() - {tok.mask_id}))).any()


def test_tokenizers_round_trip_text():
    text = "The “if” statement — naïve café: 1 + 2 == 3\n"
    byte = ByteTokenizer()
    assert byte.decode(byte.encode(text)) == text
    assert not set(byte.encode(text)) & byte.special_ids()
    bpe = BPETokenizer.train([text * 20, "the quick brown fox jumps over the lazy dog " * 50], vocab_size=300)
    assert bpe.vocab_size <= 300 and bpe.pad_id == 0
    assert bpe.decode(bpe.encode(text)) == text
    assert len(bpe.encode("the lazy dog")) < len("the lazy dog")  # merges learned
    with pytest.raises(TrainError, match="vocab_size >= 263"):
        BPETokenizer.train(["abc"], vocab_size=256)


def test_seven_segment_digits_are_varied_and_in_range():
    images, labels, _ = seven_segment_digits(200, seed=0)
    assert images.shape == (200, 1, 8, 8) and set(labels.tolist()) == set(range(10))
    assert 0 <= images.min() and images.max() <= 1
    assert len({tuple(im.flatten().tolist()) for im in images}) == 200


# ---------------------------------------------------------------------------------------------- learning


def test_decoder_learns_and_generates_from_its_run(tmp_path):
    result = train("gpt-tiny", out=tmp_path / "run", **fast(40, **{"train.lr": 3e-3}))
    seen = losses(tmp_path / "run")
    assert seen[40] < seen[1] - 1.0  # from ~5.5 (uniform over 256 bytes) well down
    assert result.eval["loss"] < 4.0 and result.eval["perplexity"] == pytest.approx(math.exp(result.eval["loss"]))
    from zoo.generate import generate_text

    texts, stats = generate_text(tmp_path / "run", ["The "], max_new_tokens=20, seed=0)
    assert isinstance(texts[0], str) and stats.new_tokens == 20


@pytest.mark.parametrize(
    ("name", "overrides", "metric"),
    [
        ("bert-tiny", {}, "accuracy"),  # masked LM
        ("bert-tiny", {"head": {"type": "classification"}, "num_classes": 4}, "accuracy"),  # topic classification
        ("vit-tiny", {}, "accuracy"),
        ("t5-tiny", {"train.seq_len": 6}, "exact_match"),
        ("moe-tiny", {}, "accuracy"),
    ],
    ids=["masked-lm", "classification", "vit", "seq2seq", "moe-decoder"],
)
def test_every_family_trains_and_reports_its_metric(tmp_path, name, overrides, metric):
    settings = {**fast(40, **{"train.lr": 3e-3, "train.batch_size": 16}), **overrides}
    result = train(name, out=tmp_path / "run", **settings)
    seen = list(losses(tmp_path / "run").values())
    assert sum(seen[-5:]) < sum(seen[:5])  # averaged: single small batches are noisy
    assert metric in result.eval and 0.0 <= result.eval[metric] <= 1.0
    assert math.isfinite(result.eval["loss"])


@pytest.mark.slow
def test_seq2seq_exact_match_is_what_greedy_generation_reproduces(tmp_path):
    from zoo.generate import generate

    settings = fast(
        500,
        **{
            "train.seq_len": 4,
            "train.batch_size": 32,
            "train.lr": 3e-3,
            "train.warmup_steps": 30,
            "train.eval_batches": 4,
        },
    )
    result = train("t5-tiny", out=tmp_path / "run", **settings)
    assert 0.2 < result.eval["exact_match"]  # learned something, so the comparison below means something
    trainer = Trainer(result.model.recipe, data=None, out=tmp_path / "other", device="cpu", resume=False, callback=None)
    hits = total = 0
    for batch in trainer.objective.eval_batches(32, 4):
        sources = [ids[mask].tolist() for ids, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True)]
        targets = [row[row != -100].tolist() for row in batch["labels"]]  # target + [eos]
        out = generate(result.model, sources, max_new_tokens=5, stop_tokens=[trainer.tokenizer.eos_id])
        hits += sum(tokens + [trainer.tokenizer.eos_id] == t for tokens, t in zip(out.tokens, targets, strict=True))
        total += len(targets)
    assert hits / total == pytest.approx(result.eval["exact_match"])


@pytest.mark.slow
def test_vit_learns_the_digits_well_above_chance(tmp_path):
    settings = fast(
        300, **{"train.batch_size": 32, "train.lr": 2e-3, "train.warmup_steps": 20, "train.eval_batches": 8}
    )
    result = train("vit-tiny", out=tmp_path / "run", **settings)
    assert result.eval["accuracy"] > 0.5  # chance is 0.1


def test_precision_options_train_on_cpu(tmp_path):
    for precision in ("bf16", "fp16"):
        result = train("gpt-tiny", out=tmp_path / precision, **fast(3, **{"train.precision": precision}))
        assert math.isfinite(result.train_loss)


def test_gradient_accumulation_averages_micro_steps_into_one_step(tmp_path, monkeypatch):
    # Every micro-step of a step draws the same examples here, so accumulating two of them must give the
    # gradient of one: the same weights, step after step, as training without accumulation.
    monkeypatch.setattr("zoo.train.loop.batch_seed", lambda seed, step, micro: step)
    one = train("gpt-tiny", out=tmp_path / "one", **fast(3))
    two = train("gpt-tiny", out=tmp_path / "two", **fast(3, **{"train.grad_accum": 2}))
    assert losses(tmp_path / "one") == pytest.approx(losses(tmp_path / "two"), rel=1e-5)
    for name, tensor in one.model.state_dict().items():
        torch.testing.assert_close(two.model.state_dict()[name], tensor, rtol=1e-4, atol=1e-6)
    three = train("gpt-tiny", out=tmp_path / "three", **fast(3, **{"train.lr": 2e-3}))
    assert not torch.allclose(three.model.head.proj.weight, one.model.head.proj.weight)  # the check can fail


# ---------------------------------------------------------------------------------------------- checkpoints


def test_checkpoint_round_trip(tmp_path):
    result = train("llama-tiny", out=tmp_path / "run", **fast(3))
    path = ckpt.latest_checkpoint(tmp_path / "run")
    assert path == result.checkpoint and path.name == "step-00000003"
    assert {p.name for p in path.iterdir()} == {
        "recipe.yaml",
        "model.safetensors",
        "optimizer.pt",
        "trainer.pt",
        "tokenizer.json",
        "run.json",
    }
    loaded = zoo.load(path)  # a checkpoint is also a plain `zoo.save` directory
    for name, tensor in result.model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    run = load_run(tmp_path / "run")
    assert run.step == 3 and run.info["objective"] == "causal_lm" and isinstance(run.tokenizer, ByteTokenizer)
    assert run.model.head.proj.weight is run.model.embedding.token.weight  # still tied after loading


def test_old_checkpoints_are_pruned(tmp_path):
    train("gpt-tiny", out=tmp_path / "run", **fast(6, **{"train.checkpoint_interval": 1, "train.keep_checkpoints": 2}))
    kept = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir() if p.name.startswith("step-"))
    assert kept == ["step-00000005", "step-00000006"]


@pytest.mark.parametrize("name", ["gpt-tiny", "bert-tiny", "t5-tiny", "vit-tiny"])
def test_resumed_run_equals_the_uninterrupted_one(tmp_path, name):
    settings = fast(6, **{"train.checkpoint_interval": 3, "train.lr": 3e-3, "dropout": 0.1})
    train(name, out=tmp_path / "whole", **settings)
    with pytest.raises(Crash):
        train(name, out=tmp_path / "split", callback=crash_after_checkpoint(3), **settings)
    train(name, out=tmp_path / "split", resume=True, **settings)
    assert losses(tmp_path / "split") == losses(tmp_path / "whole")
    whole, split = final_weights(tmp_path / "whole"), final_weights(tmp_path / "split")
    assert all(torch.equal(whole[k], split[k]) for k in whole)


def test_a_failed_checkpoint_write_keeps_the_previous_one(tmp_path, monkeypatch):
    run = tmp_path / "run"
    train("gpt-tiny", out=run, **fast(2, **{"train.checkpoint_interval": 1}))
    real_save = torch.save

    def dying_save(obj, f, *args, **kwargs):
        real_save(obj, f, *args, **kwargs)
        raise Crash  # the process dies half-way through writing step 3

    monkeypatch.setattr(torch, "save", dying_save)
    with pytest.raises(WriteError, match=r"step-00000003 could not be written: Crash"):  # one message, named
        train("gpt-tiny", out=run, resume=True, allow_changes=True, **fast(3, **{"train.checkpoint_interval": 1}))
    monkeypatch.undo()
    assert ckpt.latest_checkpoint(run).name == "step-00000002"
    assert load_run(run).step == 2
    (run / "checkpoints" / ".tmp-step-00000003-leftover").mkdir()  # what a SIGKILL would leave behind
    assert ckpt.latest_checkpoint(run).name == "step-00000002"
    train("gpt-tiny", out=run, resume=True, allow_changes=True, **fast(3, **{"train.checkpoint_interval": 1}))
    assert ckpt.latest_checkpoint(run).name == "step-00000003"
    assert not list((run / "checkpoints").glob(".tmp-*"))


KILLABLE = """
import sys
from pathlib import Path
from zoo.train import train
train("gpt-tiny", out=sys.argv[1], resume=(Path(sys.argv[1]) / "checkpoints").exists(), **{settings!r})
"""


@pytest.mark.slow
def test_sigkill_at_any_moment_then_resume(tmp_path):
    run = tmp_path / "run"
    settings = fast(400, **{"train.checkpoint_interval": 2, "train.batch_size": 2, "train.seq_len": 16})
    script = tmp_path / "killable.py"
    script.write_text(KILLABLE.format(settings=settings))
    for delay in (0.0, 0.05, 0.13):  # the kill lands at different points of the steps and checkpoint writes
        proc = subprocess.Popen([sys.executable, str(script), str(run)], env={**os.environ, "OMP_NUM_THREADS": "1"})
        before = ckpt.latest_checkpoint(run)
        deadline = time.monotonic() + 120
        while ckpt.latest_checkpoint(run) == before:  # wait for a checkpoint of this process
            assert proc.poll() is None and time.monotonic() < deadline, "training ended or hung before the kill"
            time.sleep(0.005)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        last = ckpt.latest_checkpoint(run)
        assert last is not None and last != before
        zoo.load(last)  # every file of the newest complete checkpoint is whole
        ckpt.read_training_state(last)
    step = int(ckpt.latest_checkpoint(run).name.removeprefix("step-"))
    resumed = train("gpt-tiny", out=run, resume=True, allow_changes=True, **{**settings, "train.steps": step + 2})
    assert resumed.step == step + 2
    steps = [r["step"] for r in read_metrics(run) if r["split"] == "train"]
    assert steps == list(range(1, step + 3))  # one record per step: nothing lost, nothing twice


# ---------------------------------------------------------------------------------------------- bad input


def test_nan_loss_stops_with_its_step_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    from zoo.train.objectives import CausalLM

    real = CausalLM.loss
    calls = {"n": 0}

    def poisoned(self, model, batch):
        calls["n"] += 1
        loss = real(self, model, batch)
        return loss * float("nan") if calls["n"] == 5 else loss

    monkeypatch.setattr(CausalLM, "loss", poisoned)
    with pytest.raises(TrainError, match=r"loss became nan at step 5.*step-00000004"):
        train("gpt-tiny", out=tmp_path / "run", **fast(8, **{"train.checkpoint_interval": 2, "train.log_interval": 3}))
    assert ckpt.latest_checkpoint(tmp_path / "run").name == "step-00000004"
    state = final_weights(tmp_path / "run")
    assert all(torch.isfinite(t).all() for t in state.values())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"data": "missing.txt"}, "no such file or folder"),
        ({"data": "EMPTY"}, "the text is empty"),
        ({"train.seq_len": 200}, r"train.seq_len: 200 positions do not fit the learned position table of max_len 128"),
        ({"vocab_size": 200}, r"tokenizer has 256 ids but the recipe's vocab_size is 200"),
        ({"train.tokenizer": "bpe"}, r"needs vocab_size >= 263"),
        ({"train.batch_size": 0}, r"train.batch_size: Input should be greater than or equal to 1"),
    ],
    ids=["missing-data", "empty-data", "seq-len", "vocab", "bpe-vocab", "invalid-config"],
)
def test_bad_input_is_a_clear_error(tmp_path, kwargs, message):
    kwargs = dict(kwargs)
    if kwargs.get("data") == "EMPTY":
        (tmp_path / "empty.txt").write_text("  \n", encoding="utf-8")
        kwargs["data"] = tmp_path / "empty.txt"
    elif "data" in kwargs:
        kwargs["data"] = tmp_path / kwargs["data"]
    data = kwargs.pop("data", None)
    with pytest.raises((TrainError, RecipeError), match=message):
        train("gpt-tiny", data=data, out=tmp_path / "run", **{**fast(2), **kwargs})


def test_class_count_mismatch_is_an_error(tmp_path):
    with pytest.raises(TrainError, match="the data has 10 classes but the recipe's classifier has num_classes 5"):
        train("vit-tiny", out=tmp_path / "run", num_classes=5, **fast(2))


def test_resume_refuses_a_checkpoint_of_another_recipe(tmp_path):
    train("gpt-tiny", out=tmp_path / "run", **fast(2))
    with pytest.raises(TrainError, match=r"different recipe(.|\n)*d_model: 64 → 32"):
        train("gpt-tiny", out=tmp_path / "run", resume=True, d_model=32, **fast(4))
    with pytest.raises(TrainError, match="already holds a run .* pass --resume"):
        train("gpt-tiny", out=tmp_path / "run", **fast(4))


# ---------------------------------------------------------------------------------------------- user data


def test_user_text_file_and_bpe_tokenizer(tmp_path):
    text = tmp_path / "story.txt"
    text.write_text("Once upon a time there was a small model that wanted to learn. " * 200, encoding="utf-8")
    result = train(
        "gpt-tiny", data=text, out=tmp_path / "run", vocab_size=320, **fast(10, **{"train.tokenizer": "bpe"})
    )
    run = load_run(tmp_path / "run")
    assert isinstance(run.tokenizer, BPETokenizer) and run.info["data"] == str(text)
    assert run.tokenizer.decode(run.tokenizer.encode("Once upon a time")) == "Once upon a time"
    assert result.eval["loss"] < 5.0


def test_user_tsv_for_classification_and_seq2seq(tmp_path):
    rows = tmp_path / "labels.tsv"
    rows.write_text(
        "".join(f"{'pos' if i % 2 else 'neg'}\t{'good great fine' if i % 2 else 'bad awful'} {i}\n" for i in range(60))
    )
    result = train(
        "bert-tiny", data=rows, out=tmp_path / "cls", num_classes=2, **{"head": {"type": "classification"}}, **fast(5)
    )
    assert load_run(tmp_path / "cls").info["labels"] == ["neg", "pos"] and "accuracy" in result.eval
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{w}\t{w.upper()}\n" for w in ["cat", "dog", "bird", "fish", "cow", "ant"] * 5))
    result = train("t5-tiny", data=pairs, out=tmp_path / "s2s", **fast(5, **{"train.seq_len": 8}))
    assert "exact_match" in result.eval


def test_user_image_folder(tmp_path):
    image = pytest.importorskip("PIL.Image")
    images, labels, _ = seven_segment_digits(40, seed=1)
    for i, (im, label) in enumerate(zip(images, labels, strict=True)):
        folder = tmp_path / "digits" / str(int(label))
        folder.mkdir(parents=True, exist_ok=True)
        image.fromarray((im[0] * 255).byte().numpy(), mode="L").save(folder / f"{i}.png")
    result = train("vit-tiny", data=tmp_path / "digits", out=tmp_path / "run", **fast(3))
    assert load_run(tmp_path / "run").info["labels"] == [str(d) for d in range(10)]
    assert "accuracy" in result.eval


# ---------------------------------------------------------------------------------------------- records, CLI


def test_metrics_records_and_resume_drops_records_past_the_checkpoint(tmp_path):
    run = tmp_path / "run"
    settings = fast(4, **{"train.checkpoint_interval": 2, "train.eval_interval": 2})
    with pytest.raises(Crash):
        train("gpt-tiny", out=run, callback=crash_after_checkpoint(2), **settings)
    with (run / "metrics.jsonl").open("a") as f:  # what the killed process wrote after its checkpoint
        f.write(json.dumps({"split": "train", "step": 3, "loss": 99.0}) + "\n")
    train("gpt-tiny", out=run, resume=True, **settings)
    records = read_metrics(run)
    assert [r["step"] for r in records if r["split"] == "train"] == [1, 2, 3, 4]
    assert [r["step"] for r in records if r["split"] == "eval"] == [2, 4]
    assert 99.0 not in [r["loss"] for r in records]
    first = records[0]
    assert {"loss", "lr", "grad_norm", "tokens_per_s", "elapsed_s"} <= set(first)


def cli_app() -> typer.Typer:
    from zoo.cli import ZooGroup, generate, train

    app = typer.Typer(cls=ZooGroup)
    train.register(app)
    generate.register(app)
    return app


def test_cli_train_generate_plot(tmp_path):
    runner = CliRunner()
    app = cli_app()
    run = tmp_path / "run"
    sets = [a for k, v in fast(6).items() for a in ("--set", f"{k}={v}")]
    result = runner.invoke(app, ["train", "gpt-tiny", "--out", str(run), "--device", "cpu", *sets])
    assert result.exit_code == 0, result.output
    assert "Parameters by component kind" in result.output and "held-out" in result.output
    assert f"zoo generate {run}" in result.output
    result = runner.invoke(
        app, ["generate", str(run), "--prompt", "The ", "--max-new-tokens", "8", "--stats", "--seed", "1"]
    )
    assert result.exit_code == 0, result.output
    assert "time to first token (TTFT)" in result.output and "KV cache memory" in result.output
    # 7 steps after the first token: the first and the last timed alone, at positions 4 + 0 and 4 + 7
    assert "TPOT near position 4 " in result.output and "TPOT near position 11 " in result.output
    pytest.importorskip("matplotlib")
    result = runner.invoke(app, ["plot", str(run)])
    assert result.exit_code == 0, result.output
    assert (run / "metrics.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_renders_library_errors_without_a_traceback(tmp_path):
    result = CliRunner().invoke(cli_app(), ["generate", str(tmp_path / "nothing"), "--prompt", "x"])
    assert result.exit_code == 2
    assert "no such run directory" in result.output and "Traceback" not in result.output


def test_importing_the_recipe_module_does_not_load_torch():
    code = "import sys, zoo.recipe; print('torch' in sys.modules, zoo.recipe.Recipe.model_fields['train'].annotation)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "<class", "'zoo.recipe.training.TrainConfig'>"]


def test_trainer_uses_the_embedded_english_text():
    recipe = zoo.load_recipe("gpt-tiny", **fast(1))
    trainer = Trainer(
        recipe, data=None, out=Path("/nonexistent/never-written"), device="cpu", resume=False, callback=None
    )
    assert "Python" in trainer.objective.description
    sample = trainer.tokenizer.decode(trainer.objective.batch(torch.Generator().manual_seed(0), 2)["input_ids"][0])
    assert sum(c.isalpha() or c.isspace() for c in sample) > 0.7 * len(sample)  # English, not noise
