"""What a model learns, by family: batches from the data, the loss, and the held-out metrics.

========================  =====================================================  ==========================
objective                 training signal                                        held-out metrics
========================  =====================================================  ==========================
causal_lm (decoder)       next token at every position                           loss, perplexity
masked_lm (encoder, mlm)  15% of tokens: 80% [mask], 10% random, 10% unchanged    loss, accuracy (masked)
classification (encoder)  the class of a text window ([cls] first, padded)       loss, accuracy
image_classification      the class of an image                                  loss, accuracy
seq2seq (enc-dec)         the target given the source, teacher-forced            loss, token accuracy,
                          (decoder input = target shifted right)                 exact match
contrastive (dual-enc.)   each image with its caption ("a photo of a {label}")   loss, accuracy (image ->
                          against the batch's other captions, both ways          right caption in batch)
========================  =====================================================  ==========================

An objective's ``batch(generator, n)`` draws ``n`` training examples as tensors (on the CPU); the trainer
seeds the generator, slices the batch per process and moves it to the device. ``loss(model, batch)`` runs
the (possibly wrapped) model; ``metrics(model, batch)`` returns ``{name: (sum, count)}`` so that held-out
metrics add up exactly across batches and processes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from torch import nn

from zoo.errors import TrainError
from zoo.recipe import Recipe
from zoo.recipe.training import TrainConfig

from . import data as D
from .tokenizer import Tokenizer

Batch = dict[str, torch.Tensor]
Metrics = dict[str, tuple[torch.Tensor, torch.Tensor]]


def objective_name(recipe: Recipe) -> str:
    """The objective ``auto`` means for this recipe's architecture and head."""
    if recipe.train.objective != "auto":
        return recipe.train.objective
    arch, head = recipe.architecture, recipe.head.type
    if arch == "decoder":
        return "causal_lm"
    if arch == "encoder-decoder":
        return "seq2seq"
    if arch == "vit":
        return "image_classification"
    if arch == "dual-encoder":
        return "contrastive"
    if arch == "encoder":
        if head == "mlm":
            return "masked_lm"
        if head == "classification":
            return "classification"
        raise TrainError(f"an encoder with a '{head}' head has nothing to train on: use an mlm or classification head")
    raise TrainError(f"no training objective for architecture '{arch}'; set train.objective")


