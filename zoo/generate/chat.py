"""A conversation with a chat model, its KV cache kept from turn to turn (``zoo chat MODEL``)::

    from zoo.generate import ChatSession
    chat = ChatSession("models/qwen3-0.6b")
    for piece in chat.send("What is a KV cache?"):
        print(piece, end="", flush=True)

Each turn writes the whole conversation with the checkpoint's chat template, and prefills only the tokens that
follow what the cache already holds (the template's end of the last reply, the new message, the opening of the
reply): the earlier turns are never computed again. Where the template writes an earlier turn otherwise than the
cache holds it (a template that drops past reasoning), the cache keeps the common start, or starts over when it
cannot drop positions (a recurrent state).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from zoo.errors import TrainError

from .sampling import check_generation, picker
from .text import stop_tokens, text_run


class ChatSession:
    """One conversation: ``send(text)`` yields the reply's pieces of text as they are made."""

    def __init__(
        self,
        run: str | Path | Any,
        *,
        system: str | None = None,
        max_new_tokens: int = 512,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        device: str | torch.device | None = None,
    ) -> None:
        check_generation(max_new_tokens, temperature, top_k, top_p, seed)
        run = text_run(run, device, "chat with")
        if not getattr(run.tokenizer, "chat_template", None):
            raise TrainError(f"{run.path} has no chat template (tokenizer_config.json or chat_template.jinja)")
        if not hasattr(run.model, "new_cache") or getattr(run.model.recipe, "architecture", None) != "decoder":
            raise TrainError(f"{run.path} is not a decoder: zoo chat talks with decoder models")
        self.model, self.tokenizer = run.model.eval(), run.tokenizer
        self.messages: list[dict[str, str]] = [] if system is None else [{"role": "system", "content": system}]
        self.max_new_tokens = max_new_tokens
        self.device = next(self.model.parameters()).device
        generator = torch.Generator(device=self.device).manual_seed(seed) if seed is not None else None
        self.pick = picker(temperature=temperature, top_k=top_k, top_p=top_p, generator=generator)
        self.stops = set(stop_tokens(self.tokenizer, encoder_decoder=False))
        self.limit = getattr(self.model, "max_len", None)
        self.cache: Any = None
        self.cached: list[int] = []
        """The tokens whose keys and values the cache holds, in order."""

    @torch.no_grad()
    def send(self, text: str) -> Iterator[str]:
        """Add the user's ``text`` and yield the reply, piece by piece; the reply joins the conversation."""
        self.messages.append({"role": "user", "content": text})
        ids = self.tokenizer.encode_chat(self.messages, add_generation_prompt=True)
        start = self._reuse(ids)
        logits = self._forward(ids[start:], start, last_only=True)
        made: list[int] = []
        shown = ""
        try:
            for _ in range(self.max_new_tokens):
                token = int(self.pick(logits)[0])
                if token in self.stops:
                    break
                made.append(token)
                reply = self.tokenizer.decode(made)
                if not reply.endswith("\ufffd") and reply.startswith(shown) and len(reply) > len(shown):
                    yield reply[len(shown) :]
                    shown = reply
                logits = self._forward([token], len(self.cached), last_only=False)
        finally:
            reply = self.tokenizer.decode(made)
            self.messages.append({"role": "assistant", "content": reply})
        if reply.startswith(shown) and len(reply) > len(shown):
            yield reply[len(shown) :]

    def _reuse(self, ids: list[int]) -> int:
        """How many of ``ids`` the cache already holds (it drops what follows them); a new cache when none."""
        if self.limit is not None and len(ids) + self.max_new_tokens > self.limit:
            raise TrainError(
                f"the conversation has {len(ids):,} tokens and a reply may add {self.max_new_tokens:,}: more than "
                f"the model's {self.limit:,} positions; start a new chat (or lower --max-new-tokens)"
            )
        common = 0
        for a, b in zip(self.cached, ids, strict=False):
            if a != b:
                break
            common += 1
        common = min(common, len(ids) - 1)  # the last token is fed again: its logits start the reply
        if self.cache is not None and common < len(self.cached) and self.cache.truncatable() is None:
            self.cache.truncate(common)
            self.cached = self.cached[:common]
        elif self.cache is None or common < len(self.cached):
            self.cache = self.model.new_cache(1, self.limit)
            self.cached, common = [], 0
        return common

    def _forward(self, tokens: list[int], start: int, *, last_only: bool) -> torch.Tensor:
        ids = torch.tensor([tokens], dtype=torch.long, device=self.device)
        positions = torch.arange(start, start + len(tokens), device=self.device)[None]
        out = self.model(ids, positions=positions, cache=self.cache, last_only=last_only)
        self.cached.extend(tokens)
        return out.logits[:, -1]
