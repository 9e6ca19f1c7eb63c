"""Choosing the next token from logits: greedy, temperature, top-k and nucleus (top-p) sampling, and the checks
of every number a ``generate`` call takes."""

from __future__ import annotations

from typing import Any

import torch

from zoo.limits import MAX_SEED, check_float, check_int

MAX_NEW_TOKENS = 2**20
"""The most tokens one call adds to a prompt."""


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
    # Shifted by the maximum and divided in float64: however small the temperature (1e-300, which float32 rounds
    # to 0), the likeliest token's logit is 0 and the others -inf at worst, never 0 / 0 or inf - inf.
    logits = logits.double()
    logits = ((logits - logits.amax(dim=-1, keepdim=True)) / temperature).float()
    if top_k is not None and top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (N, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        # Drop a token when the tokens before it already reach top_p; the most likely one always stays.
        drop = cumulative - sorted_logits.softmax(dim=-1) >= top_p
        drop[:, 0] = False  # a top_p below float32's smallest number (1e-300) keeps it too
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


def picker(*, temperature: float, top_k: int | None, top_p: float | None, generator: torch.Generator | None) -> Any:
    """``sample_next`` with its settings checked once, not at every step: logits (N, V) -> tokens (N,)."""
    temperature, top_k, top_p = check_sampling(temperature, top_k, top_p)
    if temperature == 0:
        return lambda logits: logits.argmax(dim=-1)

    def draw(logits: torch.Tensor) -> torch.Tensor:
        probs = next_token_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)

    return draw
