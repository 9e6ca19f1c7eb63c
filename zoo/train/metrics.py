"""Metrics of a run: one JSON record per line in ``RUN_DIR/metrics.jsonl``, TensorBoard when installed,
and a PNG of the loss and held-out curves.

Records: ``{"split": "train", "step", "loss", "lr", "grad_norm", "tokens_per_s" | "samples_per_s",
"elapsed_s"}`` every ``log_interval`` steps, and ``{"split": "eval", "step", "loss", ...}`` at evaluations.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from zoo.checkpoint import atomic_write
from zoo.errors import TrainError

METRICS_FILE = "metrics.jsonl"


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every record of a run, in order (a torn last line from a killed process, or a damaged one, is skipped)."""
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        raise TrainError(f"{run_dir}: no {METRICS_FILE} (is it a run directory written by zoo train?)")
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):  # a damaged line that happens to parse is skipped like a torn one
            records.append(record)
    return records


class MetricsWriter:
    """Appends records to ``metrics.jsonl`` (and TensorBoard). On resume, records past the resumed step,
    written by the interrupted process after its last checkpoint, are dropped first."""

    def __init__(self, run_dir: Path, *, resume_step: int | None) -> None:
        self.path = run_dir / METRICS_FILE
        run_dir.mkdir(parents=True, exist_ok=True)
        if resume_step is None:
            self.path.write_text("", encoding="utf-8")
        elif self.path.is_file():
            kept = [r for r in read_metrics(run_dir) if r.get("step", 0) <= resume_step]
            text = "".join(json.dumps(r) + "\n" for r in kept)
            atomic_write(self.path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
        self.file = self.path.open("a", encoding="utf-8")
        self.tensorboard = _tensorboard(run_dir)

    def write(self, record: dict[str, Any]) -> None:
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()
        if self.tensorboard is not None:
            split = record.get("split", "train")
            for key, value in record.items():
                if key not in ("split", "step") and isinstance(value, (int, float)):
                    self.tensorboard.add_scalar(f"{split}/{key}", value, record["step"])

    def close(self) -> None:
        self.file.close()
        if self.tensorboard is not None:
            self.tensorboard.close()


def _tensorboard(run_dir: Path) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is not installed: the JSONL file is the record
        return None
    return SummaryWriter(str(run_dir / "tensorboard"))


def plot_metrics(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Draw the training loss and every held-out metric against the step into a PNG (default
    ``RUN_DIR/metrics.png``); return its path."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise TrainError("zoo plot needs matplotlib: pip install 'zoo[plot]'") from None
    records = read_metrics(run_dir)
    train = [r for r in records if r.get("split") == "train" and _finite(r.get("loss"))]
    evals = [r for r in records if r.get("split") == "eval"]
    if not train and not evals:
        raise TrainError(f"{run_dir}: the metrics file has no records yet")
    eval_keys = sorted(
        {k for r in evals for k, v in r.items() if k not in ("split", "step", "elapsed_s") and _finite(v)}
    )
    others = [k for k in eval_keys if k != "loss"]
    fig, axes = plt.subplots(1, 1 + bool(others), figsize=(11 if others else 6, 4), squeeze=False)
    ax = axes[0][0]
    if train:
        ax.plot([r["step"] for r in train], [r["loss"] for r in train], label="train loss", linewidth=1)
    if "loss" in eval_keys:
        points = [(r["step"], r["loss"]) for r in evals if _finite(r.get("loss"))]
        ax.plot(*zip(*points, strict=True), marker="o", label="held-out loss")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(Path(run_dir).name)
    ax.grid(alpha=0.3)
    ax.legend()
    if others:
        ax2 = axes[0][1]
        for key in others:
            points = [(r["step"], r[key]) for r in evals if _finite(r.get(key))]
            ax2.plot(*zip(*points, strict=True), marker="o", label=key)
        ax2.set_xlabel("step")
        ax2.set_title("held-out metrics")
        ax2.grid(alpha=0.3)
        ax2.legend()
    fig.tight_layout()
    path = Path(out) if out is not None else Path(run_dir) / "metrics.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
