"""Tokenizers: UTF-8 bytes (no files, no training), a byte-level BPE learned from the training text, or a
Hugging Face checkpoint's own (``tokenizer.json`` with its ``tokenizer_config.json``: special tokens, chat template).

zoo's two give the same special tokens, which the objectives use: ``pad`` (id 0, the recipes' ``pad_token_id``),
``mask`` (masked LM), ``cls`` / ``sep`` (classification), ``bos`` / ``eos`` (sequence ends, stop token); a Hugging
Face tokenizer has those its checkpoint names. A tokenizer is saved next to the weights it was trained with, as a
JSON description.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from zoo.errors import TrainError
from zoo.files import read_json

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


STOP_NONE: tuple[int, ...] = ()
"""zoo's own tokenizers stop a decoder at no token (it runs ``max_new_tokens``); a checkpoint's stops at its eos."""


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


HF_SPECIALS = ("bos", "eos", "pad", "unk", "mask", "cls", "sep")


class HFTokenizer:
    """A Hugging Face checkpoint's tokenizer: its ``tokenizer.json`` (the ``tokenizers`` library) gives the ids,
    exactly as ``AutoTokenizer`` does; ``tokenizer_config.json`` names its special tokens and chat template, and
    ``generation_config.json`` its stop tokens. A prompt gets the checkpoint's own specials (``encode_prompt``:
    a Llama's ``<s>`` first); training text gets those of zoo's objectives, as with zoo's tokenizers.

    A special token the checkpoint does not have: ``bos_id`` / ``eos_id`` are None, and ``mask_id``, ``cls_id``
    or ``sep_id`` raise a TrainError that names it (a Llama's has no mask). Without a pad token, prompts pad with
    the eos (or 0): padding is masked out.
    """

    def __init__(self, tokenizer: Any, config: dict[str, Any], stops: Iterable[int] = ()) -> None:
        self._tok = tokenizer
        self.config = config
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        self._ids = {name: self._id(config.get(f"{name}_token")) for name in HF_SPECIALS}
        self.bos_id, self.eos_id, self.unk_id = self._ids["bos"], self._ids["eos"], self._ids["unk"]
        self.token_pad_id = self._ids["pad"]
        """The checkpoint's own pad token (None: it has none, and ``pad_id`` pads with the eos or 0)."""
        self.pad_id = next((i for i in (self.token_pad_id, self.eos_id) if i is not None), 0)
        self.stop_ids = tuple(dict.fromkeys([*stops, *([] if self.eos_id is None else [self.eos_id])]))
        self.chat_template: str | None = config.get("chat_template")

    @property
    def mask_id(self) -> int:
        return self._required("mask", "masked LM")

    @property
    def cls_id(self) -> int:
        return self._required("cls", "classification")

    @property
    def sep_id(self) -> int:
        return self._required("sep", "classification")

    def _required(self, name: str, why: str) -> int:
        value = self._ids[name]
        if value is None:
            raise TrainError(f"the checkpoint's tokenizer has no {name} token, which {why} needs")
        return value

    def _id(self, token: Any) -> int | None:
        token = token.get("content") if isinstance(token, dict) else token
        return self._tok.token_to_id(token) if isinstance(token, str) else None

    def token(self, name: str) -> str | None:
        """The text of the special token ``name`` (``"bos"``), as the chat template names it."""
        token = self.config.get(f"{name}_token")
        return token.get("content") if isinstance(token, dict) else token

    def encode(self, text: str) -> list[int]:
        """``text``'s ids alone: training and evaluation add the specials their objective needs."""
        return self._tok.encode(text, add_special_tokens=False).ids

    def encode_prompt(self, text: str) -> list[int]:
        """A prompt's ids with the tokenizer's own specials around it (a Llama's ``<s>``), as ``tokenizer(text)``
        gives them to ``generate`` and ``pipeline``."""
        return self._tok.encode(text).ids

    def decode(self, ids: Iterable[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=True)

    def special_ids(self) -> frozenset[int]:
        named = set(self._ids.values())
        added = {self._tok.token_to_id(t.content) for t in self._tok.get_added_tokens_decoder().values() if t.special}
        return frozenset((named | added) - {None})

    def apply_chat_template(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool = False) -> str:
        """The conversation as the checkpoint's chat template writes it (``tokenizer.apply_chat_template``)."""
        from .chat_template import check_messages, render

        if not self.chat_template:
            raise TrainError(
                "the checkpoint's tokenizer has no chat template (tokenizer_config.json's chat_template or "
                "chat_template.jinja): use a chat model's folder, or prompt it with plain text"
            )
        tokens = {f"{name}_token": self.token(name) for name in HF_SPECIALS}
        return render(
            self.chat_template,
            check_messages(messages, "chat"),
            add_generation_prompt=add_generation_prompt,
            **{k: v for k, v in tokens.items() if v is not None},
        )

    def encode_chat(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool = True) -> list[int]:
        """The conversation's ids, as ``apply_chat_template(..., tokenize=True)`` gives them."""
        return self.encode(self.apply_chat_template(messages, add_generation_prompt=add_generation_prompt))

    def files(self) -> dict[str, str]:
        """``tokenizer.json`` and ``tokenizer_config.json`` (name -> text): the checkpoint's, as they were read."""
        return {
            "tokenizer.json": self._tok.to_str(pretty=True) + "\n",
            "tokenizer_config.json": json.dumps(self.config, indent=2, sort_keys=True) + "\n",
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "hf",
            "tokenizer": json.loads(self._tok.to_str()),
            "config": self.config,
            "stops": list(self.stop_ids),
        }


HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "chat_template.json")
"""The files of a Hugging Face folder that ``read_hf_tokenizer`` reads (with ``generation_config.json``)."""


def is_hf_tokenizer_file(path: Path) -> bool:
    """Whether ``path`` is a Hugging Face ``tokenizer.json`` (it has a ``model``), not zoo's own description."""
    try:
        data = read_json(path, error=TrainError)
    except TrainError:
        return False
    return "model" in data and "type" not in data


def read_hf_tokenizer(folder: Path) -> HFTokenizer:
    """The tokenizer of a Hugging Face folder (or of the ``hf/`` files a ``zoo import`` carried).

    Raises:
        TrainError: a damaged file, or a tokenizer the ``tokenizers`` library cannot read (a slow-only one).
    """
    tokenizers = _import_tokenizers()
    path = folder / "tokenizer.json"
    try:
        tok = tokenizers.Tokenizer.from_file(str(path))
    except Exception as exc:  # noqa: BLE001 - the tokenizers library reports a bad file in its own ways
        raise TrainError(
            f"{path} is not a tokenizer the `tokenizers` library reads ({type(exc).__name__}: {exc})"
        ) from None
    config = (
        read_json(folder / "tokenizer_config.json", error=TrainError)
        if (folder / "tokenizer_config.json").is_file()
        else {}
    )
    if (folder / "chat_template.jinja").is_file():
        config["chat_template"] = (folder / "chat_template.jinja").read_text(encoding="utf-8")
    elif (folder / "chat_template.json").is_file():
        config["chat_template"] = read_json(folder / "chat_template.json", error=TrainError).get("chat_template")
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: the default one
        config["chat_template"] = next((t.get("template") for t in template if t.get("name") == "default"), None)
    stops: list[int] = []
    if (folder / "generation_config.json").is_file():
        eos = read_json(folder / "generation_config.json", error=TrainError).get("eos_token_id")
        stops = [e for e in (eos if isinstance(eos, list) else [eos]) if isinstance(e, int)]
    return HFTokenizer(tok, config, stops)


def tokenizer_from_json(data: dict[str, Any]) -> Tokenizer:
    """The tokenizer ``to_json`` described."""
    kind = data.get("type")
    if kind == "byte":
        return ByteTokenizer()
    if kind == "bpe":
        tokenizers = _import_tokenizers()
        return BPETokenizer(tokenizers.Tokenizer.from_str(json.dumps(data["tokenizer"])))
    if kind == "hf":
        tokenizers = _import_tokenizers()
        tok = tokenizers.Tokenizer.from_str(json.dumps(data["tokenizer"]))
        return HFTokenizer(tok, dict(data.get("config") or {}), data.get("stops") or ())
    raise TrainError(f"unknown tokenizer type {kind!r} in the run's files; expected 'byte', 'bpe' or 'hf'")
