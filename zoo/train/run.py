"""A trained model as the reading commands need it (``zoo generate``, ``zoo eval``, ``zoo chat``): its weights,
the tokenizer it reads text with, and what its run recorded, from a run, a checkpoint, a zoo model folder or a
Hugging Face folder (``zoo.locate``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from zoo.errors import CheckpointError, TrainError
from zoo.files import read_json
from zoo.hub import is_hub_id

from . import checkpoint as ckpt
from .checkpoint import CHECKPOINTS, RECIPE_FILE, TOKENIZER_FILE, complete_checkpoint
from .tokenizer import ByteTokenizer, Tokenizer, is_hf_tokenizer_file, read_hf_tokenizer, tokenizer_from_json

CARRIED_DIR = "hf"
"""The subfolder of a zoo model folder where ``zoo import`` carries the checkpoint's tokenizer files."""


def folder_tokenizer(folder: Any, recipe: Any, *, guess_bytes: bool = True) -> Tokenizer | None:
    """The tokenizer a model in ``folder`` (a ``zoo.locate.ModelFolder``) reads text with, or None.

    A run or checkpoint: the one it trained with. A Hugging Face folder: its ``tokenizer.json`` (with
    ``tokenizer_config.json``, the chat template and ``generation_config.json``). A zoo model folder: its own
    ``tokenizer.json``, else the Hugging Face files ``zoo import`` carried into ``hf/``. Either kind without one reads
    UTF-8 bytes when its recipe trains on bytes over 256 ids (a zoo model saved or exported without its run), and
    never bytes for a model whose vocabulary is another (nor with ``guess_bytes`` False: the caller has its own).

    Raises:
        CheckpointError, TrainError: a tokenizer file that is damaged, or larger than the model's vocabulary.
    """
    if folder.kind in ("checkpoint", "run"):
        return ckpt.read_tokenizer(folder.path)
    tokenizer: Tokenizer | None = None
    for place in (folder.path, folder.path / CARRIED_DIR):
        file = place / TOKENIZER_FILE
        if not file.is_file():
            continue
        if is_hf_tokenizer_file(file):
            tokenizer = read_hf_tokenizer(place)
        elif place == folder.path and folder.kind == "model":
            try:
                tokenizer = tokenizer_from_json(read_json(file))
            except (TrainError, ValueError) as exc:
                raise TrainError(f"{file} does not describe a tokenizer ({exc}): remove it or fix it") from None
        if tokenizer is not None:
            break
    if tokenizer is None and guess_bytes and recipe.vocab_size == 256 and recipe.train.tokenizer == "byte":
        return ByteTokenizer()
    vocab = getattr(recipe, "vocab_size", None)
    if tokenizer is not None and vocab is not None and tokenizer.vocab_size > vocab:
        raise TrainError(
            f"the tokenizer of {folder.given} has {tokenizer.vocab_size:,} tokens, more than the model's vocabulary "
            f"({vocab:,}): it is not the tokenizer this model was trained with"
        )
    return tokenizer


def no_tokenizer(folder: Any, use: str) -> TrainError:
    """The error for a text command (``use``) on a model without a tokenizer: how to give it one."""
    if folder.kind == "hf":
        fix = f"save the checkpoint's tokenizer into it (AutoTokenizer...save_pretrained('{folder.given}'))"
    else:
        fix = (
            f"copy the checkpoint's tokenizer.json and tokenizer_config.json into {folder.path / CARRIED_DIR} "
            "(zoo import carries them from a Hugging Face folder that has them), or train it with zoo train"
        )
    return TrainError(f"{folder.given} has no tokenizer to {use}: {fix}")


@dataclass
class Run:
    """A trained model as ``zoo generate`` needs it: weights, tokenizer and what the run recorded."""

    path: Path
    checkpoint: Path
    step: int
    model: nn.Module
    tokenizer: Tokenizer | None
    info: dict[str, Any]
    folder: Any = None
    """The ``zoo.locate.ModelFolder`` it was read from (None: a run's checkpoint)."""

    @property
    def maps_source_to_target(self) -> bool:
        """Trained as seq2seq: generation maps each prompt to its target instead of continuing it."""
        from .objectives import objective_maps_source_to_target

        return objective_maps_source_to_target(self.info.get("objective"))


def load_run(run_dir: str | Path, *, device: str | torch.device | None = None) -> Run:
    """The model of a run (its newest complete checkpoint), of a checkpoint folder, or of a model or Hugging Face
    folder (``zoo.locate``), built and loaded, with the tokenizer it reads text with.

    A model or Hugging Face folder reads text with its own tokenizer (``folder_tokenizer``), or has none.

    Raises:
        NotAModelFolder: ``run_dir`` is none of those kinds of folder. ``TrainError``: a run without a complete
            checkpoint yet.
        CheckpointError: a file of the checkpoint is damaged, does not match its checksum, or the weights do
            not fit the recipe. ``RecipeError``: its recipe is invalid.
    """
    from zoo.locate import NotAModelFolder, locate, read_newest

    run_dir = Path(run_dir)
    if not run_dir.exists() and not is_hub_id(run_dir):
        raise TrainError(f"{run_dir}: no such run directory")
    try:
        folder = locate(run_dir)
    except NotAModelFolder as exc:
        if (run_dir / CHECKPOINTS).is_dir():
            raise TrainError(str(exc)) from None
        raise
    if folder.kind in ("model", "hf"):
        return _model_folder_run(folder, device)
    return read_newest(folder, lambda checkpoint: _checkpoint_run(run_dir, checkpoint, device))


def _checkpoint_run(run_dir: Path, checkpoint: Path, device: str | torch.device | None) -> Run:
    """The run at ``checkpoint``, read whole: a checkpoint that stops being complete while it is read (pruned by
    the trainer) raises ``CheckpointError``, never a run without its tokenizer."""
    from zoo.builder import build
    from zoo.lora import adapt_as_recipe

    info = ckpt.read_info(checkpoint)
    state = ckpt.read_model_state(checkpoint)
    model = build(ckpt._verified(checkpoint, RECIPE_FILE, info))
    adapt_as_recipe(model, fresh=False)  # a LoRA run's adapters are in its weights
    ckpt.check_state_fits(model, state, checkpoint)
    ckpt.check_finite(state, checkpoint)
    model.load_state_dict(state, strict=True)
    if device is not None:
        model = model.to(device)
    model.eval()
    tokenizer = ckpt.read_tokenizer(checkpoint)
    if not complete_checkpoint(checkpoint):
        raise CheckpointError(f"{checkpoint} was removed while it was read")
    vocab = getattr(model.recipe, "vocab_size", None)
    if tokenizer is not None and vocab is not None and tokenizer.vocab_size > vocab:
        raise CheckpointError(
            f"{checkpoint / TOKENIZER_FILE} has {tokenizer.vocab_size:,} tokens, more than the model's vocabulary "
            f"({vocab:,}): it is not the tokenizer this model was trained with"
        )
    return Run(run_dir, checkpoint, info["step"], model, tokenizer, info)


def _model_folder_run(folder: Any, device: str | torch.device | None) -> Run:
    from zoo.checkpoint import load

    from .objectives import objective_name

    model = load(folder.path, device=device).eval()
    tokenizer = folder_tokenizer(folder, model.recipe)
    info = {"objective": objective_name(model.recipe)}
    return Run(folder.given, folder.path, 0, model, tokenizer, info, folder)
