"""Where training examples come from: embedded data that needs nothing else, or the user's files.

Embedded data, chosen so that ``zoo train RECIPE`` works on any Python install, offline:

- English text: the Python Language Reference topics that every CPython ships for ``help()``
  (``pydoc_data.topics``, about 460 KB of prose with some grammar and code), or, where a distribution
  stripped that module, the docstrings of standard-library modules. Read at run time, so nothing is
  copied into this package, and real English rather than generated text.
- Images: the 1,797 8x8 handwritten digits that scikit-learn ships (``pip install 'zoo[data]'``), or,
  without scikit-learn, seven-segment digits drawn with random placement, stroke strength and noise: an
  honestly learnable 10-class set, never the same image twice.
- Pairs: an algorithmic seq2seq task on letter strings (reverse, sort or copy), generated without end.

User data (``--data``): a text file or a folder of ``.txt`` files (language modelling), a ``.jsonl`` file of
``text`` records, or of chat ``messages`` (``zoo.train.jsonl``: the loss on the assistant turns), a ``.tsv`` file
(``label<TAB>text`` for classification, ``source<TAB>target`` for seq2seq), a folder with one subfolder
per class (images for vit, ``.txt`` files for text classification).

Sampling is a pure function of a seeded ``torch.Generator``: the trainer seeds one per (seed, step,
micro-step), so a resumed run draws exactly the batches the uninterrupted run would have drawn.
"""

from __future__ import annotations

import codecs
import importlib
from dataclasses import dataclass, field
from pathlib import Path

import torch

from zoo.errors import TrainError

from .tokenizer import Tokenizer

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")
FALLBACK_MODULES = (
    "abc", "argparse", "asyncio", "collections", "contextlib", "csv", "dataclasses", "datetime", "decimal",
    "email", "enum", "fractions", "functools", "heapq", "inspect", "json", "logging", "pathlib", "pickle",
    "random", "re", "shutil", "statistics", "string", "subprocess", "textwrap", "threading", "typing",
    "unittest", "zipfile",
)  # fmt: skip

Document = tuple[str, str]
"""(title, text)."""


# ---------------------------------------------------------------------------------------------- text


def embedded_english() -> tuple[list[Document], str]:
    """English documents that ship with Python, and a description of where they came from."""
    try:
        from pydoc_data.topics import topics
    except ImportError:
        topics = {}
    if topics:
        return sorted(topics.items()), "Python Language Reference topics (pydoc_data, ships with Python)"
    docs = []
    for name in FALLBACK_MODULES:
        try:
            doc = importlib.import_module(name).__doc__
        except ImportError:
            continue
        if doc and doc.strip():
            docs.append((name, doc))
    return docs, "docstrings of Python standard-library modules"


TEXT_SAMPLE = 1 << 16
"""Bytes of a data file checked for being text (UTF-8 without NUL bytes) before it is read whole."""


