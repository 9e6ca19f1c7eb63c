"""Start a run from imported weights (``zoo train RECIPE --init-from DIR``): fine-tuning and continued training.

``DIR`` is any model folder ``zoo.locate`` knows: a zoo model folder, a checkpoint or run folder (its latest
checkpoint), or a Hugging Face folder (converted on load). Every tensor of the recipe's model that the folder
holds is copied into it; the recipe must describe the folder's model, so a tensor of another shape is an
error that names it, except in the head: a head of another type (a classification head on a masked-LM encoder)
or size (another number of classes) is the part a fine-tune replaces, and stays at its fresh initialisation.
Tensors the model lacks (the folder's old head) are not used. A run or checkpoint brings its tokenizer, so the
imported embeddings keep meaning the same tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from zoo.errors import TrainError
from zoo.locate import ModelFolder, locate

from .tokenizer import Tokenizer

HEAD = "head."
"""The prefix of the head's tensors: the part of a model a fine-tune may replace."""


@dataclass
class Transfer:
    """What ``--init-from`` copied: from where, which tensors, which were left at init, which went unused."""

    folder: ModelFolder
    loaded: list[str]
    initialised: list[str]
    """Tensors of the model the folder does not hold (or holds for another head): left at initialisation."""
    unused: list[str]
    """Tensors of the folder the model has no place for (its old head)."""
    tokenizer: Tokenizer | None
    """The folder's tokenizer (``zoo.train.run.folder_tokenizer``); None: none."""
    source_head: str
    imported: bool = False
    """The weights come from a Hugging Face checkpoint (a HF folder, or a ``zoo import``): trained on its ids."""

    def no_tokenizer(self) -> TrainError:
        """The error for training on text from imported weights without their tokenizer: how to give it one."""
        from .run import no_tokenizer

        return no_tokenizer(self.folder, "train it on text with")

    def message(self, head: str) -> str:
        """One notice: what was loaded and what was left at initialisation."""
        where = self.folder.note or str(self.folder.given)
        text = f"initialised from {where}: {len(self.loaded)} tensors loaded"
        if self.initialised:
            new = ""
            if any(name.startswith(HEAD) for name in self.initialised):
                other = f", the folder's is {self.source_head}" if head != self.source_head else ""
                new = f" (the recipe's {head} head is new{other})"
            text += f"; left at their initialisation{new}: {_names(self.initialised)}"
        else:
            text += ", none left at initialisation"
        if self.unused:
            text += f"; not used from the folder: {_names(self.unused)}"
        if self.tokenizer is None:
            text += "; the folder has no zoo tokenizer, so the run's own tokenizer gives the token ids"
        return text


def _names(names: list[str], limit: int = 8) -> str:
    return ", ".join(names[:limit]) + (f" (and {len(names) - limit} more)" if len(names) > limit else "")


def read_source(path: str | Path, *, guess_bytes: bool = True) -> tuple[nn.Module, ModelFolder, Tokenizer | None]:
    """The model in a folder of any kind, where its files were, and its tokenizer when it has one
    (``zoo.train.run.folder_tokenizer``)."""
    from zoo.checkpoint import load
    from zoo.lora import merge_lora

    from .run import folder_tokenizer

    folder = locate(path)
    model = merge_lora(load(folder.path))  # a Hugging Face folder is converted; a LoRA run's adapters folded in
    return model, folder, folder_tokenizer(folder, model.recipe, guess_bytes=guess_bytes)


def init_from_folder(model: nn.Module, path: str | Path) -> Transfer:
    """Copy the weights of the folder ``path`` into ``model`` (built from the run's recipe).

    Raises:
        TrainError: a tensor outside the head of another shape in the folder than in the model (the first one
            named, with both shapes), or no tensor in common at all.
        NotAModelFolder, CheckpointError, HFImportError: ``path`` is no model folder, or a damaged one.
    """
    source, folder, tokenizer = read_source(path, guess_bytes=False)  # without one, the run's own gives the ids
    source_head, head = _head_type(source), _head_type(model)
    theirs = {n: t for n, t in source.state_dict().items() if head == source_head or not n.startswith(HEAD)}
    ours = model.state_dict()
    differ = [n for n, t in ours.items() if n in theirs and theirs[n].shape != t.shape and not n.startswith(HEAD)]
    if differ:
        name = differ[0]
        more = f" ({len(differ) - 1} more tensors differ)" if len(differ) > 1 else ""
        raise TrainError(
            f"--init-from {folder.given}: the weights do not fit the recipe's model: {name} has shape "
            f"{tuple(theirs[name].shape)} in the folder but {tuple(ours[name].shape)} in the recipe's model{more}. "
            "Train a recipe that describes the folder's model (its recipe.yaml), changing only the head or the "
            "train: settings"
        )
    loaded = [n for n, t in ours.items() if n in theirs and theirs[n].shape == t.shape]
    if not loaded:
        raise TrainError(
            f"--init-from {folder.given}: no tensor of the folder has a name of the recipe's model (e.g. "
            f"{next(iter(ours), '?')}): it holds another architecture; train a recipe that describes it"
        )
    kept = set(loaded)
    initialised = [n for n in ours if n not in kept]
    unused = [n for n in source.state_dict() if n not in kept]  # the folder's old head, what the model lacks
    with torch.no_grad():
        model.load_state_dict({name: theirs[name] for name in loaded}, strict=False)
    imported = folder.kind == "hf" or getattr(source.recipe, "hf_family", None) is not None
    return Transfer(folder, loaded, initialised, unused, tokenizer, source_head, imported)


def _head_type(model: nn.Module) -> str:
    return str(getattr(getattr(getattr(model, "recipe", None), "head", None), "type", "?"))
