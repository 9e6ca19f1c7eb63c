"""Labels with probabilities from a model: text classifiers, masked LMs, ViT image classifiers and dual-encoders.

    from zoo.predict import predict
    result = predict("runs/topics", ["The orchestra tuned up before the concert."], top_k=3)
    for p in result.predictions:
        print(p.input, [(c.label, round(c.probability, 3)) for c in p.candidates])

What the model does follows from its recipe:

- an encoder with a classification head labels each text (``text-classification``): ``[cls]`` and the
  text's tokens, as the training read them, cut to the position table; the labels are the run's own
  (``run.json``), a Hugging Face folder's ``id2label``, else ``LABEL_0``, ``LABEL_1``, ...;
- an encoder with an mlm head fills each ``[MASK]`` of a text (``fill-mask``; ``MASK_MARKER``) with its
  likeliest tokens, one prediction per mask;
- a ViT labels each image file (``image-classification``): read with Pillow as the training read its
  images (converted to grayscale or RGB, resized, scaled to [0, 1], normalised with the run's statistics);
- a dual-encoder (CLIP) labels each image with one of the ``labels`` it is given (``zero-shot-image-classification``):
  each label becomes a caption (``template``, "a photo of a {}" as zoo's contrastive training writes them), and the
  probabilities are the softmax of the image's similarity with every caption (SigLIP's: each caption's sigmoid).

A folder among the image inputs stands for its image files, in name order.

Decoders and encoder-decoders generate rather than label: they are refused, pointing to ``zoo generate``.
The model may be in any folder ``zoo.locate`` knows (model, training checkpoint, run, Hugging Face), read
with ``zoo.load``; ``Predictions.notes`` says which checkpoint of a run was read. Text is tokenized with the
run's own tokenizer, else a Hugging Face ``tokenizer.json`` (the folder's, or the one ``zoo import``
carried into ``hf/``), else, for a vocabulary of the 256 bytes, zoo's byte tokenizer (said in the notes).
Nothing here prints.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import torch
from torch import nn

from zoo.components.heads.embedding import EmbeddingHead, Pooling
from zoo.errors import CheckpointError, PredictError
from zoo.limits import check_int
from zoo.locate import ModelFolder, locate

__all__ = ["MASK_MARKER", "POOLINGS", "Candidate", "Embeddings", "Prediction", "Predictions", "embed", "predict"]

MASK_MARKER = "[MASK]"
"""Where a masked LM is to fill in a token: each occurrence in an input text is one masked token."""
DEFAULT_TOP_K = 5
TASKS = ("text-classification", "fill-mask", "image-classification", "zero-shot-image-classification")
POOLINGS = get_args(Pooling)
"""How ``embed`` makes one vector of a text's hidden states: their mean, the first ([CLS]) one, or the last one."""
"""What ``predict`` does, named as Hugging Face's pipelines name it."""


@dataclass(frozen=True)
class Candidate:
    """One label (a class, or a token for a mask) and its probability."""

    label: str
    probability: float
    id: int
    """The class index, or the token id."""


@dataclass(frozen=True)
class Prediction:
    """The likeliest labels of one input (of one mask of it, for a masked LM), most likely first."""

    input: str
    candidates: tuple[Candidate, ...]
    mask: int | None = None
    """Which ``[MASK]`` of the input (0, 1, ...) for a masked LM; None otherwise."""
    truncated: bool = False
    """The text was longer than the model's position table: its end was left out."""


@dataclass(frozen=True)
class Predictions:
    """Everything ``predict`` found, for the CLI to render as a table or JSON."""

    task: str
    """One of ``TASKS``."""
    model: str
    """The folder as given."""
    notes: tuple[str, ...]
    """What was read besides the folder named (a run's checkpoint), and defaults taken, in words."""
    predictions: tuple[Prediction, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "task": self.task,
            "notes": list(self.notes),
            "predictions": [
                {
                    "input": p.input,
                    "mask": p.mask,
                    "truncated": p.truncated,
                    "top": [{"label": c.label, "probability": c.probability, "id": c.id} for c in p.candidates],
                }
                for p in self.predictions
            ],
        }