def _read_text(path: Path) -> str:
    """A UTF-8 text file; a binary one (NUL bytes, or not UTF-8 in its first 64 KiB) is refused by name."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TrainError(f"cannot read {path}: {exc.strerror or exc}") from None
    sample = raw[:TEXT_SAMPLE]
    problem = None
    if b"\0" in sample:
        problem = f"it holds NUL bytes (the first at byte {sample.index(0):,})"
    else:
        try:  # an incremental decoder accepts a character cut in two at the end of the sample
            codecs.getincrementaldecoder("utf-8")().decode(sample, final=len(raw) <= TEXT_SAMPLE)
        except UnicodeDecodeError as exc:
            problem = f"it is not UTF-8 (byte {exc.start:,} is {sample[exc.start : exc.start + 1]!r})"
    if problem is not None:
        raise TrainError(
            f"--data {path} is not a text file: {problem}. Give UTF-8 text (.txt, .tsv) or an image folder"
        )
    return raw.decode("utf-8", errors="replace")


def _check_exists(path: Path) -> None:
    if not path.exists():
        raise TrainError(f"--data {path}: no such file or folder")


def load_documents(path: Path) -> list[Document]:
    """A text file, or every ``.txt`` file under a folder (sorted), as documents; empty ones are an error. A
    ``.jsonl`` file's ``text`` records are its documents (a chat file's messages, for a tokenizer to learn from)."""
    _check_exists(path)
    if path.suffix == ".jsonl" and path.is_file():
        from .jsonl import read_jsonl

        kind, records = read_jsonl(path, _read_text(path))
        if kind == "chat":
            records = [(str(line), "\n".join(str(m.get("content", "")) for m in msgs)) for line, msgs in records]
        return [(title, text) for title, text in records if text.strip()] or _empty(path)
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*.txt") if p.is_file())
    if not files:
        raise TrainError(f"--data {path}: a folder of text needs .txt files, and this one has none")
    docs = [(str(f.relative_to(path) if path.is_dir() else f.name), _read_text(f)) for f in files]
    docs = [(title, text) for title, text in docs if text.strip()]
    if not docs:
        raise TrainError(f"--data {path}: the text is empty")
    return docs


def _empty(path: Path) -> list[Document]:
    raise TrainError(f"--data {path}: the text is empty")


def load_tsv(path: Path) -> list[tuple[str, str]]:
    """``first<TAB>second`` lines of a .tsv file (blank lines skipped); any other line is an error."""
    _check_exists(path)
    rows = []
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        first, tab, second = line.partition("\t")
        if not tab or not first.strip() or not second.strip():
            raise TrainError(f"{path}, line {number}: expected two fields separated by a tab, got {line[:60]!r}")
        rows.append((first.strip(), second.strip()))
    if not rows:
        raise TrainError(f"--data {path}: the file has no rows")
    return rows


@dataclass
class TokenStream:
    """One long sequence of token ids, split into a training part and a held-out tail."""

    train: torch.Tensor
    val: torch.Tensor
    description: str

    @classmethod
    def from_documents(
        cls, docs: list[Document], tokenizer: Tokenizer, *, val_fraction: float, window: int, description: str
    ) -> TokenStream:
        ids = torch.tensor(tokenizer.encode("\n\n".join(text for _, text in docs)), dtype=torch.long)
        n_val = max(window + 1, int(len(ids) * val_fraction))
        if len(ids) < n_val + window + 1:
            raise TrainError(
                f"{description}: {len(ids):,} tokens are too few for windows of {window} tokens plus a held-out "
                f"part; give more text or lower train.seq_len"
            )
        return cls(ids[:-n_val], ids[-n_val:], f"{description}: {len(ids):,} tokens")

    def windows(self, split: str, length: int, n: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` random windows of ``length`` consecutive tokens from the split: (n, length)."""
        ids = self.train if split == "train" else self.val
        starts = torch.randint(0, len(ids) - length + 1, (n,), generator=generator)
        return ids[starts[:, None] + torch.arange(length)]  # (n, length)


@dataclass
class LabeledDocs:
    """Text examples with class labels; each example is a random window of one document of its class."""

    train: list[tuple[torch.Tensor, int]]
    val: list[tuple[torch.Tensor, int]]
    labels: list[str]
    description: str

    def sample(self, split: str, length: int, n: int, generator: torch.Generator) -> list[tuple[torch.Tensor, int]]:
        """``n`` (ids of at most ``length`` tokens, label) examples from the split."""
        docs = self.train if split == "train" else self.val
        picks = torch.randint(0, len(docs), (n,), generator=generator).tolist()
        out = []
        for i in picks:
            ids, label = docs[i]
            start = int(torch.randint(0, max(1, len(ids) - length + 1), (1,), generator=generator))
            out.append((ids[start : start + length], label))
        return out


