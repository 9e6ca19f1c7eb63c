"""Compiled decoding: one decode step compiled with ``torch.compile(fullgraph=True)`` over a static cache (CUDA
graphs on a GPU, inductor's C++ wrapper on the CPU), and the settings that choose it."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from zoo import compat
from zoo.errors import ArgumentError


def compile_backend(compile: bool | str, static_cache: bool, use_cache: bool) -> str | None:
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


def decode_step(model: nn.Module, token: torch.Tensor, positions: torch.Tensor, cache: Any) -> torch.Tensor:
    """One decode step of a decoder over a static cache: the logits (N, V) of the next token."""
    return model(token, positions=positions, cache=cache).logits[:, -1]


def seq2seq_step(model: nn.Module, token: torch.Tensor, src_mask: Any, encoded: torch.Tensor, cache: Any):
    """One decode step of an encoder-decoder: the logits (N, V) of the next target token."""
    return model(decoder_input_ids=token, attention_mask=src_mask, encoder_hidden=encoded, cache=cache).logits[:, -1]


COMPILED_CACHE_QUANTUM = 128
"""A compiled step's static cache holds a multiple of this many positions (``Decode.cache_length``)."""


class Decode:
    """How decode steps run: the cache kind, and the step functions (compiled once per call of ``generate``;
    dynamo keeps the compiled code, so a later call with the same shapes does not compile again). Shapes are
    static (``dynamic=False``): a new batch size or cache length compiles a graph of its own rather than one
    with symbolic sizes, which is slower and fails on inference tensors in inductor."""

    def __init__(self, static: bool, backend: str | None, device: torch.device) -> None:
        self.static = static
        self.cuda = device.type == "cuda"
        self.decoder_step, self.seq2seq_step = decode_step, seq2seq_step
        if backend is not None:
            how: dict[str, Any] = {}
            if backend == "inductor":  # CUDA graphs on a GPU; on the CPU, a C++ wrapper (Python costs 1 ms/step)
                how = {"mode": "reduce-overhead"} if self.cuda else {"options": {"cpp_wrapper": True}}
            self.decoder_step = torch.compile(decode_step, fullgraph=True, dynamic=False, backend=backend, **how)
            self.seq2seq_step = torch.compile(seq2seq_step, fullgraph=True, dynamic=False, backend=backend, **how)
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
                compat.mark_static_address(t)

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
        plain = decode_step if step is self.decoder_step else seq2seq_step
        before = compat.compiled_graph_count(plain)
        out = step(*args)
        graphs = compat.compiled_graph_count(plain)
        self.reused = self.reused + 1 if graphs == before else 0
        self.settled = self.reused >= 2 and graphs < compat.recompile_limit() and compat.can_skip_guards()
        return out
