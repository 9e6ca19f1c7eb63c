"""``zoo train``, ``zoo eval``, ``zoo generate`` and ``zoo plot``: rendered from what ``zoo.train`` and
``zoo.generate`` return."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from .build import RECIPE_HELP, Overrides, load_with_overrides

DATA_HELP = (
    'Your data: a text file or folder of .txt files (language models), a .jsonl file of {"text": ...} or chat '
    '{"messages": [...]} records (the loss on the assistant turns), a .tsv file (label<TAB>text, '
    "source<TAB>target), or an image folder with one subfolder per class. Default: the embedded data."
)
EXIT_INTERRUPTED = 130
"""The exit status of a command stopped by Ctrl-C (128 + SIGINT), as shells report it."""


LORA_HELP = (
    "Train low-rank adapters instead of every weight (the recipe's train.lora): rank, alpha, dropout and targets "
    "(attention, ffn, all, or projection names: targets=q_proj,v_proj), e.g. --lora rank=16,alpha=32,targets=attention."
    " RECIPE a model folder: its weights are the base (as --init-from)."
)


class TrainDevice(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


def train(
    recipe: Annotated[str, typer.Argument(help=RECIPE_HELP)],
    data: Annotated[Path | None, typer.Option("--data", help=DATA_HELP)] = None,
    set_: Overrides = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Run directory (checkpoints, metrics); default runs/<recipe name>[-2, -3...]."
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="--out names a folder that holds something else than a run: replace it whole."),
    ] = False,
    device: Annotated[TrainDevice, typer.Option("--device", help="auto: CUDA when present.")] = TrainDevice.auto,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue from the run's last complete checkpoint as the run was started: RECIPE re-read with the "
            "--set values the run began with (RUN/run.yaml); a new --set or an edited recipe is refused.",
        ),
    ] = False,
    allow_changes: Annotated[
        bool,
        typer.Option(
            "--allow-changes",
            help="With --resume: accept training settings (train.lr, train.steps, ...) that differ from the run's "
            "and train on with them; without it a differing recipe or --set is refused.",
        ),
    ] = False,
    init_from: Annotated[
        Path | None,
        typer.Option(
            "--init-from",
            help="Start from the weights of a model, run, checkpoint or Hugging Face folder (fine-tuning, continued "
            "training); the recipe must describe that model, except its head, which may be new. Not with --resume.",
        ),
    ] = None,
    lora: Annotated[str | None, typer.Option("--lora", metavar="rank=R,alpha=A,targets=T", help=LORA_HELP)] = None,
    summary: Annotated[bool, typer.Option("--summary/--no-summary", help="Print the model summary first.")] = True,
) -> None:
    """Train a recipe's model with its `train:` section; under torchrun, on every process (DDP or FSDP2).

    Ctrl-C finishes the step under way, writes its checkpoint and prints the resume command (exit status 130);
    a second Ctrl-C stops at once, keeping the last complete checkpoint."""
    import warnings

    from zoo.recipe import parse_override
    from zoo.train import TrainInterrupted
    from zoo.train import train as run_training
    from zoo.train.distributed import is_main_process

    if lora is not None:
        from zoo.train.lora import lora_assignments

        set_ = [*(set_ or []), *lora_assignments(lora)]
        if init_from is None and not resume and Path(recipe).is_dir():
            init_from = Path(recipe)  # adapters on the folder's own weights, not on a fresh initialisation
    with warnings.catch_warnings():  # train() loads it again, and warns then
        warnings.simplefilter("ignore")
        load_with_overrides(recipe, set_)  # a bad recipe or --set is refused before anything starts
    overrides = dict(parse_override(a) for a in set_ or [])
    main = is_main_process()
    show = _TrainView(summary=summary and main)
    try:
        run_training(
            recipe,
            data=data,
            out=out,
            device=device.value,
            resume=resume,
            allow_changes=allow_changes,
            init_from=init_from,
            force=force,
            callback=show,
            **overrides,
        )
    except TrainInterrupted as stop:
        show.stop()
        if main:
            show.interrupted(stop)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except KeyboardInterrupt:  # before the first step: nothing was trained
        show.stop()
        if main:
            show.interrupted(None)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        show.stop()


class _TrainView:
    """Draws the training events: summary, a progress bar with the latest figures, evaluations, the end."""

    def __init__(self, *, summary: bool) -> None:
        self.summary = summary
        self.progress: Any = None
        self.task: Any = None
        self.generates = False

    def __call__(self, event: Any) -> None:
        getattr(self, f"_{event.kind}")(event)

    def _console(self) -> Any:
        from .render import console

        return self.progress.console if self.progress is not None else console()

    def _notice(self, event: Any) -> None:
        from rich.markup import escape

        self._console().print(f"[yellow]note:[/yellow] {escape(event.data['message'])}")

    def _resume(self, event: Any) -> None:
        from rich.markup import escape

        self._console().print(f"resuming from [bold]{escape(event.data['checkpoint'])}[/bold] (step {event.step})")

    def _start(self, event: Any) -> None:
        from rich.markup import escape
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        d = event.data
        show = self._console()
        self.generates = d["generates"]
        if self.summary:
            _print_summary(show, d["recipe"], d["seq_len"])
        per_step = f"{d['examples_per_step']:,} examples" + (
            f" ({d['tokens_per_step']:,} tokens)" if "tokens_per_step" in d else ""
        )
        show.print(
            f"[bold]training[/bold] {escape(d['recipe'].name)} ({d['objective']}) on {d['device']} x{d['world_size']}"
            f" {d['strategy'] if d['world_size'] > 1 else ''}, {d['precision']}; {per_step} per step\n"
            f"data: {escape(d['data'])}\nrun directory: {escape(d['run_dir'])}"
        )
        self.progress = Progress(
            TextColumn("[bold]step"),
            MofNCompleteColumn(),
            BarColumn(),
            TextColumn("{task.fields[figures]}"),
            TimeElapsedColumn(),
            TextColumn("ETA {task.fields[eta]}"),
            console=show,
        )
        self.progress.start()
        self.task = self.progress.add_task("train", total=event.total, completed=event.step, figures="", eta="-")

    def _step(self, event: Any) -> None:
        from .render import short

        d = event.data
        speed = f"{short(d['per_s'])} {d['unit']}/s" if d["per_s"] else ""
        figures = f"loss {d['loss']:.4f}  lr {d['lr']:.2e}  {speed}"
        self.progress.update(self.task, completed=event.step, figures=figures, eta=_duration(d["eta_s"]))

    def _eval(self, event: Any) -> None:
        metrics = "  ".join(f"{k} {_figure(v)}" for k, v in event.data["metrics"].items())
        self._console().print(f"step {event.step:>7,} [bold cyan]held-out[/bold cyan]  {metrics}")

    def _checkpoint(self, event: Any) -> None:
        from rich.markup import escape

        self._console().print(f"[dim]step {event.step:>7,} checkpoint {escape(event.data['path'])}[/dim]")

    def _end(self, event: Any) -> None:
        from rich.markup import escape

        self.stop()
        d = event.data
        show = self._console()
        loss = f"{d['loss']:.4f}" if d["loss"] is not None else "-"
        held = "  ".join(f"{k} {_figure(v)}" for k, v in d["eval"].items())
        show.print(f"[bold green]done[/bold green]: {event.step:,} steps in {_duration(d['seconds'])}; loss {loss}")
        if held:
            show.print(f"held-out: {held}")
        run = escape(d["run_dir"])
        show.print(
            f"next: zoo generate {run} --prompt '...'   |   zoo plot {run}"
            if self.generates
            else f"next: zoo plot {run}"
        )

    def interrupted(self, stop: Any) -> None:
        """What Ctrl-C left: the step, the checkpoint and the resume command (None: before the first step)."""
        from rich.markup import escape

        if stop is None:
            self._console().print("[yellow]interrupted[/yellow] before the first step: nothing was trained")
            return
        self._console().print(f"[yellow]{escape(stop.message)}[/yellow]", soft_wrap=True)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def _print_summary(show: Any, recipe: Any, seq_len: int | None) -> None:
    """The parameter breakdown and FLOPs that ``zoo summary`` prints (no torchinfo table, no memory notes)."""
    from rich.markup import escape

    from zoo.analysis import summarize

    from .inspect import _flops, _kinds, _layers

    s = summarize(recipe, seq_len=seq_len, torchinfo=False)
    show.print(f"[bold]{escape(recipe.name)}[/bold]: {recipe.architecture}, {s.counted.total:,} parameters")
    show.print(_kinds(s))
    show.print(_layers(s))
    show.print(_flops(s))


def _figure(value: float) -> str:
    return f"{value:.4f}" if abs(value) < 1e4 else f"{value:.4g}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def plot(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by zoo train.")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="PNG file; default RUN_DIR/metrics.png.")] = None,
) -> None:
    """Draw a run's training loss and held-out curves into a PNG."""
    from rich.markup import escape

    from zoo.train import plot_metrics

    from .render import console

    console().print(f"wrote {escape(str(plot_metrics(run_dir, out)))}")


