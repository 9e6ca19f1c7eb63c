"""Tokenizers: UTF-8 bytes (no files, no training) or a byte-level BPE learned from the training text.

Both give the same special tokens, which the objectives use: ``pad`` (id 0, the recipes' ``pad_token_id``),
``mask`` (masked LM), ``cls`` / ``sep`` (classification), ``bos`` / ``eos`` (sequence ends, stop token).
A tokenizer is saved next to the weights it was trained with, as a small JSON description.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Protocol

from zoo.errors import TrainError

SPECIALS: tuple[str, ...] = ("pad", "mask", "cls", "sep", "bos", "eos")


class Tokenizer(Protocol):
    vocab_size: int
    pad_id: int
    mask_id: int
    cls_id: int
    sep_id: int
    bos_id: int
    eos_id: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Iterable[int]) -> str: ...

    def special_ids(self) -> frozenset[int]: ...

    def to_json(self) -> dict[str, Any]: ...


class ByteTokenizer:
    """Text as its UTF-8 bytes: 256 ids, lossless for any text.

    The specials take byte values that never occur in UTF-8 (0xFB..0xFF) and NUL (0, the padding), so they
    cannot collide with text: ``decode`` drops them and turns any invalid byte run into U+FFFD.
    """

    vocab_size = 256
    pad_id, mask_id, cls_id, sep_id, bos_id, eos_id = 0, 0xFB, 0xFC, 0xFD, 0xFE, 0xFF

    def encode(self, text: str) -> list[int]:
        return [b for b in text.encode("utf-8") if b]  # a NUL byte would read as padding

    def decode(self, ids: Iterable[int]) -> str:
        specials = self.special_ids()
        return bytes(i for i in ids if i not in specials and 0 <= i < 256).decode("utf-8", errors="replace")

    def special_ids(self) -> frozenset[int]:
        return frozenset((self.pad_id, self.mask_id, self.cls_id, self.sep_id, self.bos_id, self.eos_id))

    def to_json(self) -> dict[str, Any]:
        return {"type": "byte"}


class BPETokenizer:
    """Byte-level BPE (GPT-2 style) from the ``tokenizers`` package, trained on the run's own text.

    The specials are ids 0..5 in ``SPECIALS`` order; the 256 byte symbols follow, then the merges.
    """

    def __init__(self, tokenizer: Any) -> None:
        self._tok = tokenizer
        self.vocab_size = tokenizer.get_vocab_size()
        ids = [tokenizer.token_to_id(f"<{name}>") for name in SPECIALS]
        self.pad_id, self.mask_id, self.cls_id, self.sep_id, self.bos_id, self.eos_id = ids

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int) -> BPETokenizer:
        """Learn ``vocab_size`` tokens (specials and the 256 bytes included) from ``texts``."""
        tokenizers = _import_tokenizers()
        smallest = 256 + len(SPECIALS) + 1
        if vocab_size < smallest:
            raise TrainError(
                f"a byte-level BPE needs vocab_size >= {smallest} (256 bytes, {len(SPECIALS)} specials and at "
                f"least one merge); the recipe has vocab_size {vocab_size}: use the byte tokenizer or "
                "--set vocab_size=8192"
            )
        tok = tokenizers.Tokenizer(tokenizers.models.BPE())
        tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = tokenizers.decoders.ByteLevel()
        trainer = tokenizers.trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=[f"<{name}>" for name in SPECIALS],
            initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train_from_iterator(texts, trainer=trainer)
        return cls(tok)

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Iterable[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=True)

    def special_ids(self) -> frozenset[int]:
        return frozenset((self.pad_id, self.mask_id, self.cls_id, self.sep_id, self.bos_id, self.eos_id))

    def to_json(self) -> dict[str, Any]:
        return {"type": "bpe", "tokenizer": json.loads(self._tok.to_str())}


def _import_tokenizers() -> Any:
    try:
        import tokenizers
    except ImportError:
        raise TrainError("the bpe tokenizer needs the `tokenizers` package: pip install 'zoo[data]'") from None
    return tokenizers


def tokenizer_from_json(data: dict[str, Any]) -> Tokenizer:
    """The tokenizer ``to_json`` described."""
    kind = data.get("type")
    if kind == "byte":
        return ByteTokenizer()
    if kind == "bpe":
        tokenizers = _import_tokenizers()
        return BPETokenizer(tokenizers.Tokenizer.from_str(json.dumps(data["tokenizer"])))
    raise TrainError(f"unknown tokenizer type {kind!r} in the run's files; expected 'byte' or 'bpe'")
