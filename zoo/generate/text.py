"""Text in, text out: generation with the tokenizer a run was trained with."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from zoo.errors import TrainError

from .compiled import compile_backend
from .loop import GenerationStats, _is_encoder_decoder, generate
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
) -> tuple[list[str], GenerationStats]:
    """Text in, text out, with the tokenizer a run was trained with.

    ``run`` is a run directory, a checkpoint folder, or a ``zoo.train.Run``. A decoder continues each
    prompt; an encoder-decoder maps each prompt (the source) to its target and stops at [eos].

    Raises:
        ArgumentError: a number out of its range (checked before the run is loaded; see ``generate``).
    """
    from zoo.train.checkpoint import Run, load_run

    check_generation(max_new_tokens, temperature, top_k, top_p, seed)
    compile_backend(compile, static_cache, use_cache)
    if not isinstance(run, Run):
        run = load_run(run, device=device)
    if run.tokenizer is None:
        raise TrainError(f"{run.path} was trained on images ({run.info.get('objective')}): it does not generate text")
    tok = run.tokenizer
    texts = [prompts] if isinstance(prompts, str) else list(prompts)
    encoder_decoder = _is_encoder_decoder(run.model)
    out = generate(
        run.model,
        [tok.encode(t) for t in texts],
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        use_cache=use_cache,
        static_cache=static_cache,
        compile=compile,
        kernel=kernel,
        stop_tokens=[tok.eos_id] if encoder_decoder else [],
        pad_token_id=tok.pad_id,
    )
    return [tok.decode(t) for t in out.tokens], out.stats