@torch.no_grad()
def predict(
    path: str | Path,
    inputs: Sequence[str | Path],
    *,
    top_k: int | None = None,
    labels: Sequence[str] | None = None,
    template: str | None = None,
    device: str | torch.device | None = None,
) -> Predictions:
    """The ``top_k`` likeliest labels of each input (default 5, at most the number of labels).

    ``inputs`` are texts for a text classifier, texts with ``[MASK]`` for a masked LM, image files (or folders of
    them) for a ViT or a dual-encoder; a dual-encoder chooses among ``labels``, each written into ``template``.

    Raises:
        ArgumentError: ``top_k`` below 1. NotAModelFolder: ``path`` holds no model.
        PredictError: a model that generates (use ``zoo generate``) or has no head to predict with, no inputs,
            a text without ``[MASK]`` for a masked LM, an image that cannot be read, a text model without a
            tokenizer. CheckpointError: a damaged checkpoint file.
    """
    if top_k is not None:
        top_k = check_int("top_k", top_k, low=1)
    if not inputs:
        raise PredictError("no inputs: give one or more texts (or image files for a ViT)")
    from zoo.checkpoint import load

    folder = locate(path)
    model = load(path, device=device).eval()
    task = _task(model.recipe, folder.given)
    notes = [folder.note] if folder.note else []
    if labels is not None and task != "zero-shot-image-classification":
        raise PredictError(f"--labels are for a dual-encoder (CLIP), which labels images zero-shot; {task} has its own")
    if task == "image-classification":
        found = _classify_images(model, folder, _image_files(inputs), notes)
    elif task == "zero-shot-image-classification":
        text = _text_tokenizer(folder, model.recipe, notes)
        found = _zero_shot(model, folder, text, _image_files(inputs), _captions(labels, template), notes)
    else:
        text = _text_tokenizer(folder, model.recipe, notes)
        texts = [str(i) for i in inputs]
        if task == "text-classification":
            found = _classify_texts(model, folder, text, texts)
        else:
            found = _fill_masks(model, text, texts)
    limit = top_k or DEFAULT_TOP_K
    predictions = tuple(
        Prediction(item, _top(probs, limit, label), mask, truncated) for item, probs, label, mask, truncated in found
    )
    return Predictions(task, str(folder.given), tuple(notes), predictions)


@dataclass(frozen=True)
class Embeddings:
    """One vector per text (``embed``), for the CLI to render or print as JSON."""

    model: str
    pooling: str
    normalized: bool
    notes: tuple[str, ...]
    inputs: tuple[str, ...]
    vectors: tuple[tuple[float, ...], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "task": "feature-extraction",
            "pooling": self.pooling,
            "normalized": self.normalized,
            "notes": list(self.notes),
            "embeddings": [{"input": t, "vector": list(v)} for t, v in zip(self.inputs, self.vectors, strict=True)],
        }


@torch.no_grad()
def embed(
    path: str | Path,
    texts: Sequence[str],
    *,
    pooling: str | None = None,
    normalize: bool | None = None,
    device: str | torch.device | None = None,
) -> Embeddings:
    """A vector per text: the model's last hidden states pooled (``POOLINGS``), as sentence-transformers pools them.

    By default the folder's sentence-transformers files say how (``1_Pooling/config.json``, and a ``Normalize``
    module in ``modules.json``); without them an encoder's hidden states are averaged and a decoder's last one is
    taken, unnormalized (said in the notes). Each text is read alone, with the tokenizer's own specials and cut to
    the position table, so the mean is over its tokens exactly.

    Raises:
        PredictError: an unknown pooling, no texts, a model that is not a text encoder or decoder, no tokenizer.
    """
    if pooling is not None and pooling not in POOLINGS:
        raise PredictError(f"pooling {pooling!r}: choose {', '.join(POOLINGS)}")
    if not texts:
        raise PredictError("no inputs: give one or more texts to embed")
    from zoo.checkpoint import load
    from zoo.recipe import position_limit

    folder = locate(path)
    model = load(path, device=device).eval()
    arch = model.recipe.architecture
    if arch not in ("encoder", "decoder"):
        raise PredictError(f"{folder.given} holds a {arch} model: zoo predict --embed reads a text encoder or decoder")
    notes = [folder.note] if folder.note else []
    declared_pooling, declared_normalize = _sentence_transformers(_hf_files(folder))
    head = model.recipe.head
    if head.type == "embedding":  # the model's own embedding head says how, unless the flags do
        declared_pooling, declared_normalize = head.pool, head.normalize
    if pooling is None:
        pooling = declared_pooling or ("mean" if arch == "encoder" else "last")
        if declared_pooling is None:
            notes.append(f"no sentence-transformers pooling config: {pooling} pooling (--pooling to choose)")
    normalize = declared_normalize if normalize is None else normalize
    text = _text_tokenizer(folder, model.recipe, notes)
    vectors, pooled = [], EmbeddingHead(model.recipe.d_model, pool=pooling, normalize=normalize)
    for item in texts:
        ids, _ = text.classify_ids(item, position_limit(model.recipe))
        h = model(torch.tensor([ids], device=_device(model))).hidden_states.float()  # (1, L, E)
        v = pooled(h)[0]
        vectors.append(tuple(v.cpu().tolist()))
    return Embeddings(str(folder.given), pooling, normalize, tuple(notes), tuple(texts), tuple(vectors))


