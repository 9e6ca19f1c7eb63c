"""``zoo generate`` and ``zoo chat``: text from a trained or imported model, streamed as it is made."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from .train import EXIT_INTERRUPTED, TrainDevice


def generate(
    run_dir: Annotated[Path, typer.Argument(help="A run, checkpoint, model or Hugging Face folder (see zoo.locate).")],
    prompt: Annotated[
        list[str] | None,
        typer.Option("--prompt", metavar="TEXT", help="Text to continue (or translate); repeatable."),
    ] = None,
    audio: Annotated[
        Path | None,
        typer.Option(
            "--audio", metavar="WAV", help="Transcribe a 16 kHz wav file (a model that hears audio: Whisper)."
        ),
    ] = None,
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
    if (audio is None) == (not prompt):
        raise ArgumentError("give --prompt TEXT (text in) or --audio WAV (a wav file to transcribe), one of them")
    if audio is not None and (draft is not None or chat):
        raise ArgumentError("--audio decodes the audio's tokens alone: leave out --draft and --chat")
    run = load_run(run_dir, device=pick_device(device.value))
    _said_what_was_read(run_dir)
    if audio is not None:
        _transcribe(run, audio, stats, **_settings(max_new_tokens, temperature, top_k, top_p, seed, no_cache))
        return
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
        st = _stream(generate_text(run, prompt, stream=True, **settings), f"{prompt[0]}{arrow}")
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
    show, write = console(), _Printer()
    while True:
        try:
            text = input("> ")
        except EOFError:
            break
        except KeyboardInterrupt:
            show.print()
            raise typer.Exit(EXIT_INTERRUPTED) from None
        if text.strip() in ("", "/exit"):
            break
        try:
            for piece in session.send(text):
                write(piece)
        except KeyboardInterrupt:
            write.end()
            raise typer.Exit(EXIT_INTERRUPTED) from None
        write.end()


class _Printer:
    """Generated text on stdout as it comes (no markup, no wrapping), each piece at once; spaces are held back until
    text follows them on their line, so no line ends in spaces (as the rest of zoo's output)."""

    def __init__(self) -> None:
        self.held = ""

    def __call__(self, piece: str) -> None:
        text = re.sub(r"[ \t]+\n", "\n", self.held + piece)
        body = text.rstrip(" \t")
        self.held = text[len(body) :]
        sys.stdout.write(body)
        sys.stdout.flush()

    def end(self) -> None:
        self.held = ""
        sys.stdout.write("\n")
        sys.stdout.flush()


def _stream(pieces: Any, prompt: str) -> Any:
    """Print the prompt, then each piece of text as it comes; return the generation's stats. Ctrl-C keeps what
    was printed and exits with 130."""
    write = _Printer()
    write(prompt)
    try:
        while True:
            try:
                write(next(pieces))
            except StopIteration as done:
                write.end()
                return done.value.stats
    except KeyboardInterrupt:
        pieces.close()
        write.end()
        raise typer.Exit(EXIT_INTERRUPTED) from None


def _settings(max_new_tokens: int, temperature: float, top_k: Any, top_p: Any, seed: Any, no_cache: bool) -> dict:
    return dict(
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        use_cache=not no_cache,
    )


def _transcribe(run: Any, wav: Path, stats: bool, **settings: Any) -> None:
    """The tokens a model that hears audio decodes from a wav file: their text, or their ids without a tokenizer."""
    from rich.markup import escape

    from zoo.generate.audio import transcribe

    from .render import console

    out = transcribe(run, wav, **settings)
    tokens = out.tokens[0]
    shown = out.texts[0] if out.texts is not None else "tokens: " + " ".join(str(t) for t in tokens)
    console().print(f"[dim]{escape(str(wav))} -> [/dim][bold]{escape(shown)}[/bold]")
    if stats:
        prompt = " ".join(str(t) for t in out.prompts[0])
        rate = len(tokens) / out.seconds if out.seconds else 0.0
        console().print(f"prompt {prompt}; {len(tokens)} new tokens in {out.seconds:.2f} s ({rate:,.1f} tokens/s)")


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


def register(app: typer.Typer) -> None:
    app.command()(generate)
    app.command()(chat)
