"""Text generation: prefill the prompt once, then decode one token at a time from a KV cache.

    from zoo.generate import generate, generate_text
    out = generate(model, [[72, 101, 108, 108, 111]], max_new_tokens=32)       # token ids in, ids out
    texts = generate_text("runs/gpt-tiny", ["The if statement"], temperature=0.8, top_k=40, seed=0)
    for piece in generate_text("models/qwen3", "Why?", chat=True, stream=True):   # pieces as they come
        print(piece, end="", flush=True)

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

The package holds one file per concern: ``sampling`` (choosing a token), ``loop`` (prefill and decode),
``compiled`` (the compiled step over a static cache), ``cpu`` (the CPU decoding backend), ``text`` (with the
tokenizer, streamed or not) and ``chat`` (a conversation that keeps its KV cache from turn to turn).
"""

from __future__ import annotations

from .chat import ChatSession
from .compiled import COMPILED_CACHE_QUANTUM
from .cpu import GEMV_LAYOUT_MAX_ROWS, GEMV_LAYOUT_MIN_STEPS, cpu_decoding, few_row_products, gemv_layout
from .loop import GenerationOutput, GenerationStats, generate, generate_steps, recompute_length
from .sampling import MAX_NEW_TOKENS, check_generation, check_sampling, next_token_probs, sample_next
from .text import generate_text

__all__ = [
    "COMPILED_CACHE_QUANTUM",
    "GEMV_LAYOUT_MAX_ROWS",
    "GEMV_LAYOUT_MIN_STEPS",
    "MAX_NEW_TOKENS",
    "ChatSession",
    "GenerationOutput",
    "GenerationStats",
    "check_generation",
    "check_sampling",
    "cpu_decoding",
    "few_row_products",
    "gemv_layout",
    "generate",
    "generate_steps",
    "generate_text",
    "next_token_probs",
    "recompute_length",
    "sample_next",
]