def labeled_documents(
    path: Path | None, tokenizer: Tokenizer, *, num_classes: int, val_fraction: float, min_tokens: int
) -> LabeledDocs:
    """Classification text: the TSV or class folders at ``path``, or the largest embedded topics."""
    if path is None:
        docs, source = embedded_english()
        if len(docs) < num_classes:
            raise TrainError(f"the embedded text has {len(docs)} topics, fewer than num_classes ({num_classes})")
        largest = sorted(docs, key=lambda d: -len(d[1]))[:num_classes]
        pairs = [(title, text) for title, text in sorted(largest)]
        return _split_long_documents(pairs, tokenizer, val_fraction, min_tokens, f"{source}, one class per topic")
    _check_exists(path)
    if path.is_dir():
        classes = sorted(p for p in path.iterdir() if p.is_dir())
        if not classes:
            raise TrainError(f"--data {path}: text classification needs one subfolder of .txt files per class")
        pairs = [(c.name, "\n\n".join(text for _, text in load_documents(c))) for c in classes]
        return _split_long_documents(pairs, tokenizer, val_fraction, min_tokens, f"{path}: {len(classes)} classes")
    rows = load_tsv(path)
    labels = sorted({label for label, _ in rows})
    index = {label: i for i, label in enumerate(labels)}
    examples = [(torch.tensor(tokenizer.encode(text), dtype=torch.long), index[label]) for label, text in rows]
    g = torch.Generator().manual_seed(0)
    order = torch.randperm(len(examples), generator=g).tolist()
    n_val = max(1, int(len(examples) * val_fraction))
    if len(examples) - n_val < 1:
        raise TrainError(f"--data {path}: {len(examples)} rows are too few to hold some out for evaluation")
    val = [examples[i] for i in order[:n_val]]
    train = [examples[i] for i in order[n_val:]]
    return LabeledDocs(train, val, labels, f"{path}: {len(rows):,} rows, {len(labels)} classes")


def _split_long_documents(
    pairs: list[tuple[str, str]], tokenizer: Tokenizer, val_fraction: float, min_tokens: int, description: str
) -> LabeledDocs:
    """One long document per class: its head trains, its tail is held out."""
    train, val = [], []
    for label, (title, text) in enumerate(pairs):
        ids = torch.tensor(tokenizer.encode(text), dtype=torch.long)
        n_val = max(min_tokens, int(len(ids) * val_fraction))
        if len(ids) < n_val + min_tokens:
            raise TrainError(f"class {title!r} has {len(ids)} tokens, too few to train and evaluate on")
        train.append((ids[:-n_val], label))
        val.append((ids[-n_val:], label))
    return LabeledDocs(train, val, [title for title, _ in pairs], description)


# ---------------------------------------------------------------------------------------------- images


@dataclass
class ImageSet:
    """Normalised images (M, C, H, W) with integer labels, split into train and held-out parts."""

    train_images: torch.Tensor
    train_labels: torch.Tensor
    val_images: torch.Tensor
    val_labels: torch.Tensor
    labels: list[str]
    description: str
    mean: list[float] = field(default_factory=list)
    std: list[float] = field(default_factory=list)

    @classmethod
    def split(
        cls, images: torch.Tensor, labels: torch.Tensor, names: list[str], val_fraction: float, description: str
    ) -> ImageSet:
        if len(images) < 2:
            raise TrainError(f"{description}: {len(images)} images are too few to train and evaluate on")
        order = torch.randperm(len(images), generator=torch.Generator().manual_seed(0))
        n_val = max(1, int(len(images) * val_fraction))
        val, train = order[:n_val], order[n_val:]
        mean = images[train].mean(dim=(0, 2, 3))  # (C,): statistics of the training part only
        std = images[train].std(dim=(0, 2, 3)).clamp(min=1e-6)
        norm = (images - mean[:, None, None]) / std[:, None, None]
        return cls(
            norm[train],
            labels[train],
            norm[val],
            labels[val],
            names,
            f"{description}: {len(train):,} train / {len(val):,} held-out images",
            mean.tolist(),
            std.tolist(),
        )

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randint(0, len(self.train_images), (n,), generator=generator)
        return self.train_images[idx], self.train_labels[idx]


