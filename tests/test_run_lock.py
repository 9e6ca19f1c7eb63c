"""One writer per run: a second ``zoo train`` into a run that is being written is refused, naming the writer;
the hold ends with the writer, however it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from typer.testing import CliRunner

from zoo.cli import app
from zoo.errors import TrainError
from zoo.train.checkpoint import LOCK_FILE, RunLock

FAST = ["--set", "train.steps=2", "--no-summary", "--device", "cpu"]


def train(out, *more):
    return CliRunner().invoke(app, ["train", "gpt-tiny", "--out", str(out), *FAST, *more])


def test_a_second_writer_is_refused_while_the_first_holds_the_run(tmp_path):
    run = tmp_path / "run"
    first = RunLock(run)
    try:
        result = train(run)
        assert result.exit_code == 2
        assert f"{run} is being written by another zoo train (pid {os.getpid()}): wait for it to end" in (
            " ".join(result.stderr.split())
        )
        assert not (run / "checkpoints").exists()
    finally:
        first.release()
    assert train(run).exit_code == 0
    assert train(run, "--resume", "--set", "train.steps=3", "--allow-changes").exit_code == 0  # released at the end


def test_a_killed_writer_leaves_no_stale_hold(tmp_path):
    run = tmp_path / "run"
    code = (
        "import time; from pathlib import Path; from zoo.train.checkpoint import RunLock; "
        f"hold = RunLock(Path({str(run)!r})); print('held', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        result = train(run)
        assert result.exit_code == 2 and f"(pid {holder.pid})" in result.stderr
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (run / LOCK_FILE).exists()  # the file stays; the hold went with the process
    deadline = time.monotonic() + 10
    while True:
        try:
            RunLock(run).release()
            break
        except TrainError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert train(run).exit_code == 0
