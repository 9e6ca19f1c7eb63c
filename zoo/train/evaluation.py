"""Evaluate a trained model on a data file: ``zoo eval RUN --data FILE``, or from Python::

    from zoo.train import evaluate
    result = evaluate("runs/gpt", "held-out.txt")       # result.metrics == {"loss": ..., "perplexity": ...}

The model comes from any folder ``zoo.locate`` knows (a run, a checkpoint, a zoo model folder, a Hugging Face
folder); a run or checkpoint brings its tokenizer, objective, class names, sequence length and image
statistics, and a zoo model folder without ``tokenizer.json`` reads text as bytes when its recipe's
``train.tokenizer`` is ``byte``. The metrics are the objective's held-out metrics (``objectives``), over the
whole file, every example once:

- text, causal LM: consecutive windows of ``seq_len`` tokens, so every token but the first is predicted once;
  loss (nats per token), accuracy of the next token, perplexity;
- text, masked LM: consecutive windows, masked as in training with a fixed seed (the figures repeat); loss
  and accuracy over the masked tokens;
- classification: every row of a ``label<TAB>text`` .tsv (its first ``seq_len - 1`` tokens after [cls]), or
  every window of each class folder's text; labels are matched to the run's classes by name;
- images: every image of the class folders, normalised with the run's training statistics;
- seq2seq: every row of a ``source<TAB>target`` .tsv; loss, token accuracy, exact match.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from zoo.errors import TrainError

from . import checkpoint as ckpt
from . import data as D
from .objectives import (
    CausalLM,
    MaskedLM,
    Objective,
    Seq2Seq,
    mask_tokens,
    needs_tokenizer,
    objective_name,
    perplexity,
)
from .tokenizer import ByteTokenizer, Tokenizer

Batch = dict[str, torch.Tensor]
_Read = tuple[Objective, Iterator[Batch], int, str]
"""What a reader gives: the objective (its metrics), the batches (lazily), how many examples, the data described."""


@dataclass
class Evaluation:
    """The metrics of a model on a data file, and what was read to get them."""

    model: str
    """The folder read, in words (a run names the checkpoint it read)."""
    data: str
    """The data, described (file, tokens, rows or images)."""
    objective: str
    examples: int
    """Windows, rows or images evaluated."""
    metrics: dict[str, float]
    notes: list[str] = field(default_factory=list)
    """What was assumed (a tokenizer, class names, image statistics the folder does not record)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "data": self.data,
            "objective": self.objective,
            "examples": self.examples,
            "metrics": {k: v if math.isfinite(v) else None for k, v in self.metrics.items()},  # JSON has no nan
            "notes": self.notes,
        }


def evaluate(path: str | Path, data: str | Path, *, device: str = "auto", batch_size: int | None = None) -> Evaluation:
    """The objective's metrics of the model in ``path`` over the whole of ``data``.

    Args:
        path: a run, checkpoint, zoo model or Hugging Face folder.
        data: a text file or folder, a .tsv file, or a folder of class folders, as ``zoo train --data`` takes.
        device: ``auto`` (CUDA when present), ``cpu`` or ``cuda``.
        batch_size: examples per forward pass; default the recipe's ``train.batch_size``.

    Raises:
        TrainError: no tokenizer for a text model, data of another kind than the objective reads, a label the
            model does not know, sequences beyond the positional table. ``NotAModelFolder``,
            ``CheckpointError``: ``path`` holds no model, or a damaged one.
    """
    from .distributed import pick_device
    from .loop import autocast_dtype, check_sequence_length
    from .run import no_tokenizer
    from .transfer import read_source

    if batch_size is not None and not 1 <= batch_size <= 1 << 20:
        raise TrainError(f"--batch-size {batch_size}: give 1 to {1 << 20}")
    model, folder, tokenizer = read_source(path)
    recipe = model.recipe
    info = ckpt.read_info(folder.path) if folder.kind in ("checkpoint", "run") else {}
    notes = []
    name = info.get("objective") or objective_name(recipe)
    seq_len = int(info.get("seq_len") or recipe.train.seq_len or recipe.max_len or 0)
    if needs_tokenizer(name):
        if isinstance(tokenizer, ByteTokenizer) and folder.kind in ("model", "hf"):
            notes.append(f"{folder.path} has no tokenizer.json: text is read as UTF-8 bytes (train.tokenizer: byte)")
        if tokenizer is None:
            raise no_tokenizer(folder, f"turn {data} into token ids")
        check_sequence_length(recipe, seq_len, name)
    data = Path(data)
    n = batch_size or recipe.train.batch_size
    reader = _READERS.get(name)
    if reader is None:
        raise TrainError(f"zoo eval does not evaluate the objective {name!r}")
    objective, batches, examples, description = reader(_Inputs(model, recipe, tokenizer, info, data, seq_len, n, notes))
    target = pick_device(device)
    model.to(target).eval()
    amp = autocast_dtype(recipe.train.precision, target)
    sums: dict[str, list[float]] = {}
    with torch.no_grad():
        for batch in batches:
            batch = {k: v.to(target) for k, v in batch.items()}
            with torch.autocast(target.type, dtype=amp) if amp is not None else contextlib.nullcontext():
                parts = objective.metrics(model, batch)
            for key, (total, count) in parts.items():
                acc = sums.setdefault(key, [0.0, 0.0])
                acc[0] += float(total)
                acc[1] += float(count)
    metrics = {key: total / count if count else float("nan") for key, (total, count) in sums.items()}
    if name == "causal_lm" and "loss" in metrics:
        metrics["perplexity"] = perplexity(metrics["loss"])
    return Evaluation(folder.note or str(folder.given), description, name, examples, metrics, notes)


