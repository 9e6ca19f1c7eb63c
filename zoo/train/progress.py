"""What the trainer reports: events to the caller's callback, and the metrics records of ``metrics.jsonl``,
whose losses and gradient norms are checked for NaN/inf at every log point."""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from zoo.errors import TrainError

from . import distributed as dist
from .events import TrainEvent


class Reporting:
    """The trainer's events and metrics records (a mixin of ``zoo.train.loop.Trainer``, whose attributes it
    uses)."""

    def _emit(self, kind: str, step: int, /, **data: Any) -> None:
        if self.callback is not None and self.env.is_main:
            self.callback(TrainEvent(kind, step, self.config.steps, {k: v for k, v in data.items() if k != "step"}))

    def _flush(
        self,
        pending: list[tuple[int, torch.Tensor, torch.Tensor | None, float]],
        seen: int,
        elapsed: float,
        started: float,
    ) -> float:
        """Move the losses (and gradient norms) of the last steps to the host at once, stop on NaN/inf, log
        the newest."""
        losses = dist.all_reduce_mean(torch.stack([loss for _, loss, _, _ in pending]), self.env).tolist()
        # A loss scaler (fp16) skips the steps whose gradients overflow: only without one is inf a failure.
        norms = [(s, n) for s, _, n, _ in pending if n is not None] if not self.scaler.is_enabled() else []
        norm_values = torch.stack([n.float() for _, n in norms]).tolist() if norms else []
        checks = [(s, "loss", v) for (s, _, _, _), v in zip(pending, losses, strict=True)]
        checks += [(s, "gradient norm", v) for (s, _), v in zip(norms, norm_values, strict=True)]
        for step, what, value in sorted(checks, key=lambda c: c[0]):
            if not math.isfinite(value):
                kept = self.last_checkpoint.name if self.last_checkpoint else "none was written"
                raise TrainError(
                    f"the {what} became {value} at step {step}; training stopped without saving. The last good "
                    f"checkpoint is kept ({kept}). Try a lower train.lr, train.clip_grad, or precision fp32."
                )
        step, _, norm, lr = pending[-1]
        unit = self.objective.unit
        record = {
            "split": "train",
            "step": step,
            "loss": losses[-1],
            "lr": lr,
            "grad_norm": float(norm) if norm is not None else None,
            f"{unit}_per_s": seen / elapsed if elapsed > 0 else None,
            "elapsed_s": time.perf_counter() - started,
        }
        if self.env.device.type == "cuda":  # the peak of this log window, then a new window
            record["peak_memory_bytes"] = torch.cuda.max_memory_allocated(self.env.device)
            torch.cuda.reset_peak_memory_stats(self.env.device)
        self._record(record)
        remaining = self.config.steps - step
        throughput = {"unit": unit, "per_s": record[f"{unit}_per_s"], "eta_s": remaining * elapsed / len(pending)}
        self._emit("step", step, **record, **throughput)
        return losses[-1]

    def _record(self, record: dict[str, Any]) -> None:
        if self.metrics is not None:
            self.metrics.write(record)
