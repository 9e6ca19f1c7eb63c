"""JSONL training data: one JSON object a line, all of one kind.

- ``{"text": "..."}``: documents, read as a text file's are (``zoo.train.data.load_documents``).
- ``{"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}, ...]}``: chat,
  rendered with the tokenizer's chat template (a Hugging Face checkpoint's, carried with an imported model), the
  loss on the assistant turns only: every other target is -100.

The assistant's tokens are found as TRL and torchtune find them, by rendering the conversation prefix by prefix:
before assistant message ``k``, the template's text of messages ``0..k-1`` with the generation prompt (the
assistant's header, not learned); then the text of messages ``0..k`` adds the assistant's content and its
end-of-turn (learned). Each piece is tokenized on its own (pieces meet at turn boundaries). A template that
rewrites earlier turns as the conversation grows (one that drops past reasoning) cannot be split this way, and is
refused by name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from zoo.errors import TrainError

IGNORE = -100
"""The target of a token the loss skips (the heads' cross-entropy ignores it)."""


def read_jsonl(path: Path, text: str) -> tuple[str, list[Any]]:
    """The records of a .jsonl file (``text``: its contents): ``("text", [documents])`` or ``("chat",
    [(line, messages)])``; a line of another shape, or of the other kind, is an error naming the line."""
    kind: str | None = None
    records: list[Any] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            problem = f"not JSON ({exc.msg}); a .jsonl file holds one object a line"
            raise TrainError(f"{path}, line {number}: {problem}") from None
        if isinstance(record, dict) and isinstance(record.get("text"), str):
            this, value = "text", (f"{path.name}:{number}", record["text"])
        elif isinstance(record, dict) and isinstance(record.get("messages"), list):
            this, value = "chat", (number, record["messages"])
        else:
            raise TrainError(
                f"{path}, line {number}: expected an object with a 'text' string or a 'messages' list "
                '([{"role": "user", "content": "..."}, ...]), got ' + line.strip()[:60]
            )
        if kind is not None and this != kind:
            raise TrainError(f"{path}, line {number}: a {this} record in a file of {kind} records: one kind a file")
        kind = this
        records.append(value)
    if kind is None:
        raise TrainError(f"--data {path}: the file has no records")
    return kind, records


def chat_tokens(tokenizer: Any, messages: list[dict[str, Any]], where: str) -> tuple[list[int], list[bool]]:
    """A conversation's token ids and, for each, whether it is the assistant's (learned).

    Raises:
        TrainError: a tokenizer without a chat template, a conversation without an assistant message or that
            opens with one, a template that does not render the conversation prefix by prefix.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise TrainError(
            f"{where}: chat records are rendered with the checkpoint's chat template, and this run's tokenizer has "
            "none: train from an imported chat model (--init-from a folder whose tokenizer_config.json has one)"
        )

    def render(upto: int, prompt: bool) -> str:
        return tokenizer.apply_chat_template(messages[:upto], add_generation_prompt=prompt)

    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    if "assistant" not in roles:
        raise TrainError(f"{where}: no assistant message, so nothing to learn; add one or drop the line")
    if roles[0] == "assistant":
        raise TrainError(f"{where}: the conversation opens with the assistant; begin with a system or user message")
    pieces: list[tuple[str, bool]] = []
    done = ""
    for k, role in enumerate(roles):
        if role != "assistant":
            continue
        prompt, whole = render(k, True), render(k + 1, False)
        if not prompt.startswith(done) or not whole.startswith(prompt):
            raise TrainError(
                f"{where}: the chat template does not write this conversation prefix by prefix (message {k} changes "
                "the text before it), so the assistant's tokens cannot be told apart; use plain text or JSONL text"
            )
        pieces += [(prompt[len(done) :], False), (whole[len(prompt) :], True)]
        done = whole
    full = render(len(messages), False)
    if not full.startswith(done):
        raise TrainError(f"{where}: the chat template does not write this conversation prefix by prefix")
    pieces.append((full[len(done) :], False))
    ids: list[int] = []
    learned: list[bool] = []
    for text, assistant in pieces:
        piece = tokenizer.encode(text) if text else []
        ids += piece
        learned += [assistant] * len(piece)
    return ids, learned


@dataclass
class ChatSet:
    """Conversations as (ids, targets) pairs, targets -100 except on the assistant's tokens; a held-out tail."""

    train: list[tuple[torch.Tensor, torch.Tensor]]
    val: list[tuple[torch.Tensor, torch.Tensor]]
    pad_id: int
    description: str

    @classmethod
    def from_records(
        cls, path: Path, records: list[tuple[int, Any]], tokenizer: Any, *, val_fraction: float, length: int
    ) -> ChatSet:
        """``records`` (line, messages) of ``path``; conversations cut to ``length`` + 1 tokens (``train.seq_len``
        inputs and targets, one window shifted by one)."""
        from .chat_template import check_messages

        examples = []
        for line, messages in records:
            where = f"{path}, line {line}"
            ids, learned = chat_tokens(tokenizer, check_messages(messages, where), where)
            ids, learned = ids[: length + 1], learned[: length + 1]
            targets = torch.tensor(ids[1:], dtype=torch.long)
            targets[~torch.tensor(learned[1:], dtype=torch.bool)] = IGNORE
            if (targets != IGNORE).any():
                examples.append((torch.tensor(ids[:-1], dtype=torch.long), targets))
        if len(examples) < 2:
            raise TrainError(
                f"--data {path}: {len(examples)} conversations have assistant tokens within train.seq_len "
                f"({length}); give at least 2 (one is held out), or raise train.seq_len"
            )
        n_val = max(1, int(len(examples) * val_fraction))
        tokens = sum(int((t != IGNORE).sum()) for _, t in examples)
        description = f"{path}: {len(examples):,} conversations, {tokens:,} assistant tokens"
        return cls(examples[:-n_val], examples[-n_val:], int(getattr(tokenizer, "pad_id", 0) or 0), description)

    def batch(self, split: str, length: int, n: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """``n`` conversations of the split, right-padded to ``length``: ``input_ids`` and ``targets`` (n, length),
        padding and every token but the assistant's -100 in ``targets``."""
        examples = self.train if split == "train" else self.val
        picks = torch.randint(0, len(examples), (n,), generator=generator).tolist()
        ids = torch.full((n, length), self.pad_id, dtype=torch.long)
        targets = torch.full((n, length), IGNORE, dtype=torch.long)
        for row, i in enumerate(picks):
            x, y = examples[i]
            ids[row, : len(x)], targets[row, : len(y)] = x[:length], y[:length]
        return {"input_ids": ids, "targets": targets}