def digits() -> tuple[torch.Tensor, torch.Tensor, str] | None:
    """scikit-learn's 8x8 handwritten digits as (1797, 1, 8, 8) in [0, 1], or None without scikit-learn."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        return None
    bunch = load_digits()
    images = torch.tensor(bunch.images, dtype=torch.float32)[:, None] / 16.0  # pixel values are 0..16
    return images, torch.tensor(bunch.target, dtype=torch.long), "scikit-learn 8x8 handwritten digits"


# Seven-segment layout: segment -> pixels of a 4-wide, 7-tall glyph (row, column).
_SEGMENTS = {
    "a": [(0, 0), (0, 1), (0, 2), (0, 3)],
    "b": [(0, 3), (1, 3), (2, 3), (3, 3)],
    "c": [(3, 3), (4, 3), (5, 3), (6, 3)],
    "d": [(6, 0), (6, 1), (6, 2), (6, 3)],
    "e": [(3, 0), (4, 0), (5, 0), (6, 0)],
    "f": [(0, 0), (1, 0), (2, 0), (3, 0)],
    "g": [(3, 0), (3, 1), (3, 2), (3, 3)],
}
_DIGIT_SEGMENTS = ["abcdef", "bc", "abged", "abgcd", "fgbc", "afgcd", "afgedc", "abc", "abcdefg", "abcdfg"]


def seven_segment_digits(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, str]:
    """``n`` 8x8 seven-segment digits: random position, per-segment stroke strength, blur-free noise.

    Every image differs (placement 5x2 ways, strengths and noise continuous); the class is only readable
    from which segments are lit, so a model must learn the shapes, not a pixel.
    """
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (n,), generator=g)
    images = torch.zeros(n, 1, 8, 8)
    rows = torch.randint(0, 2, (n,), generator=g)
    cols = torch.randint(0, 5, (n,), generator=g)
    strength = 0.5 + 0.5 * torch.rand(n, 7, generator=g)
    for i in range(n):
        for s, seg in enumerate("abcdefg"):
            if seg in _DIGIT_SEGMENTS[int(labels[i])]:
                for r, c in _SEGMENTS[seg]:
                    images[i, 0, rows[i] + r, cols[i] + c] = strength[i, s]
    images = (images + 0.15 * torch.randn(images.shape, generator=g)).clamp(0, 1)
    return images, labels, "generated seven-segment digits (install scikit-learn for real handwritten ones)"


def image_folder(path: Path, image_size: int, num_channels: int) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """Images under ``path/CLASS/*``, resized to ``image_size`` square, in [0, 1]; classes sorted by name."""
    _check_exists(path)
    try:
        from PIL import Image
    except ImportError:
        raise TrainError("reading an image folder needs Pillow: pip install 'zoo[data]'") from None
    classes = sorted(p for p in path.iterdir() if p.is_dir()) if path.is_dir() else []
    if not classes:
        raise TrainError(f"--data {path}: an image folder needs one subfolder of images per class")
    mode = {1: "L", 3: "RGB"}.get(num_channels)
    if mode is None:
        raise TrainError(f"image folders give 1 or 3 channels; the recipe has num_channels {num_channels}")
    images, labels = [], []
    for label, folder in enumerate(classes):
        for f in sorted(folder.iterdir()):
            if f.suffix.lower() not in IMAGE_SUFFIXES:
                continue
            try:
                with Image.open(f) as im:
                    im = im.convert(mode).resize((image_size, image_size))
                    pixels = torch.frombuffer(bytearray(im.tobytes()), dtype=torch.uint8)
            except (OSError, ValueError, SyntaxError) as exc:  # Pillow's errors for damaged or unknown files
                raise TrainError(f"--data {path}: {f} is not a readable image ({exc})") from None
            images.append(pixels.view(image_size, image_size, num_channels).permute(2, 0, 1).float() / 255.0)
            labels.append(label)
    if not images:
        raise TrainError(f"--data {path}: no images ({', '.join(IMAGE_SUFFIXES)}) in its class folders")
    return torch.stack(images), torch.tensor(labels), [c.name for c in classes]


def load_images(path: Path | None, *, image_size: int, num_channels: int, val_fraction: float) -> ImageSet:
    """The image set of a vit run: ``path``'s class folders, or the embedded 8x8 digits."""
    if path is not None:
        images, labels, names = image_folder(path, image_size, num_channels)
        return ImageSet.split(images, labels, names, val_fraction, f"{path}: {len(names)} classes")
    found = digits() or seven_segment_digits(2000)
    images, labels, description = found
    if (image_size, num_channels) != (8, 1):
        raise TrainError(
            f"the embedded digits are 8x8 grayscale, but the recipe wants {image_size}x{image_size} images with "
            f"{num_channels} channels: pass --data IMAGE_FOLDER (one subfolder per class)"
        )
    return ImageSet.split(images, labels, [str(d) for d in range(10)], val_fraction, description)


# ---------------------------------------------------------------------------------------------- pairs


@dataclass
class AlgorithmicTask:
    """Letter strings and what to do to them: ``reverse``, ``sort`` or ``copy``; endless and exact."""

    name: str
    max_len: int
    letters: list[int]
    """Token ids of 'a'..'z' under the run's tokenizer."""

    @property
    def description(self) -> str:
        return f"algorithmic task '{self.name}' on strings of 1..{self.max_len} letters (generated)"

    def sample(self, n: int, generator: torch.Generator) -> list[tuple[list[int], list[int]]]:
        lengths = torch.randint(1, self.max_len + 1, (n,), generator=generator).tolist()
        out = []
        for length in lengths:
            picks = torch.randint(0, len(self.letters), (length,), generator=generator)
            source = [self.letters[i] for i in picks.tolist()]
            target = {"reverse": source[::-1], "sort": sorted(source), "copy": list(source)}[self.name]
            out.append((source, target))
        return out


def letter_ids(tokenizer: Tokenizer) -> list[int]:
    ids = [tokenizer.encode(c) for c in "abcdefghijklmnopqrstuvwxyz"]
    if any(len(i) != 1 for i in ids):
        raise TrainError("the algorithmic tasks need a tokenizer with one token per letter (use tokenizer: byte)")
    return [i[0] for i in ids]


def load_pairs(path: Path, tokenizer: Tokenizer, val_fraction: float) -> tuple[list, list, str]:
    """``source<TAB>target`` rows of a .tsv file as token-id pairs, split into train and held-out rows."""
    rows = load_tsv(path)
    pairs = [(tokenizer.encode(s), tokenizer.encode(t)) for s, t in rows]
    n_val = max(1, int(len(pairs) * val_fraction))
    if len(pairs) - n_val < 1:
        raise TrainError(f"--data {path}: {len(pairs)} rows are too few to hold some out for evaluation")
    order = torch.randperm(len(pairs), generator=torch.Generator().manual_seed(0)).tolist()
    return [pairs[i] for i in order[n_val:]], [pairs[i] for i in order[:n_val]], f"{path}: {len(rows):,} pairs"


def pad_to(seqs: list[list[int]] | list[torch.Tensor], value: int, length: int | None = None) -> torch.Tensor:
    """Right-pad sequences into one (N, length) LongTensor (length: the longest)."""
    length = length or max(len(s) for s in seqs)
    out = torch.full((len(seqs), length), value, dtype=torch.long)
    for i, s in enumerate(seqs):
        s = torch.as_tensor(s, dtype=torch.long)[:length]
        out[i, : len(s)] = s
    return out
