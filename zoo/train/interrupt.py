"""Ctrl-C during training: the first one stops the run after the step under way, with a checkpoint, and
raises ``TrainInterrupted``; a second one (or one under torchrun) stops at once (see ``zoo.train.loop``)."""

from __future__ import annotations

import contextlib
import shlex
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import checkpoint as ckpt


class TrainInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run: the step it reached, its last complete checkpoint, and how to resume it."""

    def __init__(
        self, *, run_dir: Path, step: int, total: int, checkpoint: Path | None, written: bool, recipe: str
    ) -> None:
        self.run_dir = run_dir
        self.step = step
        """The last step that was completed."""
        self.total = total
        self.checkpoint = checkpoint
        """The last complete checkpoint (None: none was written yet)."""
        self.written = written
        """Whether ``checkpoint`` was written at the interrupt (of ``step``)."""
        self.recipe = recipe
        super().__init__(self.message)

    @property
    def resume_command(self) -> str:
        return f"zoo train {shlex.quote(self.recipe)} --out {shlex.quote(str(self.run_dir))} --resume"

    @property
    def message(self) -> str:
        text = f"interrupted at step {self.step:,} of {self.total:,}. "
        if self.checkpoint is None:
            text += "No checkpoint was written yet: a resumed run starts from step 0."
        elif self.written:
            text += f"Wrote the checkpoint of that step, {self.checkpoint}."
        else:
            saved = int(self.checkpoint.name.removeprefix("step-"))
            lost = self.step - saved
            steps = f"{lost:,} step after it is" if lost == 1 else f"{lost:,} steps after it are"
            text += f"The last complete checkpoint is {self.checkpoint} (step {saved:,})" + (
                f"; the {steps} lost (stopped at once: no checkpoint on a second Ctrl-C or under torchrun)."
                if lost > 0
                else "."
            )
        return f"{text}\nResume with: {self.resume_command}"


class Interruptible:
    """The trainer's handling of Ctrl-C (a mixin of ``zoo.train.loop.Trainer``, whose attributes it uses)."""

    @contextlib.contextmanager
    def _deferred_interrupt(self) -> Iterator[None]:
        """While the loop runs, a first Ctrl-C asks it to stop after the step under way; a second one (the
        default handler again) stops at once. Only one process on its main thread, with Python's own
        handler in place, defers: under torchrun every rank would have to stop at the same step."""
        usable = (
            not self.env.active
            and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        )
        if not usable:
            yield
            return

        def ask_to_stop(signum: int, frame: Any) -> None:
            self.stop_requested = True
            signal.signal(signal.SIGINT, signal.default_int_handler)
            with contextlib.suppress(Exception):  # a display that fails must not break the step under way
                message = "Ctrl-C: stopping after this step, with a checkpoint (press Ctrl-C again to stop at once)"
                self._emit("notice", self.done_step, message=message)

        signal.signal(signal.SIGINT, ask_to_stop)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)

    def _interrupted(self, *, written: bool) -> TrainInterrupted:
        reference = self.start.reference if self.start is not None else None
        return TrainInterrupted(
            run_dir=self.run_dir,
            step=self.done_step,
            total=self.config.steps,
            checkpoint=ckpt.latest_checkpoint(self.run_dir) if self.run_dir.exists() else None,
            written=written,
            recipe=reference or self.recipe.name,
        )
