"""What the recipe and robustness tests share: a small valid recipe, a tiny training configuration, the CLI
run in-process, and the shape of a clean error (exit status 2, the message, no traceback)."""

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

BASE = {
    "name": "t",
    "architecture": "decoder",
    "vocab_size": 64,
    "d_model": 32,
    "num_layers": 2,
    "max_len": 16,
    "attention": {"type": "mha", "num_heads": 4},
    "positional": {"type": "learned"},
    "norm": {"type": "layernorm"},
    "ffn": {"type": "mlp", "hidden": 64},
}
"""A small valid decoder recipe that the recipe tests break one field at a time."""


class Crash(Exception):
    """Raised by ``crash_after_checkpoint``: a run dying right after a checkpoint."""


def crash_after_checkpoint(step: int):
    """A training callback that dies once the checkpoint of ``step`` is written."""

    def callback(event):
        if event.kind == "checkpoint" and event.step == step:
            raise Crash

    return callback


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def assert_clean_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, (result.output, result.exception)
    assert "Traceback" not in result.output
    text = " ".join(result.output.split())
    for fragment in fragments:
        assert fragment in text, (fragment, result.output)