@dataclass
class _Inputs:
    model: nn.Module
    recipe: Any
    tokenizer: Tokenizer | None
    info: dict[str, Any]
    data: Path
    seq_len: int
    batch_size: int
    notes: list[str]


def _chunks(items: Iterator[Any], n: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == n:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _stacked(windows: list[torch.Tensor]) -> Iterator[torch.Tensor]:
    """Windows of one length stacked together; a shorter last one on its own."""
    same = [w for w in windows if len(w) == len(windows[0])]
    yield torch.stack(same)
    if len(same) < len(windows):
        yield from (w[None] for w in windows[len(same) :])


def _text_ids(x: _Inputs, objective: str) -> tuple[torch.Tensor, str]:
    if x.data.suffix == ".tsv":
        raise TrainError(f"--data {x.data}: {objective} reads plain text (.txt or a folder), not a .tsv")
    docs = D.load_documents(x.data)
    ids = torch.tensor(x.tokenizer.encode("\n\n".join(text for _, text in docs)), dtype=torch.long)
    if len(ids) < 2:
        raise TrainError(f"--data {x.data}: {len(ids)} token(s) are too few to evaluate on")
    return ids, f"{x.data}: {len(ids):,} tokens"


def _causal_lm(x: _Inputs) -> _Read:
    ids, description = _text_ids(x, "causal_lm")
    length = x.seq_len
    starts = range(0, len(ids) - 1, length)  # windows of length + 1 overlapping by one token

    def batches() -> Iterator[Batch]:
        windows = (ids[s : s + length + 1] for s in starts)
        for chunk in _chunks(windows, x.batch_size):
            for w in _stacked(chunk):
                yield {"input_ids": w[:, :-1], "targets": w[:, 1:]}

    stream = D.TokenStream(ids, ids, description)
    return CausalLM(stream, x.tokenizer, length, x.model.head), batches(), len(starts), description


def _masked_lm(x: _Inputs) -> _Read:
    ids, description = _text_ids(x, "masked_lm")
    length, vocab, prob = x.seq_len, x.recipe.vocab_size, x.recipe.train.mask_prob
    starts = range(0, len(ids), length)

    def batches() -> Iterator[Batch]:
        generator = torch.Generator().manual_seed(0)  # the same masks at every evaluation
        for chunk in _chunks((ids[s : s + length] for s in starts), x.batch_size):
            for w in _stacked(chunk):
                inputs, labels = mask_tokens(w, x.tokenizer, vocab, prob, generator)
                yield {"input_ids": inputs, "labels": labels}

    stream = D.TokenStream(ids, ids, description)
    objective = MaskedLM(stream, x.tokenizer, length, vocab, prob)
    return objective, batches(), len(starts), description


def _class_index(x: _Inputs, found: list[str]) -> dict[str, int]:
    """Class name -> the model's class id: the run's own classes, or (a folder without them) sorted names."""
    known = x.info.get("labels")
    if not known:
        known = sorted(found)
        x.notes.append(f"the model folder records no class names: classes are the data's, sorted ({', '.join(known)})")
    index = {str(label): i for i, label in enumerate(known)}
    for label in found:
        if label not in index:
            raise TrainError(
                f"--data {x.data}: the class {label!r} is not one the model knows ({', '.join(map(str, known))})"
            )
    classes = x.recipe.num_classes or 0
    if len(known) > classes:
        raise TrainError(f"--data {x.data}: {len(known)} classes, but the model's head has num_classes {classes}")
    return index


def _classification(x: _Inputs) -> _Read:
    D._check_exists(x.data)
    tok, body = x.tokenizer, x.seq_len - 1  # [cls] first
    if x.data.is_dir():
        classes = sorted(p for p in x.data.iterdir() if p.is_dir())
        if not classes:
            raise TrainError(f"--data {x.data}: text classification reads a .tsv or one subfolder of .txt per class")
        index = _class_index(x, [c.name for c in classes])
        examples = []
        for c in classes:
            ids = tok.encode("\n\n".join(text for _, text in D.load_documents(c)))
            examples += [(ids[s : s + body], index[c.name]) for s in range(0, len(ids), body)]
        description = f"{x.data}: {len(examples):,} windows of {len(classes)} classes"
    else:
        rows = D.load_tsv(x.data)
        index = _class_index(x, sorted({label for label, _ in rows}))
        examples = [(tok.encode(text)[:body], index[label]) for label, text in rows]
        description = f"{x.data}: {len(rows):,} rows"

    def batches() -> Iterator[Batch]:
        for chunk in _chunks(iter(examples), x.batch_size):
            seqs = [[tok.cls_id, *ids] for ids, _ in chunk]
            lengths = torch.tensor([len(s) for s in seqs])
            yield {
                "input_ids": D.pad_to(seqs, tok.pad_id, x.seq_len),
                "attention_mask": torch.arange(x.seq_len)[None] < lengths[:, None],
                "labels": torch.tensor([label for _, label in chunk]),
            }

    return Objective(description, tok), batches(), len(examples), description


def _image_classification(x: _Inputs) -> _Read:
    images, labels, names = D.image_folder(x.data, x.recipe.image_size, x.recipe.num_channels)
    index = _class_index(x, names)
    labels = torch.tensor([index[names[i]] for i in labels.tolist()])
    mean, std = x.info.get("image_mean"), x.info.get("image_std")
    if mean is None or std is None:
        mean, std = images.mean(dim=(0, 2, 3)).tolist(), images.std(dim=(0, 2, 3)).clamp(min=1e-6).tolist()
        x.notes.append("the model folder records no image statistics: images are normalised with the data's own")
    mean_t, std_t = torch.tensor(mean)[:, None, None], torch.tensor(std)[:, None, None]
    images = (images - mean_t) / std_t
    description = f"{x.data}: {len(images):,} images of {len(names)} classes"

    def batches() -> Iterator[Batch]:
        for i in range(0, len(images), x.batch_size):
            yield {"images": images[i : i + x.batch_size], "labels": labels[i : i + x.batch_size]}

    return Objective(description), batches(), len(images), description


def _seq2seq(x: _Inputs) -> _Read:
    if x.data.suffix != ".tsv":
        raise TrainError(f"--data {x.data}: seq2seq reads source<TAB>target rows from a .tsv file")
    rows = D.load_tsv(x.data)
    pairs = [(x.tokenizer.encode(s), x.tokenizer.encode(t)) for s, t in rows]
    description = f"{x.data}: {len(rows):,} pairs"
    objective = Seq2Seq(x.tokenizer, source_len=x.seq_len, pairs=(pairs, pairs), description=description)

    def batches() -> Iterator[Batch]:
        for i in range(0, len(pairs), x.batch_size):
            yield objective._tensors(pairs[i : i + x.batch_size])

    return objective, batches(), len(pairs), description


_READERS = {
    "causal_lm": _causal_lm,
    "masked_lm": _masked_lm,
    "classification": _classification,
    "image_classification": _image_classification,
    "seq2seq": _seq2seq,
}
