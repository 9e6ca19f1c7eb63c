"""The decoding loop: prefill, then one token at a time through the cache (or recomputed), rows leaving the batch
as they stop, a window restarting past a position table; the statistics of a call."""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from zoo.builder import resolve_kernel
from zoo.components.kernels import Kernel, use_kernel
from zoo.errors import TrainError
from zoo.limits import MAX_POSITIONS
from zoo.recipe import position_limit, positions_fit

from .compiled import Decode, compile_backend
from .cpu import cpu_decoding
from .sampling import check_generation, picker


@dataclass
class GenerationStats:
    """Latency and memory of one ``generate`` call (times in seconds)."""

    batch_size: int
    prompt_tokens: int
    new_tokens: int
    """Tokens produced per sequence (the longest row; finished rows stop counting)."""
    ttft_s: float
    """Time to first token: prefill (encoder included) and the first sampled token."""
    tpot_s: float
    """Mean time per output token after the first."""
    tokens_per_s: float
    """New tokens of all rows together per second of the whole call."""
    cache_bytes: int
    """Bytes held by the KV caches (0 without a cache)."""
    tpot_start_s: float = 0.0
    """Mean time per output token over the first steps after the first token (up to 16)..."""
    start_position: int = 0
    """... which decode around this position (the prompt's length plus the step; 0 when fewer than 2 tokens)."""
    tpot_end_s: float = 0.0
    """Mean time per output token over the last steps (up to 16): with ``tpot_start_s``, how a step's cost grows
    with the position (a KV cache's attention reads more each step; a recurrent state does not)..."""
    end_position: int = 0
    """... which decode around this position."""


@dataclass
class GenerationOutput:
    """New tokens of every prompt (stop token excluded), and the statistics of the call."""

    tokens: list[list[int]]
    stats: GenerationStats


