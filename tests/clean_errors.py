"""What the robustness tests share: a tiny training configuration, the CLI run in-process, and the shape of a
clean error (exit status 2, the message, no traceback)."""

from __future__ import annotations

from typer.testing import CliRunner

from zoo.cli import app

FAST = {
    "train.steps": 2,
    "train.batch_size": 2,
    "train.seq_len": 16,
    "train.eval_batches": 1,
    "train.eval_interval": 0,
    "train.warmup_steps": 1,
    "train.log_interval": 1,
}
"""A two-step run of a tiny recipe: seconds on a CPU."""


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def assert_clean_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, (result.output, result.exception)
    assert "Traceback" not in result.output
    text = " ".join(result.output.split())
    for fragment in fragments:
        assert fragment in text, (fragment, result.output)
