"""Metrics of a run: one JSON record per line in ``RUN_DIR/metrics.jsonl``, TensorBoard when installed,
and a PNG of the curves.

Records: ``{"split": "train", "step", "loss", "lr", "grad_norm", "tokens_per_s" | "samples_per_s",
"elapsed_s"}`` every ``log_interval`` steps (on CUDA also ``peak_memory_bytes``, the most this process allocated
since the previous record), and ``{"split": "eval", "step", "loss", ...}`` at evaluations.

``metric_panels`` decides what ``plot_metrics`` draws: one panel per scale (loss, accuracy-like shares in
[0, 1], perplexity, learning rate, gradient norm, throughput, memory, and each other held-out metric on its
own), and only the panels the run has data for.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zoo.errors import TrainError
from zoo.files import atomic_write

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


SHARES = ("accuracy", "token_accuracy", "exact_match")
"""Held-out metrics that are shares in [0, 1]: they share the accuracy panel (any ``*accuracy`` too)."""
NOT_PLOTTED = ("split", "step", "elapsed_s")
GIB = 1 << 30


@dataclass
class Series:
    """One line of a panel: its label and its (step, value) points."""

    label: str
    steps: list[int]
    values: list[float]
    held_out: bool = False
    """Evaluations: drawn with markers (few points)."""


@dataclass
class Panel:
    """One axis: a title, its y label, its lines, and a fixed y range or log scale where the scale asks."""

    title: str
    ylabel: str
    series: list[Series] = field(default_factory=list)
    ylim: tuple[float, float] | None = None
    log: bool = False


def _series(
    records: list[dict[str, Any]], key: str, label: str, *, held_out: bool = False, scale: float = 1
) -> Series | None:
    points = [(r["step"], r[key] / scale) for r in records if _finite(r.get(key)) and isinstance(r.get("step"), int)]
    if not points:
        return None
    return Series(label, [s for s, _ in points], [v for _, v in points], held_out)


def _is_share(key: str) -> bool:
    return key in SHARES or key.endswith("accuracy")


def metric_panels(records: list[dict[str, Any]]) -> list[Panel]:
    """The panels of a run's records, one per scale, each only when the run has data for it: loss (train and
    held-out), accuracy-like shares (0-1), perplexity (log scale), learning rate, gradient norm, throughput,
    peak memory (GiB), then each other held-out metric on its own."""
    train = [r for r in records if r.get("split") == "train"]
    evals = [r for r in records if r.get("split") == "eval"]
    eval_keys = sorted({k for r in evals for k, v in r.items() if k not in NOT_PLOTTED and _finite(v)})

    def panel(title: str, ylabel: str, *found: Series | None, **how: Any) -> list[Panel]:
        lines = [s for s in found if s is not None]
        return [Panel(title, ylabel, lines, **how)] if lines else []

    shares = [k for k in eval_keys if _is_share(k)]
    rates = [k for k in sorted({k for r in train for k in r}) if k.endswith("_per_s")]
    panels = [
        *panel("loss", "loss", _series(train, "loss", "train"), _series(evals, "loss", "held-out", held_out=True)),
        *panel("accuracy", "share", *(_series(evals, k, k, held_out=True) for k in shares), ylim=(0.0, 1.0)),
        *panel("perplexity", "perplexity", _series(evals, "perplexity", "held-out", held_out=True), log=True),
        *panel("learning rate", "lr", _series(train, "lr", "lr")),
        *panel("gradient norm", "norm (before clipping)", _series(train, "grad_norm", "grad norm")),
    ]
    for key in rates:
        unit = key.removesuffix("_per_s")
        panels += panel(f"{unit}/s", f"{unit} per second", _series(train, key, f"{unit}/s"))
    panels += panel("peak memory", "GiB", _series(train, "peak_memory_bytes", "peak allocated", scale=GIB))
    for key in eval_keys:
        if key not in ("loss", "perplexity") and not _is_share(key):
            panels += panel(key, key, _series(evals, key, "held-out", held_out=True))
    return panels


def run_title(run_dir: str | Path) -> str:
    """``recipe name - run folder``: the recipe's name as the run recorded it, when it did."""
    from zoo.locate import RUN_FILE, latest_checkpoint

    run_dir = Path(run_dir)
    name = None
    checkpoint = latest_checkpoint(run_dir) if run_dir.is_dir() else None
    if checkpoint is not None:
        try:
            name = json.loads((checkpoint / RUN_FILE).read_text(encoding="utf-8")).get("recipe")
        except (OSError, ValueError, AttributeError):
            name = None
    return f"{name} - {run_dir.name}" if isinstance(name, str) and name else run_dir.name


def plot_metrics(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Draw the run's curves, one panel per scale (``metric_panels``), into a PNG (default
    ``RUN_DIR/metrics.png``) titled with the recipe's name; return its path."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise TrainError("zoo plot needs matplotlib: pip install 'zoo[plot]'") from None
    panels = metric_panels(read_metrics(run_dir))
    if not panels:
        raise TrainError(f"{run_dir}: the metrics file has no records yet")
    columns = min(3, len(panels))
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.6 * columns, 3.4 * rows + 0.5), squeeze=False)
    for ax, p in zip(axes.flat, panels, strict=False):
        for s in p.series:
            style = {"marker": "o", "markersize": 3} if s.held_out else {"linewidth": 1}
            ax.plot(s.steps, s.values, label=s.label, **style)
        ax.set_title(p.title)
        ax.set_xlabel("step")
        ax.set_ylabel(p.ylabel)
        if p.ylim is not None:
            ax.set_ylim(*p.ylim)
        if p.log:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        if len(p.series) > 1:
            ax.legend()
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle(run_title(run_dir))
    fig.tight_layout()
    path = Path(out) if out is not None else Path(run_dir) / "metrics.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
