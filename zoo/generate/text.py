"""Text in, text out: generation with the tokenizer a model reads text with (a run's own, or a checkpoint's),
at once or streamed piece by piece, from a plain prompt or a chat (the checkpoint's chat template)."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import torch

from zoo.errors import ArgumentError, TrainError

from .compiled import compile_backend
from .loop import GenerationStats, _is_encoder_decoder, generate, generate_steps
from .sampling import check_generation


def generate_text(
    run: str | Path | Any,
    prompts: str | Sequence[str],
    *,
    max_new_tokens: int = 200,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    use_cache: bool = True,
    device: str | torch.device | None = None,
    static_cache: bool = False,
    compile: bool | str = False,
    kernel: str | None = None,
    chat: bool = False,
    stream: bool = False,
) -> Any:
    """Text in, text out, with the tokenizer the model reads text with.

    ``run`` is a run directory, a checkpoint, model or Hugging Face folder, or a ``zoo.train.Run``. A decoder
    continues each prompt; an encoder-decoder maps each prompt (the source) to its target. A checkpoint's own
    tokenizer stops at its eos tokens (``generation_config.json``), as transformers' ``generate`` does.
    ``chat``: each prompt is one user turn, written with the checkpoint's chat template (and the assistant's
    turn opened).

    Returns:
        ``(texts, stats)``; with ``stream=True`` (one prompt), an iterator of the pieces of text as they are made.

    Raises:
        ArgumentError: a number out of its range (checked before the run is loaded; see ``generate``), or
            ``stream`` with several prompts.
        TrainError: a model without a tokenizer (said how to give it one), ``chat`` without a chat template.
    """
    check_generation(max_new_tokens, temperature, top_k, top_p, seed)
    compile_backend(compile, static_cache, use_cache)
    texts = [prompts] if isinstance(prompts, str) else list(prompts)
    if stream and len(texts) != 1:
        raise ArgumentError(f"stream=True makes one text at a time: give one prompt, not {len(texts)}")
    run = text_run(run, device, "generate text with")
    tok = run.tokenizer
    settings = dict(
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        use_cache=use_cache,
        static_cache=static_cache,
        compile=compile,
        kernel=kernel,
        stop_tokens=stop_tokens(tok, _is_encoder_decoder(run.model)),
        pad_token_id=tok.pad_id,
    )
    ids = [prompt_ids(tok, t, chat) for t in texts]
    if stream:
        return stream_text(generate_steps(run.model, ids, **settings), tok)
    out = generate(run.model, ids, **settings)
    return [tok.decode(t) for t in out.tokens], out.stats


def text_run(run: str | Path | Any, device: str | torch.device | None, use: str) -> Any:
    """``run`` loaded (``load_run``) with a tokenizer, or a TrainError that says how to give it one."""
    from zoo.train.run import Run, load_run, no_tokenizer

    if not isinstance(run, Run):
        run = load_run(run, device=device)
    if run.tokenizer is None:
        if run.info.get("objective") == "image_classification":
            raise TrainError(f"{run.path} was trained on images (image_classification): it has no text to {use}")
        if run.folder is not None:
            raise no_tokenizer(run.folder, use)
        raise TrainError(f"{run.path} has no tokenizer to {use}")
    return run


def stop_tokens(tokenizer: Any, encoder_decoder: bool) -> list[int]:
    """A checkpoint's tokenizer stops at its eos tokens; zoo's stop an encoder-decoder at ``eos`` and let a decoder
    run its ``max_new_tokens``."""
    stops = getattr(tokenizer, "stop_ids", None)
    if stops is not None:
        return list(stops)
    return [tokenizer.eos_id] if encoder_decoder else []


def prompt_ids(tokenizer: Any, text: str, chat: bool) -> list[int]:
    """The ids of a prompt: plain text, or (``chat``) one user turn written with the chat template."""
    if not chat:
        return getattr(tokenizer, "encode_prompt", tokenizer.encode)(text)
    if not hasattr(tokenizer, "encode_chat"):
        raise TrainError("--chat needs a checkpoint's tokenizer with a chat template; zoo's own tokenizers have none")
    return tokenizer.encode_chat([{"role": "user", "content": text}])


def stream_text(steps: Generator[torch.Tensor, None, Any], tokenizer: Any) -> Generator[str, None, Any]:
    """The text of one row as ``steps`` (``generate_steps``) makes it, each piece once its characters are whole;
    returns the ``GenerationOutput`` (``StopIteration.value``).

    The pieces joined are the decoded tokens (a piece is held back while the text so far ends in a partial
    character, or while a later token rewrites it, as a tokenizer's decoder may do with spaces)."""
    made: list[int] = []
    shown = ""
    try:
        while True:
            try:
                token = int(next(steps)[0])
            except StopIteration as done:
                out = done.value
                break
            if token < 0:  # the row has stopped (its stop token is not part of the text)
                continue
            made.append(token)
            text = tokenizer.decode(made)
            if text.endswith("\ufffd") or not text.startswith(shown) or len(text) == len(shown):
                continue
            yield text[len(shown) :]
            shown = text
    finally:
        steps.close()  # the model back in its mode, even when the reader stops early (Ctrl-C)
    text = tokenizer.decode(made)
    if text.startswith(shown) and len(text) > len(shown):
        yield text[len(shown) :]
    return out


__all__ = ["GenerationStats", "generate_text", "prompt_ids", "stop_tokens", "stream_text", "text_run"]
