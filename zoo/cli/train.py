"""``zoo train``, ``zoo eval``, ``zoo generate`` and ``zoo plot``: rendered from what ``zoo.train`` and
``zoo.generate`` return."""

from __future__ import annotations

import sys
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


def generate(
    run_dir: Annotated[Path, typer.Argument(help="A run, checkpoint, model or Hugging Face folder (see zoo.locate).")],
    prompt: Annotated[
        list[str], typer.Option("--prompt", metavar="TEXT", help="Text to continue (or translate); repeatable.")
    ],
    max_new_tokens: Annotated[
        int, typer.Option("--max-new-tokens", "--new", help="Most tokens to add (1 to 2^20).")
    ] = 200,
    temperature: Annotated[float, typer.Option("--temperature", help="0: greedy; a finite number >= 0.")] = 0.8,
    top_k: Annotated[int | None, typer.Option("--top-k", help="Sample from the k likeliest (k >= 1).")] = None,
    top_p: Annotated[
        float | None, typer.Option("--top-p", help="Sample from the nucleus of mass p, in (0, 1].")
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Seed of the sampling, 0 to 2^63 - 1 (same seed, same text).")
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Recompute every step instead of a KV cache.")] = False,
    stats: Annotated[bool, typer.Option("--stats", help="Print TTFT, TPOT, tokens/s and cache memory.")] = False,
    device: Annotated[TrainDevice, typer.Option("--device", help="auto: CUDA when present.")] = TrainDevice.auto,
    draft: Annotated[
        Path | None,
        typer.Option(
            "--draft",
            help="Speculative decoding: a smaller run (same tokenizer) proposes tokens that this one checks; the "
            "text is the same as without it (greedy), or follows the same distribution (sampling).",
        ),
    ] = None,
    draft_tokens: Annotated[int, typer.Option("--draft-tokens", help="--draft: tokens proposed per round.")] = 4,
    compile: Annotated[
        bool,
        typer.Option(
            "--compile",
            help="Compile the decode step (torch.compile, fullgraph; CUDA graphs on a GPU) over a static KV "
            "cache: the first call pays the compilation.",
        ),
    ] = False,
    static_cache: Annotated[
        bool, typer.Option("--static-cache", help="A KV cache of fixed shapes (what --compile decodes from).")
    ] = False,
    kernel: Annotated[
        str | None,
        typer.Option("--kernel", help="The attention kernel to decode with (zoo list kernel); default the device's."),
    ] = None,
    chat: Annotated[
        bool,
        typer.Option("--chat", help="Each prompt is a user's turn, written with the checkpoint's chat template."),
    ] = False,
) -> None:
    """Generate from a trained run: continue each prompt (decoder) or map it to its target (encoder-decoder).

    One prompt streams: its text is printed as it is made, and Ctrl-C keeps what was printed (exit 130)."""
    from rich.markup import escape

    from zoo.errors import ArgumentError
    from zoo.generate import check_generation, generate_text
    from zoo.train import load_run
    from zoo.train.distributed import pick_device

    from .render import console, size

    check_generation(max_new_tokens, temperature, top_k, top_p, seed)  # before the run is loaded
    if draft is not None and (compile or static_cache):
        raise ArgumentError("--draft decodes from growing caches: leave out --compile and --static-cache")
    if draft is not None and kernel is not None:
        raise ArgumentError("--draft decodes with the device's kernels: leave out --kernel")
    if kernel is not None:
        from zoo.builder import resolve_kernel

        resolve_kernel(kernel)  # an unknown kernel is refused before the run is loaded
    run = load_run(run_dir, device=pick_device(device.value))
    _said_what_was_read(run_dir)
    if draft is not None:
        _speculative(
            run,
            load_run(draft, device=pick_device(device.value)),
            prompt,
            max_new_tokens,
            draft_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            seed=seed,
            stats=stats,
        )
        return
    settings = dict(
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        use_cache=not no_cache,
        static_cache=static_cache,
        compile=compile,
        kernel=kernel,
        chat=chat,
    )
    show = console()
    arrow = " -> " if run.maps_source_to_target else ""  # a target, not a continuation
    if len(prompt) == 1:
        st = _stream(show, generate_text(run, prompt, stream=True, **settings), f"{prompt[0]}{arrow}")
    else:
        texts, st = generate_text(run, prompt, **settings)
        for p, text in zip(prompt, texts, strict=True):
            show.print(f"[dim]{escape(p)}{arrow}[/dim][bold]{escape(text)}[/bold]")
    if stats:
        from .render import table

        t = table("Generation", "", "value", right=("value",))
        t.add_row("batch x prompt tokens", f"{st.batch_size} x {st.prompt_tokens}")
        t.add_row("new tokens per sequence", f"{st.new_tokens}")
        t.add_row("time to first token (TTFT)", f"{st.ttft_s * 1000:.1f} ms")
        t.add_row("time per output token (TPOT)", f"{st.tpot_s * 1000:.2f} ms")
        if st.new_tokens > 2:
            t.add_row(f"  TPOT near position {st.start_position:,}", f"{st.tpot_start_s * 1000:.2f} ms")
            t.add_row(f"  TPOT near position {st.end_position:,}", f"{st.tpot_end_s * 1000:.2f} ms")
        t.add_row("throughput", f"{st.tokens_per_s:,.1f} tokens/s")
        t.add_row("KV cache memory", size(st.cache_bytes) if not no_cache else "none (--no-cache)")
        show.print(t)


def chat(
    model: Annotated[Path, typer.Argument(help="A chat model: a Hugging Face folder, or a zoo import of one.")],
    system: Annotated[str | None, typer.Option("--system", help="A system message that opens the chat.")] = None,
    max_new_tokens: Annotated[
        int, typer.Option("--max-new-tokens", "--new", help="Most tokens of a reply (1 to 2^20).")
    ] = 512,
    temperature: Annotated[float, typer.Option("--temperature", help="0: greedy; a finite number >= 0.")] = 0.0,
    top_k: Annotated[int | None, typer.Option("--top-k", help="Sample from the k likeliest (k >= 1).")] = None,
    top_p: Annotated[
        float | None, typer.Option("--top-p", help="Sample from the nucleus of mass p, in (0, 1].")
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the sampling (same seed, same replies).")] = None,
    device: Annotated[TrainDevice, typer.Option("--device", help="auto: CUDA when present.")] = TrainDevice.auto,
) -> None:
    """Talk with a chat model: each line you type is a turn, the reply streams, and the KV cache is kept from turn
    to turn. An empty line, Ctrl-D or /exit ends the chat; Ctrl-C stops it at once (exit 130)."""

    from zoo.generate import ChatSession, check_generation
    from zoo.train.distributed import pick_device

    from .render import console

    check_generation(max_new_tokens, temperature, top_k, top_p, seed)
    session = ChatSession(
        model,
        system=system,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        device=pick_device(device.value),
    )
    _said_what_was_read(model)
    show = console()
    while True:
        try:
            text = input("> ")
        except EOFError:
            break
        except KeyboardInterrupt:
            show.print()
            raise typer.Exit(130) from None
        if text.strip() in ("", "/exit"):
            break
        try:
            for piece in session.send(text):
                _write(piece)
        except KeyboardInterrupt:
            show.print()
            raise typer.Exit(130) from None
        show.print()


def _write(piece: str) -> None:
    """A piece of generated text on stdout as it is (no markup, no wrapping), at once."""
    sys.stdout.write(piece)
    sys.stdout.flush()


def _stream(show: Any, pieces: Any, prompt: str) -> Any:
    """Print the prompt, then each piece of text as it comes; return the generation's stats. Ctrl-C keeps what
    was printed and exits with 130."""
    from rich.markup import escape

    show.print(f"[dim]{escape(prompt)}[/dim]", end="")
    show.file.flush()
    try:
        while True:
            try:
                piece = next(pieces)
            except StopIteration as done:
                show.print()
                return done.value.stats
            _write(piece)
    except KeyboardInterrupt:
        pieces.close()
        show.print()
        raise typer.Exit(130) from None


def _said_what_was_read(path: Path) -> None:
    """Which checkpoint a reading command read, on stderr (stdout keeps only the text)."""
    from rich.console import Console
    from rich.markup import escape

    from zoo.locate import locate

    folder = locate(path)
    what = folder.note or f"{folder.given}: a zoo {folder.kind} folder"
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"[dim]read {escape(what)}[/dim]")


def _speculative(
    run: Any, draft: Any, prompts: list[str], max_new_tokens: int, draft_tokens: int, *, stats: bool, **sampling: Any
) -> None:
    from rich.markup import escape

    from zoo.errors import ArgumentError
    from zoo.speculative import speculative_generate

    from .render import console, table

    if run.tokenizer is None or draft.tokenizer is None or run.tokenizer.to_json() != draft.tokenizer.to_json():
        raise ArgumentError(f"--draft {draft.path} does not read text with the tokenizer of {run.path}")
    tok = run.tokenizer
    out = speculative_generate(
        run.model,
        draft.model,
        [tok.encode(p) for p in prompts],
        max_new_tokens=max_new_tokens,
        draft_tokens=draft_tokens,
        **sampling,
    )
    show = console()
    for p, tokens in zip(prompts, out.tokens, strict=True):
        show.print(f"[dim]{escape(p)}[/dim][bold]{escape(tok.decode(tokens))}[/bold]")
    if stats:
        st = out.stats
        t = table("Speculative decoding", "", "value", right=("value",))
        t.add_row("draft tokens proposed / kept", f"{st.proposed:,} / {st.accepted:,}")
        t.add_row("acceptance rate", f"{st.acceptance_rate:.1%}")
        t.add_row("new tokens per target pass", f"{st.tokens_per_target_pass:.2f}")
        t.add_row("throughput", f"{st.new_tokens / st.seconds if st.seconds else 0.0:,.1f} tokens/s")
        show.print(t)


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
    app.command()(generate)
    app.command()(chat)
    app.command()(plot)