def generate(
    model: nn.Module,
    prompts: Sequence[Sequence[int]] | torch.Tensor,
    *,
    max_new_tokens: int = 64,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    use_cache: bool = True,
    stop_tokens: Iterable[int] = (),
    pad_token_id: int = 0,
    static_cache: bool = False,
    compile: bool | str = False,
    kernel: str | Kernel | None = None,
) -> GenerationOutput:
    """Continue each prompt (decoder) or translate each source (encoder-decoder) by up to ``max_new_tokens``.

    Args:
        model: a zoo decoder or encoder-decoder model (``zoo.build`` / ``zoo.load`` / ``load_run``).
        prompts: token ids, one sequence per row (a list of lists, or an (N, P) tensor without padding); for a
            model whose encoder hears audio (Whisper), its log-mel features (N, M, T) (``zoo.generate.audio``).
        max_new_tokens: the most tokens to add to each row.
        temperature, top_k, top_p: sampling (see ``sample_next``); temperature 0 is greedy.
        seed: seeds the sampling generator (same seed, same tokens).
        use_cache: decode from the KV cache (fast) or recompute the whole sequence each step.
        stop_tokens: a row ends when it produces one of these (not included in its output).
        pad_token_id: the id used to pad prompts (masked out, never attended to).
        static_cache: KV caches of fixed shapes written at a tensor position (``zoo.cache.StaticKVCache``):
            attention reads the whole buffer every step, masked, so a step's shapes never change.
        compile: compile the decode step with ``torch.compile(fullgraph=True)`` over a static cache (CUDA
            graphs on a GPU); True for inductor, or the name of a ``torch.compile`` backend. The first call
            pays the compilation; later calls with the same shapes reuse it.
        kernel: the attention kernel to decode with (``zoo list kernel``: a name, or the function); default the
            model's own, except on the CPU, which decodes with its backend (``zoo.generate.cpu``: ``cpu_decode``
            and the few-row and decode layouts of wide products; the results are the same).

    Raises:
        ArgumentError: ``max_new_tokens`` outside 1 .. 2^20, a seed outside 0 .. 2^63 - 1, sampling settings
            out of range (see ``sample_next``), ``compile`` or ``static_cache`` without the cache, an unknown
            ``compile`` backend.
        RecipeError: an unknown ``kernel``.
        TrainError: an empty prompt, a model that does not generate, or too many positions for the model.
    """
    steps = generate_steps(
        model,
        prompts,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        use_cache=use_cache,
        stop_tokens=stop_tokens,
        pad_token_id=pad_token_id,
        static_cache=static_cache,
        compile=compile,
        kernel=kernel,
    )
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def generate_steps(
    model: nn.Module,
    prompts: Sequence[Sequence[int]] | torch.Tensor,
    *,
    max_new_tokens: int = 64,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    use_cache: bool = True,
    stop_tokens: Iterable[int] = (),
    pad_token_id: int = 0,
    static_cache: bool = False,
    compile: bool | str = False,
    kernel: str | Kernel | None = None,
) -> Generator[torch.Tensor, None, GenerationOutput]:
    """``generate``, one step at a time: yields each step's new token of every row, an (N,) tensor (-1 for a row
    that has stopped), and returns the ``GenerationOutput`` (``StopIteration.value``): what streaming reads."""
    check_generation(max_new_tokens, temperature, top_k, top_p, seed)
    backend = compile_backend(compile, static_cache, use_cache)
    chosen = resolve_kernel(kernel) if kernel is not None else None
    features = getattr(model, "encodes_features", False)  # Whisper: the sources are log-mel frames (N, M, T)
    if features and not (isinstance(prompts, torch.Tensor) and prompts.dim() == 3 and prompts.is_floating_point()):
        raise TrainError("this model's encoder hears audio: give its log-mel features, a float tensor (N, M, T)")
    if isinstance(prompts, torch.Tensor) and not features:
        prompts = prompts.tolist()
    if not hasattr(model, "new_cache"):
        raise TrainError(f"{type(model).__name__} does not generate text: use a decoder or encoder-decoder model")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed) if seed is not None else None
    sample = dict(temperature=temperature, top_k=top_k, top_p=top_p, generator=generator)
    stops = torch.tensor(sorted(set(stop_tokens)), dtype=torch.long, device=device)
    clock = _Clock(device)
    start = clock()
    try:
        if device.type == "cpu":
            backend_of_device = cpu_decoding(model, len(prompts), max_new_tokens if use_cache else 0, chosen)
        else:
            backend_of_device = use_kernel(model, chosen)
        with backend_of_device:
            decode = Decode(static_cache or backend is not None, backend, device)
            if _is_encoder_decoder(model):
                steps = _encoder_decoder_steps(model, prompts, max_new_tokens, use_cache, pad_token_id, device, decode)
            else:
                steps = _decoder_steps(model, prompts, max_new_tokens, use_cache, pad_token_id, device, decode)
            tokens, times, cache = yield from _decode(steps, max_new_tokens, stops, sample, clock)
    finally:
        model.train(was_training)
    end = clock()
    n = len(prompts)
    produced = max(len(t) for t in tokens) if tokens else 0
    done = sum(len(t) for t in tokens)
    first = times[0]
    prompt_tokens = (prompts.shape[-1] + 1) // 2 if features else max(len(p) for p in prompts)
    steps_taken = [b - a for a, b in zip(times, times[1:], strict=False)]  # step i decodes token i + 1
    window = min(16, max(1, len(steps_taken) // 4))
    early, late = steps_taken[:window], steps_taken[-window:]
    stats = GenerationStats(
        batch_size=n,
        prompt_tokens=prompt_tokens,
        new_tokens=produced,
        ttft_s=first - start,
        tpot_s=(end - first) / (produced - 1) if produced > 1 else 0.0,
        tpot_start_s=sum(early) / len(early) if early else 0.0,
        start_position=prompt_tokens + len(early) // 2 if early else 0,
        tpot_end_s=sum(late) / len(late) if late else 0.0,
        end_position=prompt_tokens + len(steps_taken) - len(late) // 2 if late else 0,
        tokens_per_s=done / (end - start) if end > start else 0.0,
        cache_bytes=cache.nbytes if cache is not None else 0,
    )
    return GenerationOutput(tokens, stats)


def _left_pad(prompts: Sequence[Sequence[int]], pad: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, mask) of shape (N, P): prompts right-aligned, True on real tokens."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise TrainError("every prompt needs at least one token")
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.bool)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.as_tensor(list(p), dtype=torch.long)
        mask[i, width - len(p) :] = True
    return ids.to(device), mask.to(device)


def _right_pad(prompts: Sequence[Sequence[int]], pad: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    if not prompts or any(len(p) == 0 for p in prompts):
        raise TrainError("every source needs at least one token")
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.bool)
    for i, p in enumerate(prompts):
        ids[i, : len(p)] = torch.as_tensor(list(p), dtype=torch.long)
        mask[i, : len(p)] = True
    return ids.to(device), mask.to(device)


def _is_encoder_decoder(model: nn.Module) -> bool:
    return hasattr(model, "encode") and hasattr(model, "decoder")


def _position_limit(model: nn.Module) -> int | None:
    """How many positions the model's positional encoding has rows for (None: unbounded, e.g. RoPE)."""
    recipe = getattr(model, "recipe", None)
    return position_limit(recipe) if recipe is not None else None


def recompute_length(model: nn.Module) -> int | None:
    """The sequence length at which decoding recomputes its cache, or None: one past the shortest ``stale_after`` of
    the model's positional encodings (LongRoPE's original length: keys cached below it are stale past it). That
    is transformers' Phi-3 ``generate``: once the sequence reaches ``original_max_position_embeddings + 1`` tokens
    with at most that many cached, it drops the cache and runs the whole sequence again."""
    lengths = [m.stale_after for m in model.modules() if getattr(m, "stale_after", None) is not None]
    return min(lengths) + 1 if lengths else None


def _check_length(model: nn.Module, needed: int, what: str, *, context: bool = True, stack: str = "encoder") -> None:
    """``needed`` positions fit the position table of the model's ``stack``, and (``context``: a prompt or source,
    read at once) its ``max_len`` too where it has no table (RoPE)."""
    recipe = getattr(model, "recipe", None)
    if recipe is not None and positions_fit(recipe, needed, stack) is not None:
        raise TrainError(
            f"{what} needs {needed} positions, beyond the {recipe.positional.type} position table "
            f"(max_len {recipe.stack_max_len(stack)}): shorten it"
        )
    longest = (recipe.max_len if recipe is not None else None) or MAX_POSITIONS
    if context and needed > longest:  # no table (RoPE): max_len is the context it was built for
        raise TrainError(
            f"{what} needs {needed:,} positions, beyond the {longest:,} the model attends to (max_len): shorten "
            "it, or raise max_len (--set max_len=N) for a model trained on longer sequences"
        )


class _Clock:
    """Wall time with the device's queue drained (CUDA runs asynchronously)."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def __call__(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()


@torch.no_grad()
def _decode(steps, max_new_tokens: int, stops: torch.Tensor, sample: dict, clock: _Clock):
    """Drive a step function: sample, feed back, stop rows at a stop token; yield each step's tokens (-1: a row
    that has stopped); return (tokens, the time each token was sampled, cache)."""
    logits, cache = steps.send(None)  # prefill
    pick = picker(**sample)
    n = logits.size(0)
    # Rows that stop leave the batch, so they cost no more steps, where every cache can drop rows (a static
    # cache keeps its shapes, for the compiled step).
    compact = cache is None or (not cache.static and cache.selectable())
    alive: torch.Tensor | None = None  # the rows still decoding, by their index in the call (None: all)
    times: list[float] = []
    out, finished = [], None
    for i in range(max_new_tokens):
        token = pick(logits)  # (rows decoding,)
        if len(stops):
            stopped = torch.isin(token, stops)
            finished = stopped if finished is None else finished | stopped
            row = torch.where(finished, -1, token)
            out.append(row if alive is None else row.new_full((n,), -1).index_copy_(0, alive, row))
        else:
            out.append(token)
        times.append(clock())
        yield out[-1]
        if i == max_new_tokens - 1 or (finished is not None and bool(finished.all())):
            break
        keep = None
        if compact and finished is not None and bool(finished.any()):
            keep = (~finished).nonzero().squeeze(1)
            alive = keep if alive is None else alive[keep]
            token, finished = token[keep], finished[keep]
        logits = steps.send((token, keep))
    steps.close()
    rows = torch.stack(out, dim=1).tolist()  # (N, T); -1 from a row's stop token on
    tokens = [row[: row.index(-1)] if -1 in row else row for row in rows]
    return tokens, times, cache


def _positions(mask: torch.Tensor) -> torch.Tensor:
    """Positions (N, L) of a left-padded window (N, L): each row counts from its first real token."""
    return (mask.long().cumsum(dim=1) - 1).clamp(min=0)


def _decoder_steps(model, prompts, max_new_tokens, use_cache, pad, device, decode):
    """Coroutine of a decoder: yields (logits, cache) after prefill, then the logits of each token sent.

    A model with a position table of ``max_len`` rows sees a window of at most ``max_len`` tokens: when the
    next token would not fit, the window restarts from the last ``max_len // 2`` tokens (a new prefill), so
    generation can run past the table. Cached and recomputed decoding follow the same windows. A model whose
    cache goes stale at a length (``recompute_length``: LongRoPE) prefills the whole window again there.
    """
    ids, mask = _left_pad(prompts, pad, device)  # (N, P)
    n, p = ids.shape
    _check_length(model, p, "the prompt")
    limit = _position_limit(model)
    stale = recompute_length(model)
    total = p + max_new_tokens
    seq = torch.full((n, total), pad, dtype=torch.long, device=device)
    seq[:, :p] = ids
    full_mask = torch.ones((n, total), dtype=torch.bool, device=device)
    full_mask[:, :p] = mask
    padded = not bool(mask.all())
    start, length = 0, p  # the window is seq[:, start:length]

    def prefill(cache):
        window_mask = full_mask[:, start:length]
        positions = _positions(window_mask)
        padded_window = padded and not bool(window_mask.all())
        out = model(
            seq[:, start:length],
            attention_mask=window_mask if padded_window else None,
            positions=positions,
            cache=cache,
            last_only=True,
        )
        return out.logits[:, -1], positions[:, -1:] + 1, padded_window

    if use_cache:
        cache = model.new_cache(n, decode.cache_length(total, limit), static=decode.static)
        logits, next_position, masked = prefill(cache)
        decode.prepare(cache)
        token, keep = yield logits, cache
        while True:
            if keep is not None:  # rows that stopped leave the batch
                seq, full_mask, next_position = seq[keep], full_mask[keep], next_position[keep]
                cache.select(keep)
            seq[:, length] = token
            length += 1
            full = limit is not None and length - start > limit
            if full or length == stale:  # the window is full, or the cache stale: prefill it again
                start = length - limit // 2 if full else start
                cache.reset()
                logits, next_position, masked = prefill(cache)
            elif decode.static:  # the cache keeps the prompt's padding: a step needs no mask
                logits = decode.run(decode.decoder_step, model, token[:, None], next_position, cache)
                next_position = next_position + 1
            else:
                # Appending real tokens never adds padding: the window needs a mask iff its prefill did.
                out = model(
                    token[:, None],
                    attention_mask=full_mask[:, start:length] if masked else None,
                    positions=next_position,
                    cache=cache,
                )
                logits, next_position = out.logits[:, -1], next_position + 1
            token, keep = yield logits
    else:
        logits, _, _ = prefill(None)
        token, keep = yield logits, None
        while True:
            if keep is not None:
                seq, full_mask = seq[keep], full_mask[keep]
            seq[:, length] = token
            length += 1
            if limit is not None and length - start > limit:
                start = length - limit // 2
            logits, _, _ = prefill(None)
            token, keep = yield logits


def _encoder_decoder_steps(model, sources, max_new_tokens, use_cache, pad, device, decode):
    """Coroutine of an encoder-decoder, yielding as ``_decoder_steps``: the source is encoded once, and the
    decoder starts from its start token."""
    if getattr(model, "encodes_features", False):  # log-mel frames (N, M, T): no padding, no mask
        src, src_mask = sources.to(device, next(model.parameters()).dtype), None
    else:
        src, src_mask = _right_pad(sources, pad, device)  # (N, S)
        _check_length(model, src.shape[1], "the source")
        src_mask = None if bool(src_mask.all()) else src_mask
    n = src.shape[0]
    _check_length(model, max_new_tokens + 1, "max_new_tokens", context=False, stack="decoder")
    encoded = model.encode(src, src_mask)  # (N, S, E), once
    start = torch.full((n, 1), model.decoder_start_token_id, dtype=torch.long, device=device)
    if use_cache:
        cache = model.new_cache(n, decode.cache_length(max_new_tokens + 1), static=decode.static)
        out = model(decoder_input_ids=start, attention_mask=src_mask, encoder_hidden=encoded, cache=cache)
        decode.prepare(cache)
        token, keep = yield out.logits[:, -1], cache
        while True:
            if keep is not None:  # rows that stopped leave the batch
                encoded, src_mask = encoded[keep], None if src_mask is None else src_mask[keep]
                cache.select(keep)
            token, keep = yield decode.run(decode.seq2seq_step, model, token[:, None], src_mask, encoded, cache)
    else:
        seq = start
        out = model(decoder_input_ids=seq, attention_mask=src_mask, encoder_hidden=encoded)
        token, keep = yield out.logits[:, -1], None
        while True:
            if keep is not None:
                seq, encoded = seq[keep], encoded[keep]
                src_mask = None if src_mask is None else src_mask[keep]
            seq = torch.cat([seq, token[:, None]], dim=1)
            out = model(decoder_input_ids=seq, attention_mask=src_mask, encoder_hidden=encoded)
            token, keep = yield out.logits[:, -1]