def evaluate(
    path: Annotated[
        Path, typer.Argument(help="A run, checkpoint, zoo model or Hugging Face folder (with its tokenizer for text).")
    ],
    data: Annotated[Path, typer.Option("--data", help=DATA_HELP.removesuffix(" Default: the embedded data."))],
    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch", "--batch-size", help="Examples per forward pass; default the recipe's train.batch_size."
        ),
    ] = None,
    device: Annotated[TrainDevice, typer.Option("--device", help="auto: CUDA when present.")] = TrainDevice.auto,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics (and what was read) as JSON.")] = False,
) -> None:
    """Evaluate a trained model on a data file, every example once, with its objective's metrics."""
    import json

    from rich.markup import escape

    from zoo.train import evaluate as run_evaluation

    from .render import console, table

    result = run_evaluation(path, data, device=device.value, batch_size=batch_size)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
        return
    show = console()
    for note in result.notes:
        show.print(f"[yellow]note:[/yellow] {escape(note)}")
    show.print(f"model: {escape(result.model)}\ndata: {escape(result.data)} ({result.examples:,} examples)")
    t = table(f"{result.objective} metrics", "metric", "value", right=("value",))
    for name, value in result.metrics.items():
        t.add_row(name, _figure(value))
    show.print(t)


def register(app: typer.Typer) -> None:
    app.command()(train)
    app.command("eval")(evaluate)
    app.command()(plot)
