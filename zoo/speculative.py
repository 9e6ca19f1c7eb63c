"""Speculative decoding: a small draft model proposes tokens, the target checks them all in one forward pass.

Each round, the draft proposes ``k`` tokens one by one from its own cache; the target reads the pending token
and the ``k`` proposals in one cached forward and so has its distribution ``p`` at every proposal. Proposal ``d``
(drawn from the draft's ``q``) is kept with probability ``min(1, p(d) / q(d))``; the first one rejected is
replaced by a draw from ``max(0, p - q)`` renormalised, and when all are kept the target's distribution after
the last gives one more token. Each token is thus a draw from the target's own distribution ``p`` (Leviathan et
al. 2023; Chen et al. 2023), whatever the draft: the draft only decides how many target passes are needed.
Greedy (``temperature`` 0) keeps a proposal when it is the target's argmax, so the tokens are exactly the
target's greedy ones. Both caches then drop the rejected positions (``ModelCache.truncate``).

Rows are decoded one after another (each row accepts a different number of tokens per round). Both models must
be decoders with one vocabulary and caches that can drop positions (a KV cache; not a recurrent state or a
rolling window).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from zoo.errors import ArgumentError, TrainError

__all__ = ["SpeculativeOutput", "SpeculativeStats", "speculative_generate", "verify"]

MAX_DRAFT_TOKENS = 64


@dataclass(frozen=True)
class SpeculativeStats:
    """What the draft saved (times in seconds)."""

    proposed: int
    """Draft tokens the target checked."""
    accepted: int
    """Of those, the ones kept."""
    target_passes: int
    """Forward passes of the target (prefills included): a plain decode needs one per token."""
    new_tokens: int
    seconds: float

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.proposed if self.proposed else 0.0

    @property
    def tokens_per_target_pass(self) -> float:
        return self.new_tokens / self.target_passes if self.target_passes else 0.0


@dataclass(frozen=True)
class SpeculativeOutput:
    tokens: list[list[int]]
    stats: SpeculativeStats


def verify(
    p: torch.Tensor, q: torch.Tensor, proposals: torch.Tensor, *, greedy: bool, generator: torch.Generator | None
) -> tuple[int, int]:
    """Check ``k`` proposals: ``p`` (k + 1, V) the target's distributions before each proposal and after the
    last (logits when ``greedy``), ``q`` (k, V) the draft's, ``proposals`` (k,). Returns (how many are kept, the
    token that follows them: the correction of the first rejected, or the bonus after all)."""
    k = proposals.numel()
    if greedy:
        best = p.argmax(dim=-1)  # (k + 1,)
        agree = (best[:k] == proposals).long()
        kept = int(agree.cumprod(0).sum())
        return kept, int(best[kept])
    chosen = torch.arange(k, device=p.device)
    ratio = p[chosen, proposals] / q[chosen, proposals]  # q(d) > 0: d was drawn from q
    u = torch.rand(k, generator=generator, device=p.device)
    agree = (u < ratio).long()
    kept = int(agree.cumprod(0).sum())
    if kept == k:
        residual = p[k]
    else:
        residual = (p[kept] - q[kept]).clamp(min=0)
        if residual.sum() <= 0:  # p == q: any rejection had probability 0; keep p
            residual = p[kept]
    token = torch.multinomial(residual / residual.sum(), 1, generator=generator)
    return kept, int(token)


def _check(target: nn.Module, draft: nn.Module, draft_tokens: int) -> None:
    for name, model in (("the target", target), ("the draft", draft)):
        recipe = getattr(model, "recipe", None)
        if not hasattr(model, "new_cache") or recipe is None or recipe.architecture != "decoder":
            raise TrainError(f"speculative decoding needs two decoders; {name} is a {type(model).__name__}")
    tv, dv = target.recipe.vocab_size, draft.recipe.vocab_size
    if tv != dv:
        raise ArgumentError(
            f"the draft's vocabulary ({dv} tokens, '{draft.recipe.name}') is not the target's ({tv}, "
            f"'{target.recipe.name}'): the draft must share the target's tokenizer"
        )
    if not 1 <= draft_tokens <= MAX_DRAFT_TOKENS:
        raise ArgumentError(f"draft_tokens is {draft_tokens}; it must be 1 .. {MAX_DRAFT_TOKENS}")


def _fits(model: nn.Module, positions: int) -> None:
    from zoo.recipe import positions_fit

    problem = positions_fit(model.recipe, positions)
    if problem is not None:
        raise TrainError(f"speculative decoding of '{model.recipe.name}': {problem} (lower max_new_tokens)")


@torch.no_grad()
def speculative_generate(
    target: nn.Module,
    draft: nn.Module,
    prompts: Sequence[Sequence[int]] | torch.Tensor,
    *,
    max_new_tokens: int,
    draft_tokens: int = 4,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    stop_tokens: Sequence[int] = (),
) -> SpeculativeOutput:
    """Continue each prompt with up to ``max_new_tokens`` tokens of ``target``, ``draft`` proposing
    ``draft_tokens`` at a time. Greedy output equals the target's greedy decoding; sampled output follows the
    target's distribution (see the module's docstring).

    Raises:
        ArgumentError: a draft with another vocabulary, ``draft_tokens`` outside 1 .. 64, bad sampling settings.
        TrainError: a model that is not a decoder, an empty prompt, more positions than a model has, or a cache
            that cannot drop positions (a recurrent state, a rolling window).
    """
    from zoo.components.kernels import use_kernel
    from zoo.generate import check_generation, cpu_decoding, next_token_probs

    check_generation(max_new_tokens, temperature, top_k, top_p, seed)
    _check(target, draft, draft_tokens)
    if isinstance(prompts, torch.Tensor):
        prompts = prompts.tolist()
    if not prompts or any(len(p) == 0 for p in prompts):
        raise TrainError("every prompt needs at least one token")
    device = next(target.parameters()).device
    longest = max(len(p) for p in prompts) + max_new_tokens + draft_tokens
    for model in (target, draft):
        _fits(model, longest)
        why = model.new_cache(1, longest).truncatable()
        if why is not None:
            raise TrainError(
                f"speculative decoding drops rejected tokens from the caches, but in '{model.recipe.name}' {why}"
            )
    greedy = temperature == 0
    generator = torch.Generator(device=device).manual_seed(seed) if seed is not None else None
    stops = set(stop_tokens)

    def dist(logits: torch.Tensor) -> torch.Tensor:  # (n, V) -> what tokens are drawn from (logits if greedy)
        return logits.float() if greedy else next_token_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)

    def draw(d: torch.Tensor) -> int:  # one row of dist(...)
        return int(d.argmax()) if greedy else int(torch.multinomial(d, 1, generator=generator))

    def step(model: nn.Module, cache, tokens: list[int], last_only: bool = False) -> torch.Tensor:
        ids = torch.tensor([tokens], device=device)
        return model(ids, cache=cache, last_only=last_only).logits[0]  # (len(tokens) or 1, V)

    was = (target.training, draft.training)
    target.eval(), draft.eval()
    out: list[list[int]] = []
    proposed = accepted = passes = 0
    start = time.perf_counter()
    try:
        # On the CPU both decode through its backend: the draft one row at a time (the decode layout), the target
        # k + 1 rows a pass (no layout change: it is no GEMV).
        cpu = device.type == "cpu"
        with (
            cpu_decoding(draft, rows=1, steps=max_new_tokens) if cpu else use_kernel(draft, None),
            cpu_decoding(target, rows=1, steps=0) if cpu else use_kernel(target, None),
        ):
            for prompt in prompts:
                prompt = list(prompt)
                total = len(prompt) + max_new_tokens + draft_tokens
                tcache, dcache = target.new_cache(1, total), draft.new_cache(1, total)
                seq = prompt + [draw(dist(step(target, tcache, prompt, last_only=True))[0])]
                passes += 1
                new = [seq[-1]]
                while len(new) < max_new_tokens and new[-1] not in stops:
                    k = min(draft_tokens, max_new_tokens - len(new) - 1)
                    if k == 0:  # room for one token only: the target alone
                        new.append(draw(dist(step(target, tcache, seq[tcache.length :], last_only=True))[0]))
                        seq.append(new[-1])
                        passes += 1
                        continue
                    logits = step(draft, dcache, seq[dcache.length :], last_only=True)  # catch up, then propose
                    qs, proposals = [], []
                    for i in range(k):
                        q = dist(logits)[0]
                        proposals.append(draw(q))
                        qs.append(q)
                        if i < k - 1:
                            logits = step(draft, dcache, proposals[-1:])
                    p = dist(step(target, tcache, seq[tcache.length :] + proposals)[-(k + 1) :])  # (k + 1, V)
                    passes += 1
                    kept, following = verify(
                        p, torch.stack(qs), torch.tensor(proposals, device=device), greedy=greedy, generator=generator
                    )
                    proposed, accepted = proposed + k, accepted + kept
                    tcache.truncate(len(seq) + kept)  # the pending token and the kept proposals
                    dcache.truncate(min(dcache.length, len(seq) + kept))
                    for token in [*proposals[:kept], following]:
                        new.append(token)
                        seq.append(token)
                        if token in stops or len(new) == max_new_tokens:
                            break
                cut = next((i for i, t in enumerate(new) if t in stops), len(new))
                out.append(new[:cut])
    finally:
        target.train(was[0]), draft.train(was[1])
    seconds = time.perf_counter() - start
    stats = SpeculativeStats(proposed, accepted, passes, sum(len(t) for t in out), seconds)
    return SpeculativeOutput(out, stats)
