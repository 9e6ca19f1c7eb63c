"""What a user types at the ``zoo`` command: every number bounded, every bad value a clear message with exit
status 2 and no traceback, checked in the library functions the command calls."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
import torch
from clean_errors import FAST as TINY_RUN
from clean_errors import assert_clean_error, cli

import zoo
from zoo.errors import ArgumentError
from zoo.generate import MAX_NEW_TOKENS, generate, generate_text, sample_next
from zoo.limits import count_argument
from zoo.train import read_metrics, train
from zoo.train.loop import lr_factor

FAST = {
    **TINY_RUN,
    "train.checkpoint_interval": 2,
    "train.lr": 1e-3,
}
SETS = [a for k, v in FAST.items() for a in ("--set", f"{k}={v}")]
HUGE = "1" + "0" * 25  # 26 digits


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("trained") / "run"
    train("gpt-tiny", out=run, device="cpu", **FAST)
    return run


# ---------------------------------------------------------------------------------------------- zoo generate


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--top-p", "0", "--temperature", "0.8"], "top_p must be in (0.0, 1.0], got 0.0"),
        (["--top-p", "1.5"], "top_p must be in (0.0, 1.0], got 1.5"),
        (["--top-p", "nan"], "top_p must be a finite number in (0.0, 1.0], got nan"),
        (["--seed", HUGE], f"seed must be >= 0 and <= 2^63 - 1, got {HUGE}"),
        (["--seed", "-1"], "seed must be >= 0 and <= 2^63 - 1, got -1"),
        (["--max-new-tokens", HUGE], f"max_new_tokens must be >= 1 and <= 1,048,576, got {HUGE}"),
        (["--max-new-tokens", "0"], "max_new_tokens must be >= 1 and <= 1,048,576, got 0"),
        (["--temperature", "inf"], "temperature must be a finite number in [0.0, inf), got inf"),
        (["--temperature", "-0.5"], "temperature must be in [0.0, inf), got -0.5"),
        (["--top-k", "0"], "top_k must be >= 1 and <= 2^63 - 1, got 0"),
        (["--top-k", HUGE + "000000"], "top_k must be >= 1 and <= 2^63 - 1"),
    ],
    ids=["top-p-0", "top-p-big", "top-p-nan", "seed-huge", "seed-negative", "tokens-huge", "tokens-0", "temp-inf",
         "temp-negative", "top-k-0", "top-k-huge"],
)  # fmt: skip
def test_generate_numbers_are_bounded(trained, options, message):
    assert_clean_error(cli("generate", str(trained), "--prompt", "The ", *options), message)


def test_generate_checks_its_numbers_before_loading_the_run(tmp_path):
    assert_clean_error(cli("generate", str(tmp_path / "none"), "--prompt", "x", "--seed", HUGE), "seed must be")


def test_the_limits_live_in_the_library(trained):
    model = zoo.build("gpt-tiny")
    with pytest.raises(ArgumentError, match=r"top_p must be in \(0.0, 1.0\], got 0"):
        generate(model, [[1, 2]], max_new_tokens=2, temperature=0.8, top_p=0)
    with pytest.raises(ArgumentError, match="seed must be >= 0"):
        generate(model, [[1, 2]], max_new_tokens=2, seed=10**25)
    with pytest.raises(ArgumentError, match="max_new_tokens must be >= 1"):
        generate(model, [[1, 2]], max_new_tokens=MAX_NEW_TOKENS + 1)
    with pytest.raises(ArgumentError, match="max_new_tokens must be an integer"):
        generate(model, [[1, 2]], max_new_tokens=2.5)
    with pytest.raises(ArgumentError, match="temperature must be a finite number"):
        sample_next(torch.zeros(1, 4), temperature=math.inf)
    with pytest.raises(ArgumentError, match="temperature must be a finite number"):
        generate_text(trained, "x", temperature=math.nan)
    assert generate(model, [[1, 2]], max_new_tokens=2, temperature=0.8, top_p=1.0, seed=2**63 - 1).tokens


# ---------------------------------------------------------------------------------------------- zoo summary


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--batch", HUGE], f"batch must be >= 1 and <= 2^31 - 1, got {HUGE}"),
        (["--batch", "0"], "batch must be >= 1 and <= 2^31 - 1, got 0"),
        (["--seq-len", HUGE], f"seq_len must be >= 1 and <= 2^31 - 1, got {HUGE}"),
        (["--depth", HUGE], f"depth must be >= 0 and <= 100, got {HUGE}"),
        (["--depth", "-1"], "depth must be >= 0 and <= 100, got -1"),
        (["--batch", "2147483647", "--seq-len", "2147483647"], "batch x seq_len must be <= 2^31 - 1 tokens"),
    ],
    ids=["batch-huge", "batch-0", "seq-len-huge", "depth-huge", "depth-negative", "tokens"],
)
def test_summary_numbers_are_bounded(options, message):
    assert_clean_error(cli("summary", "llama-tiny", *options), message)


def test_summary_limits_live_in_the_library():
    from zoo.analysis import summarize

    with pytest.raises(ArgumentError, match="batch must be >= 1"):
        summarize("gpt-tiny", batch=10**25, torchinfo=False)


def test_the_tools_counts_are_bounded():
    import argparse

    parse = count_argument(1, 100)
    assert parse("5") == 5
    for text in ("0", HUGE, "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)


# ---------------------------------------------------------------------------------------------- zoo train


def test_a_run_name_that_escapes_runs_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("train", "gpt-tiny", "--no-summary", "--device", "cpu", "--set", "name=../escaped-run", *SETS)
    assert_clean_error(result, "the recipe name '../escaped-run' cannot name a run folder inside runs/")
    assert not (tmp_path / "escaped-run").exists()


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        (f"train.seed={HUGE}", "train.seed: Input should be less than or equal to 9223372036854775807"),
        ("train.lr=.inf", "train.lr: Input should be a finite number"),
        (f"train.steps={HUGE}", "train.steps: Input should be less than or equal to 2147483647"),
    ],
    ids=["seed", "lr", "steps"],
)
def test_train_settings_are_bounded(tmp_path, assignment, message):
    missing = str(tmp_path / "missing.txt")  # were the setting let through, the run would stop here, at once
    result = cli(
        "train", "gpt-tiny", "--out", str(tmp_path / "r"), "--no-summary", "--data", missing, "--set", assignment
    )
    assert_clean_error(result, message)


def test_binary_data_is_refused_naming_the_file(tmp_path):
    data = tmp_path / "model.bin"
    data.write_bytes(bytes(range(256)) * 100)
    result = cli("train", "gpt-tiny", "--data", str(data), "--out", str(tmp_path / "r"), "--no-summary", *SETS)
    assert_clean_error(result, f"--data {data} is not a text file: it holds NUL bytes")


def test_resume_with_a_changed_setting_is_refused_then_allowed(trained, tmp_path):
    run = Path(shutil.copytree(trained, tmp_path / "run"))
    resume = ["train", "gpt-tiny", "--out", str(run), "--resume", "--no-summary", "--device", "cpu", *SETS]
    changed = [*resume, "--set", "train.lr=0.002", "--set", "train.steps=3"]
    assert_clean_error(cli(*changed), "(saved → given)", "train.lr: 0.001 → 0.002", "--allow-changes")
    result = cli(*changed, "--allow-changes")
    assert result.exit_code == 0, result.output
    assert "resuming with changed settings (saved → given): train.lr: 0.001 → 0.002; train.steps: 2 → 3" in (
        " ".join(result.output.split())
    )
    logged = {r["step"]: r["lr"] for r in read_metrics(run) if r["split"] == "train"}
    assert logged[3] == 0.002 * lr_factor(2, warmup=1, total=3, min_ratio=0.1)  # new peak, new schedule
    result = cli(*resume)  # the run's recipe is now the changed one: the old settings are the change
    assert_clean_error(result, "train.lr: 0.002 → 0.001")


def test_a_resume_that_cleans_leftovers_says_so(trained, tmp_path):
    run = Path(shutil.copytree(trained, tmp_path / "run"))
    (run / "checkpoints" / ".latest.k3j.tmp").write_text("x")
    result = cli("train", "gpt-tiny", "--out", str(run), "--resume", "--no-summary", "--device", "cpu", *SETS)
    assert result.exit_code == 0, result.output
    assert "removed what an interrupted run left in" in result.output and ".latest.k3j.tmp" in result.output
    assert not (run / "checkpoints" / ".latest.k3j.tmp").exists()


# ---------------------------------------------------------------------------------------------- zoo validate


def test_validate_makes_every_check_that_build_makes(tmp_path):
    recipe = tmp_path / "wrong-size.yaml"
    recipe.write_text("extends: gpt-tiny\nname: wrong-size\nexpect: {parameters: 1000}\n")
    build = cli("build", str(recipe), "--device", "meta")
    assert_clean_error(build, "expects 1,000 parameters but the built model has 124,672")
    validate = cli("validate", str(recipe))
    assert validate.exit_code == 2 and "Traceback" not in validate.output
    assert "invalid" in validate.output and "expects 1,000 parameters" in validate.output
    assert cli("validate", "gpt-tiny").exit_code == 0