def _accuracy(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(correct, counted) over the labels that are not -100."""
    counted = labels != -100
    correct = (logits.argmax(-1) == labels) & counted
    return correct.sum(), counted.sum()


class Objective:
    """Base: the shared bookkeeping. Subclasses set ``name`` and ``unit`` and implement the rest."""

    name = ""
    unit = "samples"
    """What throughput counts: ``tokens`` or ``samples``."""
    generates = False
    """A trained model generates text from a prompt (``zoo generate``)."""
    maps_source_to_target = False
    """Generation maps a prompt (the source) to its target instead of continuing it."""

    def __init__(self, description: str, tokenizer: Tokenizer | None = None, labels: list[str] | None = None):
        self.description = description
        self.tokenizer = tokenizer
        self.labels = labels

    def batch(self, generator: torch.Generator, n: int) -> Batch:
        raise NotImplementedError

    def eval_batches(self, n: int, count: int) -> list[Batch]:
        """``count`` fixed held-out batches of ``n`` examples: the same ones at every evaluation."""
        g = torch.Generator().manual_seed(20_240_601)
        return [self.held_out(g, n) for _ in range(count)]

    def held_out(self, generator: torch.Generator, n: int) -> Batch:
        raise NotImplementedError

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        return model(**batch).loss

    def metrics(self, model: nn.Module, batch: Batch) -> Metrics:
        out = model(**batch)
        n = torch.tensor(len(next(iter(batch.values()))))
        correct, counted = _accuracy(out.logits, batch["labels"])
        return {"loss": (out.loss.detach().float() * n, n), "accuracy": (correct, counted)}

    def count(self, batch: Batch) -> int:
        """Examples (or tokens) in a batch, for throughput."""
        return len(next(iter(batch.values())))

    def averaged_over(self, batch: Batch) -> int | None:
        """How many positions the loss of ``batch`` is a mean over: its per-token labels (or targets) that are not
        -100; None where the loss is a mean over examples (per-example labels, images). Data-parallel ranks weight
        their losses by it, so that together they average over the whole batch as one process does."""
        labels = batch.get("labels", batch.get("targets"))  # per token (2-D), -100 where nothing is predicted
        return None if labels is None or labels.dim() < 2 else int((labels != -100).sum())


class CausalLM(Objective):
    name, unit = "causal_lm", "tokens"
    generates = True

    def __init__(self, stream: D.TokenStream, tokenizer: Tokenizer, seq_len: int, head: nn.Module) -> None:
        super().__init__(stream.description, tokenizer)
        self.stream = stream
        self.seq_len = seq_len
        self.head_loss = head.loss

    def _split(self, split: str, generator: torch.Generator, n: int) -> Batch:
        w = self.stream.windows(split, self.seq_len + 1, n, generator)  # (n, L + 1)
        return {"input_ids": w[:, :-1], "targets": w[:, 1:]}

    def batch(self, generator: torch.Generator, n: int) -> Batch:
        return self._split("train", generator, n)

    def held_out(self, generator: torch.Generator, n: int) -> Batch:
        return self._split("val", generator, n)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        # Inputs and targets are one window shifted by one, so all L positions are predicted and the
        # logits need no shifted copy (the model's own `labels` path would drop the last position).
        out = model(batch["input_ids"])
        loss = self.head_loss(out.logits, batch["targets"])
        return loss + out.aux_loss if out.aux_loss is not None else loss

    def metrics(self, model: nn.Module, batch: Batch) -> Metrics:
        out = model(batch["input_ids"])
        tokens = torch.tensor(batch["targets"].numel())
        loss = self.head_loss(out.logits, batch["targets"]).detach().float()
        correct, counted = _accuracy(out.logits, batch["targets"])
        return {"loss": (loss * tokens, tokens), "accuracy": (correct, counted)}

    def count(self, batch: Batch) -> int:
        return batch["input_ids"].numel()


class ChatLM(CausalLM):
    """Causal LM on chat conversations (``zoo.train.jsonl``): the loss on the assistant's tokens only."""

    def __init__(self, chats: Any, tokenizer: Tokenizer, seq_len: int, head: nn.Module) -> None:
        Objective.__init__(self, chats.description, tokenizer)
        self.chats, self.seq_len, self.head_loss = chats, seq_len, head.loss

    def _split(self, split: str, generator: torch.Generator, n: int) -> Batch:
        return self.chats.batch(split, self.seq_len, n, generator)

    def metrics(self, model: nn.Module, batch: Batch) -> Metrics:
        out = model(batch["input_ids"])
        tokens = (batch["targets"] != -100).sum()
        loss = self.head_loss(out.logits, batch["targets"]).detach().float()
        return {"loss": (loss * tokens, tokens), "accuracy": _accuracy(out.logits, batch["targets"])}


def mask_tokens(
    ids: torch.Tensor, tokenizer: Tokenizer, vocab_size: int, prob: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking: choose ``prob`` of the tokens to predict; replace 80% of those by [mask], 10% by a
    random ordinary token, keep 10%. Returns (inputs, labels) with labels -100 where nothing is predicted."""
    chosen = torch.rand(ids.shape, generator=generator) < prob
    roll = torch.rand(ids.shape, generator=generator)
    ordinary = torch.tensor(sorted(set(range(vocab_size)) - tokenizer.special_ids()))
    random_tokens = ordinary[torch.randint(0, len(ordinary), ids.shape, generator=generator)]
    inputs = torch.where(chosen & (roll < 0.8), tokenizer.mask_id, ids)
    inputs = torch.where(chosen & (roll >= 0.8) & (roll < 0.9), random_tokens, inputs)
    labels = torch.where(chosen, ids, -100)
    return inputs, labels


class MaskedLM(Objective):
    name, unit = "masked_lm", "tokens"

    def __init__(
        self, stream: D.TokenStream, tokenizer: Tokenizer, seq_len: int, vocab_size: int, mask_prob: float
    ) -> None:
        super().__init__(stream.description, tokenizer)
        self.stream = stream
        self.seq_len = seq_len
        self.vocab_size = vocab_size
        self.mask_prob = mask_prob

    def _split(self, split: str, generator: torch.Generator, n: int) -> Batch:
        ids = self.stream.windows(split, self.seq_len, n, generator)  # (n, L)
        inputs, labels = mask_tokens(ids, self.tokenizer, self.vocab_size, self.mask_prob, generator)
        return {"input_ids": inputs, "labels": labels}

    def batch(self, generator: torch.Generator, n: int) -> Batch:
        return self._split("train", generator, n)

    def held_out(self, generator: torch.Generator, n: int) -> Batch:
        return self._split("val", generator, n)

    def metrics(self, model: nn.Module, batch: Batch) -> Metrics:
        out = model(**batch)
        correct, counted = _accuracy(out.logits, batch["labels"])
        return {"loss": (out.loss.detach().float() * counted, counted), "accuracy": (correct, counted)}

    def count(self, batch: Batch) -> int:
        return batch["input_ids"].numel()


class TextClassification(Objective):
    name, unit = "classification", "samples"

    def __init__(self, docs: D.LabeledDocs, tokenizer: Tokenizer, seq_len: int) -> None:
        super().__init__(docs.description, tokenizer, docs.labels)
        self.docs = docs
        self.seq_len = seq_len

    def _split(self, split: str, generator: torch.Generator, n: int) -> Batch:
        examples = self.docs.sample(split, self.seq_len - 1, n, generator)
        seqs = [[self.tokenizer.cls_id, *ids.tolist()] for ids, _ in examples]
        input_ids = D.pad_to(seqs, self.tokenizer.pad_id, self.seq_len)  # (n, L), fixed L for fixed shapes
        lengths = torch.tensor([len(s) for s in seqs])
        attention_mask = torch.arange(self.seq_len)[None] < lengths[:, None]  # (n, L)
        labels = torch.tensor([label for _, label in examples])
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}

    def batch(self, generator: torch.Generator, n: int) -> Batch:
        return self._split("train", generator, n)

    def held_out(self, generator: torch.Generator, n: int) -> Batch:
        return self._split("val", generator, n)


class ImageClassification(Objective):
    name, unit = "image_classification", "samples"

    def __init__(self, images: D.ImageSet) -> None:
        super().__init__(images.description, None, images.labels)
        self.images = images

    def batch(self, generator: torch.Generator, n: int) -> Batch:
        images, labels = self.images.sample(n, generator)
        return {"images": images, "labels": labels}

    def eval_batches(self, n: int, count: int) -> list[Batch]:
        # The whole held-out set when it fits in `count` batches: accuracy over every held-out image.
        images, labels = self.images.val_images, self.images.val_labels
        return [
            {"images": images[i : i + n], "labels": labels[i : i + n]} for i in range(0, min(len(images), n * count), n)
        ]


class Seq2Seq(Objective):
    """Teacher-forced seq2seq. ``exact_match`` counts targets whose every token (and the final [eos]) is
    the argmax of the teacher-forced logits: exactly the targets that greedy decoding reproduces, because
    greedy decoding follows the target as long as each argmax equals the next target token."""

    name, unit = "seq2seq", "samples"
    generates = maps_source_to_target = True

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        source_len: int,
        task: D.AlgorithmicTask | None = None,
        pairs: tuple[list, list] | None = None,
        description: str,
    ) -> None:
        super().__init__(description, tokenizer)
        self.task = task
        self.pairs = pairs
        self.source_len = source_len
        self.target_len = source_len + 1  # room for [eos]

    def _tensors(self, pairs: list[tuple[list[int], list[int]]]) -> Batch:
        for source, target in pairs:
            if len(source) > self.source_len or len(target) + 1 > self.target_len:
                raise TrainError(
                    f"a source of {len(source)} tokens or target of {len(target)} does not fit train.seq_len "
                    f"({self.source_len}); raise train.seq_len"
                )
        input_ids = D.pad_to([s for s, _ in pairs], self.tokenizer.pad_id, self.source_len)
        attention_mask = torch.arange(self.source_len)[None] < torch.tensor([len(s) for s, _ in pairs])[:, None]
        labels = D.pad_to([[*t, self.tokenizer.eos_id] for _, t in pairs], -100, self.target_len)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}

    def _draw(self, split: str, generator: torch.Generator, n: int) -> list[tuple[list[int], list[int]]]:
        if self.task is not None:
            return self.task.sample(n, generator)
        rows = self.pairs[0] if split == "train" else self.pairs[1]
        return [rows[i] for i in torch.randint(0, len(rows), (n,), generator=generator).tolist()]

    def batch(self, generator: torch.Generator, n: int) -> Batch:
        return self._tensors(self._draw("train", generator, n))

    def held_out(self, generator: torch.Generator, n: int) -> Batch:
        return self._tensors(self._draw("val", generator, n))

    def eval_batches(self, n: int, count: int) -> list[Batch]:
        if self.task is not None:
            return super().eval_batches(n, count)
        val = self.pairs[1][: n * count]  # every held-out row, in order, once
        return [self._tensors(val[i : i + n]) for i in range(0, len(val), n)]

    def metrics(self, model: nn.Module, batch: Batch) -> Metrics:
        out = model(**batch)
        labels = batch["labels"]
        counted = labels != -100
        hit = (out.logits.argmax(-1) == labels) | ~counted
        n = torch.tensor(len(labels))
        return {
            "loss": (out.loss.detach().float() * counted.sum(), counted.sum()),
            "token_accuracy": ((hit & counted).sum(), counted.sum()),
            "exact_match": (hit.all(dim=1).sum(), n),
        }


def loss_weight(objective: Objective, batch: Batch, groups: int, rank: int) -> float:
    """What data group ``rank`` of ``groups`` multiplies its loss by: its share of the positions the loss of the
    whole ``batch`` averages over, times ``groups`` (1 where every group's loss averages over as many). The mean
    over the groups, which data parallelism takes, is then one process's mean over the whole batch."""
    total = objective.averaged_over(batch) if groups > 1 else None
    if not total:
        return 1.0
    part = {k: v.tensor_split(groups)[rank] for k, v in batch.items()}
    return objective.averaged_over(part) * groups / total


CAPTION = "a photo of a {}"
"""How a contrastive run captions an image of class ``label`` (and how zero-shot prediction prompts for it)."""


class Contrastive(Objective):
    """Images and their captions, matched against the batch's other captions both ways (CLIP's loss). Captions of
    one class are alike, so every pair of the same class counts as a match (``labels``). The held-out accuracy is
    the share of images whose closest caption in their batch is of their class."""

    name, unit = "contrastive", "samples"

    def __init__(self, images: D.ImageSet, tokenizer: Tokenizer, seq_len: int) -> None:
        super().__init__(images.description, tokenizer, images.labels)
        self.images = images
        start = [] if tokenizer.bos_id is None else [tokenizer.bos_id]
        end = [tokenizer.eos_id]
        self.captions = [[*start, *tokenizer.encode(CAPTION.format(label)), *end] for label in images.labels]
        longest = max(len(c) for c in self.captions)
        if longest > seq_len:
            raise TrainError(f"a caption of {longest} tokens does not fit train.seq_len ({seq_len}); raise it")

    def _pairs(self, images: torch.Tensor, labels: torch.Tensor) -> Batch:
        captions = [self.captions[i] for i in labels.tolist()]
        input_ids = D.pad_to(captions, self.tokenizer.pad_id)
        attention_mask = torch.arange(input_ids.shape[1])[None] < torch.tensor([len(c) for c in captions])[:, None]
        return {"input_ids": input_ids, "attention_mask": attention_mask, "images": images, "labels": labels}

    def batch(self, generator: torch.Generator, n: int) -> Batch:
        return self._pairs(*self.images.sample(n, generator))

    def eval_batches(self, n: int, count: int) -> list[Batch]:
        images, labels = self.images.val_images, self.images.val_labels
        return [self._pairs(images[i : i + n], labels[i : i + n]) for i in range(0, min(len(images), n * count), n)]

    def metrics(self, model: nn.Module, batch: Batch) -> Metrics:
        out = model(**batch)
        labels = batch["labels"]
        n = torch.tensor(len(labels))
        correct = (labels[out.logits.argmax(-1)] == labels).sum()  # the class of each image's closest caption
        return {"loss": (out.loss.detach().float() * n, n), "accuracy": (correct, n)}


OBJECTIVES: dict[str, type[Objective]] = {
    cls.name: cls for cls in (CausalLM, MaskedLM, TextClassification, ImageClassification, Seq2Seq, Contrastive)
}
"""Every objective class by its name (the name a run records in its ``run.json``)."""


def objective_generates(name: str | None) -> bool:
    """A model trained with objective ``name`` generates text (False for unknown names)."""
    cls = OBJECTIVES.get(name or "")
    return cls is not None and cls.generates


def objective_maps_source_to_target(name: str | None) -> bool:
    """Generation after objective ``name`` maps a source to its target (seq2seq), not continues a prompt."""
    cls = OBJECTIVES.get(name or "")
    return cls is not None and cls.maps_source_to_target


def check_trainable(recipe: Recipe) -> None:
    """Refuse, before anything is written, a model no objective can feed: an encoder that hears audio.

    Raises:
        TrainError: the recipe's encoder embeds features (Whisper's log-mel frames).
    """
    own = recipe.encoder_embedding
    if own is not None and not getattr(type(own), "token_input", True):
        raise TrainError(
            f"{recipe.name}'s encoder hears audio (encoder_embedding: {own.type}), and zoo's objectives feed it text "
            "or images: zoo has no speech data to train it on yet; transcribe with zoo generate --audio, plan a run "
            "with zoo plan"
        )


def make_objective(
    recipe: Recipe, model: nn.Module, tokenizer: Tokenizer | None, data: Path | None, seq_len: int
) -> Objective:
    """The objective of ``recipe`` over ``data`` (None: the embedded data)."""
    config: TrainConfig = recipe.train
    name = objective_name(recipe)
    check_trainable(recipe)
    if name in ("causal_lm", "masked_lm"):
        if data is not None and data.suffix == ".tsv":
            raise TrainError(f"--data {data}: {name} trains on plain text (.txt or a folder), not a .tsv")
        if name == "causal_lm" and data is not None and data.suffix == ".jsonl" and data.is_file():
            from .jsonl import ChatSet, read_jsonl

            kind, records = read_jsonl(data, D._read_text(data))
            if kind == "chat":
                chats = ChatSet.from_records(data, records, tokenizer, val_fraction=config.val_fraction, length=seq_len)
                return ChatLM(chats, tokenizer, seq_len, model.head)
        docs, source = (D.load_documents(data), str(data)) if data is not None else D.embedded_english()
        stream = D.TokenStream.from_documents(
            docs, tokenizer, val_fraction=config.val_fraction, window=seq_len + 1, description=source
        )
        if name == "causal_lm":
            return CausalLM(stream, tokenizer, seq_len, model.head)
        return MaskedLM(stream, tokenizer, seq_len, recipe.vocab_size, config.mask_prob)
    if name == "classification":
        docs = D.labeled_documents(
            data,
            tokenizer,
            num_classes=recipe.num_classes,
            val_fraction=config.val_fraction,
            min_tokens=max(8, seq_len // 4),
        )
        check_classes(len(docs.labels), recipe.num_classes)
        return TextClassification(docs, tokenizer, seq_len)
    if name == "image_classification":
        images = D.load_images(
            data, image_size=recipe.image_size, num_channels=recipe.num_channels, val_fraction=config.val_fraction
        )
        check_classes(len(images.labels), recipe.num_classes)
        return ImageClassification(images)
    if name == "contrastive":
        vision = recipe.vision
        images = D.load_images(
            data, image_size=vision.image_size, num_channels=vision.num_channels, val_fraction=config.val_fraction
        )
        head = recipe.head
        if head.text_pool == "eos" and head.eos_token_id != tokenizer.eos_id:
            raise TrainError(
                f"the head pools the text at eos_token_id {head.eos_token_id}, but the tokenizer ends a caption with "
                f"{tokenizer.eos_id}: --set head.eos_token_id={tokenizer.eos_id}"
            )
        return Contrastive(images, tokenizer, seq_len)
    if name == "seq2seq":
        if data is None:
            task = D.AlgorithmicTask(config.task, seq_len, D.letter_ids(tokenizer))
            return Seq2Seq(tokenizer, source_len=seq_len, task=task, description=task.description)
        train_rows, val_rows, description = D.load_pairs(data, tokenizer, config.val_fraction)
        return Seq2Seq(tokenizer, source_len=seq_len, pairs=(train_rows, val_rows), description=description)
    raise TrainError(f"unknown objective {name!r}")


def check_classes(found: int, num_classes: int | None) -> None:
    if found != num_classes:
        raise TrainError(
            f"the data has {found} classes but the recipe's classifier has num_classes {num_classes}: "
            f"--set num_classes={found}"
        )


def needs_tokenizer(name: str) -> bool:
    return name != "image_classification"


def perplexity(loss: float) -> float:
    return math.exp(min(loss, 50.0))


def describe_batch(objective: Objective, batch_size: int, grad_accum: int, seq_len: int) -> dict[str, Any]:
    """What one optimizer step consumes, for the start-of-run summary."""
    per_step = batch_size * grad_accum
    out: dict[str, Any] = {"examples_per_step": per_step}
    if objective.unit == "tokens":
        out["tokens_per_step"] = per_step * seq_len
    return out