def _sentence_transformers(files: Path) -> tuple[str | None, bool]:
    """The pooling (None: not said) and normalization a sentence-transformers folder declares."""
    config = _json(files / "1_Pooling" / "config.json")
    modes = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls", "pooling_mode_lasttoken": "last"}
    chosen = [name for key, name in modes.items() if config.get(key)]
    if len(chosen) > 1 or any(config.get(k) for k in config if k.startswith("pooling_mode_") and k not in modes):
        raise PredictError(
            f"{files / '1_Pooling' / 'config.json'} pools with {', '.join(k for k in config if config.get(k))}: "
            f"zoo embeds with one of {', '.join(POOLINGS)}; give --pooling"
        )
    try:
        modules = json.loads((files / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        modules = []
    normalize = isinstance(modules, list) and any(
        isinstance(m, dict) and str(m.get("type", "")).endswith(".Normalize") for m in modules
    )
    return (chosen[0] if chosen else None), normalize


def _task(recipe: Any, given: Path) -> str:
    arch, head = recipe.architecture, recipe.head.type
    if arch == "vit":
        return "image-classification"
    if arch == "dual-encoder":
        return "zero-shot-image-classification"
    if arch == "encoder" and head == "classification":
        return "text-classification"
    if arch == "encoder" and head == "mlm":
        return "fill-mask"
    if arch in ("decoder", "encoder-decoder"):
        what = "a decoder continues text" if arch == "decoder" else "an encoder-decoder maps a source to a target"
        raise PredictError(
            f"{given} holds a {arch} model: {what} rather than labelling it; use zoo generate {given} --prompt '...'"
        )
    raise PredictError(
        f"{given} holds an {arch} model with a '{head}' head, which gives no labels: zoo predict needs an encoder "
        "with a classification or mlm head, or a vit"
    )


def _top(probs: torch.Tensor, k: int, label: Any) -> tuple[Candidate, ...]:
    values, ids = probs.topk(min(k, probs.numel()))
    return tuple(Candidate(label(i), p, i) for p, i in zip(values.tolist(), ids.tolist(), strict=True))


# ---------------------------------------------------------------------------------------------- text


class _ZooText:
    """zoo's tokenizer, used as the training used it: ``[cls]`` before a classified text, ``[mask]`` ids."""

    def __init__(self, tokenizer: Any) -> None:
        from zoo.train.tokenizer import SPECIALS

        self.tok = tokenizer
        self.mask_id = tokenizer.mask_id
        self.names = {getattr(tokenizer, f"{name}_id"): f"<{name}>" for name in SPECIALS}

    def caption_ids(self, text: str) -> list[int]:
        """A caption as the contrastive objective writes it: [bos] text [eos]."""
        start = [] if self.tok.bos_id is None else [self.tok.bos_id]
        return [*start, *self.tok.encode(text), self.tok.eos_id]

    def classify_ids(self, text: str, limit: int | None) -> tuple[list[int], bool]:
        ids = [self.tok.cls_id, *self.tok.encode(text)]
        return (ids, False) if limit is None or len(ids) <= limit else (ids[:limit], True)

    def masked_ids(self, text: str) -> list[int]:
        ids: list[int] = []
        for n, piece in enumerate(text.split(MASK_MARKER)):
            if n:
                ids.append(self.mask_id)
            ids.extend(self.tok.encode(piece))
        return ids

    def token(self, i: int) -> str:
        if i in self.names:
            return self.names[i]
        text = self.tok.decode([i])
        if text and "\ufffd" not in text:
            return text
        return f"<0x{i:02X}>" if self.tok.vocab_size == 256 else f"<token {i}>"  # a byte or piece of a character


class _HFText:
    """A Hugging Face ``tokenizer.json`` (the ``tokenizers`` library): its own template adds the specials."""

    def __init__(self, files: Path) -> None:
        try:
            import tokenizers
        except ImportError:
            raise PredictError("reading a Hugging Face tokenizer needs `tokenizers`: pip install 'zoo[data]'") from None
        path = files / "tokenizer.json"
        try:
            self.tok = tokenizers.Tokenizer.from_file(str(path))
        except Exception as exc:  # noqa: BLE001 - the tokenizers library reports a bad file in its own ways
            raise PredictError(f"{path} is not a readable tokenizer ({type(exc).__name__}: {exc})") from None
        self.mask_token = _mask_token(files) or next(
            (t for t in ("[MASK]", "<mask>") if self.tok.token_to_id(t) is not None), None
        )
        self.mask_id = None if self.mask_token is None else self.tok.token_to_id(self.mask_token)

    def caption_ids(self, text: str) -> list[int]:
        """A caption with the tokenizer's own specials (CLIP's: start and end of text)."""
        self.tok.no_truncation()
        return self.tok.encode(text).ids

    def classify_ids(self, text: str, limit: int | None) -> tuple[list[int], bool]:
        if limit is None:
            self.tok.no_truncation()
        else:
            self.tok.enable_truncation(limit)
        encoding = self.tok.encode(text)
        return encoding.ids, bool(encoding.overflowing)

    def masked_ids(self, text: str) -> list[int]:
        if self.mask_id is None:
            raise PredictError("the model's tokenizer.json has no mask token ([MASK] or <mask>) to fill")
        self.tok.no_truncation()
        return self.tok.encode(text.replace(MASK_MARKER, self.mask_token)).ids

    def token(self, i: int) -> str:
        text = self.tok.decode([i], skip_special_tokens=False)
        return text if text and "\ufffd" not in text else self.tok.id_to_token(i) or f"<token {i}>"


def _mask_token(files: Path) -> str | None:
    """The mask token a Hugging Face folder's tokenizer_config.json or special_tokens_map.json names."""
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        try:
            data = json.loads((files / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        token = data.get("mask_token") if isinstance(data, dict) else None
        token = token.get("content") if isinstance(token, dict) else token
        if isinstance(token, str):
            return token
    return None


def _hf_files(folder: ModelFolder) -> Path:
    """Where a folder keeps Hugging Face files: its own (a HF folder) or those its import carried (``hf/``)."""
    return folder.path if folder.kind == "hf" else folder.path / "hf"


def _text_tokenizer(folder: ModelFolder, recipe: Any, notes: list[str]) -> _ZooText | _HFText:
    """The tokenizer the model was trained with: a run's own, a Hugging Face folder's (or its import's), or
    zoo's byte tokenizer for a model folder whose vocabulary is the 256 bytes."""
    from zoo.train.tokenizer import ByteTokenizer

    if folder.kind in ("checkpoint", "run"):
        from zoo.train.checkpoint import read_tokenizer

        tokenizer = read_tokenizer(folder.path)
        if tokenizer is None:
            raise PredictError(f"{folder.path} has no tokenizer.json: a text model's checkpoint needs one")
        return _ZooText(tokenizer)
    if (_hf_files(folder) / "tokenizer.json").is_file():
        return _HFText(_hf_files(folder))
    if recipe.vocab_size == 256 and recipe.train.tokenizer == "byte":
        notes.append(f"{folder.given} holds no tokenizer: its vocabulary is the 256 bytes, so zoo's byte tokenizer")
        return _ZooText(ByteTokenizer())
    raise PredictError(
        f"{folder.given} holds no tokenizer (a model folder from zoo build --out or zoo.save has none): predict "
        "with the run folder that zoo train wrote, or a Hugging Face folder with its tokenizer.json"
    )


def _run_info(folder: ModelFolder) -> dict[str, Any]:
    if folder.kind not in ("checkpoint", "run"):
        return {}
    from zoo.train.checkpoint import read_info

    return read_info(folder.path)


def _labels(folder: ModelFolder, count: int) -> list[str]:
    """The class names: the run's (run.json), a Hugging Face folder's id2label, else LABEL_0, LABEL_1, ..."""
    recorded = _run_info(folder).get("labels")
    if recorded is not None:
        if not isinstance(recorded, list) or len(recorded) != count:
            raise CheckpointError(
                f"{folder.path / 'run.json'} records labels {recorded!r}, but the model has {count} classes: "
                "the file is damaged or belongs to another checkpoint"
            )
        return [str(label) for label in recorded]
    if folder.kind == "hf":
        id2label = _json(folder.path / "config.json").get("id2label")
        if isinstance(id2label, dict) and set(id2label) == {str(i) for i in range(count)}:
            return [str(id2label[str(i)]) for i in range(count)]
    return [f"LABEL_{i}" for i in range(count)]


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


Found = list[tuple[str, torch.Tensor, Any, int | None, bool]]
"""(input, probabilities, id -> label, mask index, truncated) per prediction."""


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def _classify_texts(model: nn.Module, folder: ModelFolder, text: _ZooText | _HFText, texts: list[str]) -> Found:
    from zoo.recipe import position_limit

    labels = _labels(folder, model.recipe.num_classes)
    limit = position_limit(model.recipe)
    found: Found = []
    for item in texts:
        ids, truncated = text.classify_ids(item, limit)
        logits = model(torch.tensor([ids], device=_device(model))).logits[0]
        found.append((item, logits.float().softmax(-1).cpu(), labels.__getitem__, None, truncated))
    return found


def _fill_masks(model: nn.Module, text: _ZooText | _HFText, texts: list[str]) -> Found:
    from zoo.recipe import positions_fit

    found: Found = []
    for n, item in enumerate(texts, 1):
        if MASK_MARKER not in item:
            raise PredictError(
                f"input {n} ({item!r}) has no {MASK_MARKER}: write {MASK_MARKER} for each token to fill in"
            )
        ids = text.masked_ids(item)
        too_long = positions_fit(model.recipe, len(ids))
        if too_long is not None:
            raise PredictError(f"input {n} is {len(ids)} tokens long: {too_long}; shorten it")
        logits = model(torch.tensor([ids], device=_device(model))).logits[0]  # (L, V)
        places = [i for i, t in enumerate(ids) if t == text.mask_id]
        for mask, place in enumerate(places):
            found.append((item, logits[place].float().softmax(-1).cpu(), text.token, mask, False))
    return found


# ---------------------------------------------------------------------------------------------- images


def _image_statistics(folder: ModelFolder, channels: int, notes: list[str]) -> tuple[list[float], list[float], Any]:
    """(mean, std, Pillow resample or None) of the model's image preprocessing."""
    info = _run_info(folder)
    if "image_mean" in info and "image_std" in info:
        return list(info["image_mean"]), list(info["image_std"]), None
    processor = _json(_hf_files(folder) / "preprocessor_config.json")
    if processor:
        if processor.get("do_normalize", True):
            mean, std = processor.get("image_mean", [0.5] * channels), processor.get("image_std", [0.5] * channels)
        else:
            mean, std = [0.0] * channels, [1.0] * channels
        return [float(m) for m in mean][:channels], [float(s) for s in std][:channels], processor.get("resample")
    notes.append(f"{folder.given} records no image statistics: pixels in [0, 1] go in unnormalised")
    return [0.0] * channels, [1.0] * channels, None


def _read_image(path: Path, size: int, channels: int, resample: Any) -> torch.Tensor:
    """An image file as (C, size, size) in [0, 1], read as zoo's training reads image folders."""
    try:
        from PIL import Image
    except ImportError:
        raise PredictError('reading images needs Pillow: pip install "zoo[data]"') from None
    mode = {1: "L", 3: "RGB"}.get(channels)
    if mode is None:
        raise PredictError(f"images give 1 or 3 channels; the model has num_channels {channels}")
    if not path.is_file():
        raise PredictError(f"{path}: no such image file or folder (a vit or a dual-encoder labels images)")
    try:
        with Image.open(path) as im:
            im = im.convert(mode)
            im = im.resize((size, size)) if resample is None else im.resize((size, size), resample=resample)
            pixels = torch.frombuffer(bytearray(im.tobytes()), dtype=torch.uint8)
    except (OSError, ValueError, SyntaxError) as exc:  # Pillow's errors for damaged or unknown files
        raise PredictError(f"{path} is not a readable image ({exc})") from None
    return pixels.view(size, size, channels).permute(2, 0, 1).float() / 255.0


def _classify_images(model: nn.Module, folder: ModelFolder, paths: list[Path], notes: list[str]) -> Found:
    recipe = model.recipe
    mean, std, resample = _image_statistics(folder, recipe.num_channels, notes)
    images = torch.stack([_read_image(p, recipe.image_size, recipe.num_channels, resample) for p in paths])
    images = (images - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    dtype = next(model.parameters()).dtype
    probs = model(images.to(_device(model), dtype)).logits.float().softmax(-1).cpu()
    labels = _labels(folder, recipe.num_classes)
    return [(str(p), row, labels.__getitem__, None, False) for p, row in zip(paths, probs, strict=True)]


def _image_files(inputs: Sequence[str | Path]) -> list[Path]:
    """The image inputs, a folder standing for its image files in name order."""
    from zoo.train.data import IMAGE_SUFFIXES

    files: list[Path] = []
    for item in map(Path, inputs):
        if item.is_dir():
            found = sorted(f for f in item.iterdir() if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES)
            if not found:
                raise PredictError(f"{item} holds no image files ({', '.join(IMAGE_SUFFIXES)})")
            files += found
        else:
            files.append(item)
    return files


def _captions(labels: Sequence[str] | None, template: str | None) -> list[tuple[str, str]]:
    """(label, caption) for each candidate label of a zero-shot classification."""
    from zoo.train.objectives import CAPTION

    labels = [label.strip() for label in labels or [] if label.strip()]
    if not labels:
        raise PredictError("a dual-encoder labels images zero-shot: give the candidate labels, --labels cat,dog")
    if len(set(labels)) != len(labels):
        raise PredictError(f"--labels names a label twice: {', '.join(labels)}")
    template = CAPTION if template is None else template
    if template.count("{}") != 1 or "{" in template.replace("{}", ""):
        raise PredictError(f"--template {template!r} must hold one {{}} where the label goes, and no other braces")
    return [(label, template.format(label)) for label in labels]


def _zero_shot(
    model: nn.Module,
    folder: ModelFolder,
    text: _ZooText | _HFText,
    paths: list[Path],
    captions: list[tuple[str, str]],
    notes: list[str],
) -> Found:
    recipe, vision = model.recipe, model.recipe.vision
    mean, std, resample = _image_statistics(folder, vision.num_channels, notes)
    images = torch.stack([_read_image(p, vision.image_size, vision.num_channels, resample) for p in paths])
    images = (images - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    ids = [text.caption_ids(caption) for _, caption in captions]
    longest = max(len(i) for i in ids)
    if recipe.max_len is not None and longest > recipe.max_len:
        raise PredictError(f"a caption of {longest} tokens does not fit the text tower's {recipe.max_len} positions")
    from zoo.train.data import pad_to

    # A head that reads the final position (SigLIP's) was trained on texts padded to max_len, as its processor pads.
    length = recipe.max_len if getattr(recipe.head, "text_pool", None) == "final" and recipe.max_len else longest
    device, dtype = _device(model), next(model.parameters()).dtype
    input_ids = pad_to(ids, recipe.pad_token_id or 0, length).to(device)
    mask = (torch.arange(length)[None] < torch.tensor([len(i) for i in ids])[:, None]).to(device)
    logits = model(input_ids, images.to(device, dtype), attention_mask=mask).logits  # (images, captions)
    if getattr(model.head, "independent_matches", False):  # SigLIP: each caption judged alone
        probs = logits.float().sigmoid().cpu()
        notes.append("each label's probability is its caption's own sigmoid (SigLIP): they need not sum to 1")
    else:
        probs = logits.float().softmax(-1).cpu()
    names = [label for label, _ in captions]
    return [(str(p), row, names.__getitem__, None, False) for p, row in zip(paths, probs, strict=True)]
