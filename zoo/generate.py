"""Text generation: prefill the prompt once, then decode one token at a time from a KV cache.

    from zoo.generate import generate, generate_text
    out = generate(model, [[72, 101, 108, 108, 111]], max_new_tokens=32)       # token ids in, ids out
    texts = generate_text("runs/gpt-tiny", ["The if statement"], temperature=0.8, top_k=40, seed=0)

Decoding has two stages. *Prefill* runs the whole prompt through the model at once, filling every layer's
cache with its keys and values, and yields the first new token (its latency is the time to first token,
TTFT). *Decode* then feeds only the newest token: attention reads the cached keys and values instead of
recomputing them, so a step costs about the same at position 1000 as at position 30 (the time per output
token, TPOT). The caches are preallocated for prompt + new tokens and hold only the key/value heads (GQA
and MQA keep a fraction of MHA's memory); an encoder-decoder encodes the source once and computes each
cross-attention layer's K/V from it once. ``use_cache=False`` recomputes the whole sequence every step:
slower, and the reference the cached path must equal token for token.

Prompts of different lengths are left-padded: each row's positions count from its own first real token
and padding is masked out, so a prompt decodes the same alone or in a batch.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from zoo.errors import ArgumentError, TrainError
from zoo.limits import MAX_SEED, check_float, check_int
from zoo.recipe import position_limit, positions_fit

MAX_NEW_TOKENS = 2**20
"""The most tokens one call adds to a prompt."""


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


def sample_next(
    logits: torch.Tensor,
    *,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The next token of each row of ``logits`` (N, V): (N,).

    ``temperature`` 0 is greedy (argmax). Otherwise the logits are divided by the temperature (below 1
    sharper, above 1 flatter), cut to the ``top_k`` most likely tokens and to the smallest set whose
    probability reaches ``top_p`` (nucleus), and a token is drawn from what is left.

    Raises:
        ArgumentError: a temperature that is negative or not finite, ``top_k`` < 1, ``top_p`` outside (0, 1].
    """
    temperature, top_k, top_p = check_sampling(temperature, top_k, top_p)
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = next_token_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def next_token_probs(
    logits: torch.Tensor, *, temperature: float, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """The distribution ``sample_next`` draws from (temperature > 0): ``logits`` (N, V) -> float32 (N, V)."""
    logits = logits.float() / temperature
    if top_k is not None and top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (N, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        # Drop a token when the tokens before it already reach top_p; the most likely one always stays.
        drop = cumulative - sorted_logits.softmax(dim=-1) >= top_p
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return logits.softmax(dim=-1)


def check_sampling(
    temperature: float, top_k: int | None, top_p: float | None
) -> tuple[float, int | None, float | None]:
    """The sampling settings, checked: temperature finite and >= 0, top_k >= 1, top_p in (0, 1]."""
    temperature = check_float("temperature", temperature, low=0.0)
    top_k = None if top_k is None else check_int("top_k", top_k, low=1, high=MAX_SEED)
    top_p = None if top_p is None else check_float("top_p", top_p, low=0.0, high=1.0, low_open=True)
    return temperature, top_k, top_p


def check_generation(
    max_new_tokens: int, temperature: float, top_k: int | None, top_p: float | None, seed: int | None
) -> None:
    """Every number of a ``generate`` call in its range (``ArgumentError`` otherwise), before any work."""
    check_int("max_new_tokens", max_new_tokens, low=1, high=MAX_NEW_TOKENS)
    check_sampling(temperature, top_k, top_p)
    if seed is not None:
        check_int("seed", seed, low=0, high=MAX_SEED)


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


def _check_length(model: nn.Module, needed: int, what: str) -> None:
    recipe = getattr(model, "recipe", None)
    if recipe is not None and positions_fit(recipe, needed) is not None:
        raise TrainError(
            f"{what} needs {needed} positions, beyond the {recipe.positional.type} position table "
            f"(max_len {recipe.max_len}): shorten it"
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
) -> GenerationOutput:
    """Continue each prompt (decoder) or translate each source (encoder-decoder) by up to ``max_new_tokens``.

    Args:
        model: a zoo decoder or encoder-decoder model (``zoo.build`` / ``zoo.load`` / ``load_run``).
        prompts: token ids, one sequence per row (a list of lists, or an (N, P) tensor without padding).
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

    Raises:
        ArgumentError: ``max_new_tokens`` outside 1 .. 2^20, a seed outside 0 .. 2^63 - 1, sampling settings
            out of range (see ``sample_next``), ``compile`` or ``static_cache`` without the cache, an unknown
            ``compile`` backend.
        TrainError: an empty prompt, a model that does not generate, or too many positions for the model.
    """
    check_generation(max_new_tokens, temperature, top_k, top_p, seed)
    backend = _compile_backend(compile, static_cache, use_cache)
    if isinstance(prompts, torch.Tensor):
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
        with gemv_layout(model, len(prompts), max_new_tokens if use_cache else 0):
            decode = _Decode(static_cache or backend is not None, backend, device)
            if _is_encoder_decoder(model):
                steps = _encoder_decoder_steps(model, prompts, max_new_tokens, use_cache, pad_token_id, device, decode)
            else:
                steps = _decoder_steps(model, prompts, max_new_tokens, use_cache, pad_token_id, device, decode)
            tokens, times, cache = _decode(steps, max_new_tokens, stops, sample, clock)
    finally:
        model.train(was_training)
    end = clock()
    n = len(prompts)
    produced = max(len(t) for t in tokens) if tokens else 0
    done = sum(len(t) for t in tokens)
    first = times[0]
    prompt_tokens = max(len(p) for p in prompts)
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


def _picker(*, temperature: float, top_k: int | None, top_p: float | None, generator: torch.Generator | None) -> Any:
    """``sample_next`` with its settings checked once, not at every step: logits (N, V) -> tokens (N,)."""
    temperature, top_k, top_p = check_sampling(temperature, top_k, top_p)
    if temperature == 0:
        return lambda logits: logits.argmax(dim=-1)

    def draw(logits: torch.Tensor) -> torch.Tensor:
        probs = next_token_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)

    return draw


def _compile_backend(compile: bool | str, static_cache: bool, use_cache: bool) -> str | None:
    """The ``torch.compile`` backend ``compile`` names (None: eager), checked against the other settings."""
    if compile is False:
        backend = None
    elif compile is True:
        backend = "inductor"
    elif isinstance(compile, str):
        backend = compile
        known = torch.compiler.list_backends(exclude_tags=())
        if backend not in known:
            raise ArgumentError(f"compile: unknown torch.compile backend {backend!r}; known: {', '.join(known)}")
    else:
        raise ArgumentError(f"compile must be True, False or a torch.compile backend name, not {compile!r}")
    if (backend is not None or static_cache) and not use_cache:
        what = "compile" if backend is not None else "static_cache"
        raise ArgumentError(f"{what} decodes from a static KV cache: it cannot be used with use_cache=False")
    return backend


def _decode_step(model: nn.Module, token: torch.Tensor, positions: torch.Tensor, cache: Any) -> torch.Tensor:
    """One decode step of a decoder over a static cache: the logits (N, V) of the next token."""
    return model(token, positions=positions, cache=cache).logits[:, -1]


def _seq2seq_step(model: nn.Module, token: torch.Tensor, src_mask: Any, encoded: torch.Tensor, cache: Any):
    """One decode step of an encoder-decoder: the logits (N, V) of the next target token."""
    return model(decoder_input_ids=token, attention_mask=src_mask, encoder_hidden=encoded, cache=cache).logits[:, -1]


COMPILED_CACHE_QUANTUM = 128  # a compiled step's static cache holds a multiple of this many positions (cache_length)


@contextmanager
def gemv_layout(model: nn.Module, rows: int, steps: int) -> Iterator[None]:
    """Within the block, fp32 CPU linear weights with more outputs than inputs are stored column-major, when
    ``rows`` sequences (at most 2) decode for ``steps`` (at least 64) steps.

    A decode step multiplies each weight by one row per sequence; on the CPU that is a GEMV, which streams
    along the weight's contiguous dimension, so stored along its longer one it runs 1.1-2.7x faster at 1 or 2
    rows (measured with MKL from 256x768 to 1024x32000), and 0.7-1.1x at 4 rows or more, a prefill's GEMM
    included. The transposing copies (both ways, about 1 GB/s) pay for themselves after some 20 steps. The
    values are the same, so are the results; the weights get their layout back on leaving and keep their
    identity, so optimizers and ties are untouched.
    """
    moved: list[nn.Parameter] = []
    if rows <= GEMV_LAYOUT_MAX_ROWS and steps >= GEMV_LAYOUT_MIN_STEPS:
        with torch.inference_mode(False):  # the new storage must not be an inference tensor
            for m in model.modules():
                w = getattr(m, "weight", None)
                if (
                    isinstance(m, nn.Linear)
                    and type(w) is nn.Parameter
                    and type(w.data) is torch.Tensor  # not a sharded (DTensor) or other subclass weight
                    and w.device.type == "cpu"
                    and w.dtype == torch.float32
                    and m.out_features > m.in_features
                    and w.is_contiguous()
                    and all(w is not seen for seen in moved)  # a tied weight once
                ):
                    w.data = w.data.t().contiguous().t()
                    moved.append(w)
    try:
        yield
    finally:
        with torch.inference_mode(False):
            for w in moved:
                w.data = w.data.contiguous()


GEMV_LAYOUT_MAX_ROWS, GEMV_LAYOUT_MIN_STEPS = 2, 64  # see gemv_layout


class _Decode:
    """How decode steps run: the cache kind, and the step functions (compiled once per call of ``generate``;
    dynamo keeps the compiled code, so a later call with the same shapes does not compile again). Shapes are
    static (``dynamic=False``): a new batch size or cache length compiles a graph of its own rather than one
    with symbolic sizes, which is slower and fails on inference tensors in inductor."""

    def __init__(self, static: bool, backend: str | None, device: torch.device) -> None:
        self.static = static
        self.cuda = device.type == "cuda"
        self.decoder_step, self.seq2seq_step = _decode_step, _seq2seq_step
        if backend is not None:
            how: dict[str, Any] = {}
            if backend == "inductor":  # CUDA graphs on a GPU; on the CPU, a C++ wrapper (Python costs 1 ms/step)
                how = {"mode": "reduce-overhead"} if self.cuda else {"options": {"cpp_wrapper": True}}
            self.decoder_step = torch.compile(_decode_step, fullgraph=True, dynamic=False, backend=backend, **how)
            self.seq2seq_step = torch.compile(_seq2seq_step, fullgraph=True, dynamic=False, backend=backend, **how)
        self.compiled = backend is not None
        self.reused, self.settled = 0, False  # steps in a row that compiled nothing; guards pared down

    def cache_length(self, needed: int, limit: int | None = None) -> int:
        """The positions to allocate: ``needed``, or for a compiled step the next multiple of
        ``COMPILED_CACHE_QUANTUM``, so that calls of nearby lengths share one graph (at most ``limit``).

        A compiled step attends over its whole buffer, so the rounding costs attention: at 128 a 288-position
        call gets 384 slots, at 256 it got 512; at 128 or 64 it decoded 1.07-1.15x faster than at 256 (GPT-2 of
        tools/bench_generate.py, CPU). Finer quanta compile more graphs for calls of varied lengths, against
        dynamo's recompile limit."""
        if self.compiled:
            needed = -(-needed // COMPILED_CACHE_QUANTUM) * COMPILED_CACHE_QUANTUM
        return min(needed, limit) if limit else needed

    def prepare(self, cache: Any) -> None:
        """After the prefill: fix the addresses of the buffers a CUDA graph writes in place."""
        if self.compiled and self.cuda:
            for t in cache.tensors():
                torch._dynamo.mark_static_address(t)

    def run(self, step: Any, *args: Any) -> torch.Tensor:
        """One decode step (``self.decoder_step`` or ``self.seq2seq_step``).

        Compiled, a step first checks all of dynamo's guards. Once two steps in a row found a graph without
        compiling one (and dynamo is below its recompile limit), the later steps of the call, which pass the
        same objects with the same shapes, check only the guards that tell the step's graphs apart: the full
        check costs more than the rest of a step's Python on the CPU. A mixer whose step changes a Python value
        keeps compiling (or reaches the limit), so it keeps every guard.
        """
        if not self.compiled:
            return step(*args)
        if self.cuda:
            torch.compiler.cudagraph_mark_step_begin()  # the previous step's outputs are consumed
        if self.settled:
            with torch.compiler.set_stance("default", skip_guard_eval_unsafe=True):
                return step(*args)
        code = (_decode_step if step is self.decoder_step else _seq2seq_step).__code__
        before = len(torch._dynamo.eval_frame._debug_get_cache_entry_list(code))
        out = step(*args)
        graphs = len(torch._dynamo.eval_frame._debug_get_cache_entry_list(code))
        self.reused = self.reused + 1 if graphs == before else 0
        self.settled = self.reused >= 2 and graphs < _recompile_limit() and _can_skip_guards()
        return out


def _recompile_limit() -> int:
    config = torch._dynamo.config
    return getattr(config, "recompile_limit", getattr(config, "cache_size_limit", 8))  # renamed in torch 2.7


def _can_skip_guards() -> bool:
    """Whether this torch's ``set_stance`` takes ``skip_guard_eval_unsafe`` (torch >= 2.6)."""
    stance = getattr(torch.compiler, "set_stance", None)
    return stance is not None and "skip_guard_eval_unsafe" in inspect.signature(stance).parameters


def _decode(steps, max_new_tokens: int, stops: torch.Tensor, sample: dict, clock: _Clock):
    """Drive a step function: sample, feed back, stop rows at a stop token; return (tokens, the time each token
    was sampled, cache)."""
    logits, cache = steps.send(None)  # prefill
    pick = _picker(**sample)
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
    generation can run past the table. Cached and recomputed decoding follow the same windows.
    """
    ids, mask = _left_pad(prompts, pad, device)  # (N, P)
    n, p = ids.shape
    _check_length(model, p, "the prompt")
    limit = _position_limit(model)
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
            if limit is not None and length - start > limit:  # the window is full: restart it
                start = length - limit // 2
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
    src, src_mask = _right_pad(sources, pad, device)  # (N, S)
    n = src.shape[0]
    _check_length(model, src.shape[1], "the source")
    _check_length(model, max_new_tokens + 1, "max_new_tokens")
    src_mask = None if bool(src_mask.all()) else src_mask
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
) -> tuple[list[str], GenerationStats]:
    """Text in, text out, with the tokenizer a run was trained with.

    ``run`` is a run directory, a checkpoint folder, or a ``zoo.train.Run``. A decoder continues each
    prompt; an encoder-decoder maps each prompt (the source) to its target and stops at [eos].

    Raises:
        ArgumentError: a number out of its range (checked before the run is loaded; see ``generate``).
    """
    from zoo.train.checkpoint import Run, load_run

    check_generation(max_new_tokens, temperature, top_k, top_p, seed)
    _compile_backend(compile, static_cache, use_cache)
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
        stop_tokens=[tok.eos_id] if encoder_decoder else [],
        pad_token_id=tok.pad_id,
    )
    return [tok.decode(t) for t in out.tokens], out.stats
