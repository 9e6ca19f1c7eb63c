"""One folder convention for every command that reads a model.

A model may live in four kinds of folder, and each reader (``zoo.load``, ``zoo generate``, ``zoo export``,
``zoo predict``, ``zoo eval``, ``zoo summary``, ``zoo build``, ``zoo train --init-from``) takes any of them:

- a **model** folder: ``recipe.yaml`` + ``model.safetensors`` (+ ``config.json``), from ``zoo build --out``,
  ``zoo import``, ``zoo.save`` or ``model.save_pretrained``;
- a **checkpoint** folder: ``runs/x/checkpoints/step-N``, one complete training checkpoint;
- a **run** folder: ``runs/x`` from ``zoo train``, read at its latest complete checkpoint (said so);
- a **Hugging Face** folder: ``config.json`` with a ``model_type`` and the weights, converted on the fly; or a
  hub id (``Qwen/Qwen3-0.6B``) that is no path on disk: its snapshot in the local hub cache (``zoo.hub``).

``locate`` only looks at file names (no torch, no weights read), so the recipe layer can use it too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from .errors import ZooError
from .hub import hub_folder, is_hub_id

__all__ = ["MODEL_KINDS", "ModelFolder", "NotAModelFolder", "locate", "read_newest"]

T = TypeVar("T")

MODEL_KINDS = ("model", "checkpoint", "run", "hf")

FOLDER_KINDS_HELP = (
    "a zoo model folder (recipe.yaml + model.safetensors: zoo build --out, zoo import, zoo.save), "
    "a run folder (zoo train --out), a checkpoint folder (RUN/checkpoints/step-N), "
    "or a Hugging Face folder (config.json + weights)"
)


CHECKPOINTS = "checkpoints"
LATEST = "latest"
RUN_FILE = "run.json"
"""Written last inside a checkpoint's temporary folder: a checkpoint folder without it is not one."""
CHECKPOINT_REQUIRED = (RUN_FILE, "model.safetensors", "recipe.yaml", "optimizer.pt", "trainer.pt")
"""The files every complete training checkpoint folder of one process has."""
SHARDED_REQUIRED = (RUN_FILE, ".metadata", "recipe.yaml", "trainer.pt")
"""The files every complete sharded checkpoint (several processes, ``zoo.train.sharded``) has, beside its
``*.distcp`` shards."""
CHECKPOINT_NAME = re.compile(r"step-\d{8,}")


def complete_checkpoint(folder: Path) -> bool:
    """Whether ``folder`` is a complete training checkpoint (``step-N`` with every file written)."""
    return (
        folder.is_dir()
        and not folder.is_symlink()  # a link to a folder elsewhere is not one of the run's checkpoints
        and CHECKPOINT_NAME.fullmatch(folder.name) is not None
        and any(all((folder / name).is_file() for name in files) for files in (CHECKPOINT_REQUIRED, SHARDED_REQUIRED))
    )


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of a run, or None. ``run_dir`` may also be a checkpoint folder."""
    run_dir = Path(run_dir)
    if complete_checkpoint(run_dir):
        return run_dir
    root = run_dir / CHECKPOINTS
    if not root.is_dir():
        return None
    pointer = root / LATEST
    if pointer.is_file():
        name = pointer.read_text(encoding="utf-8", errors="replace").strip()
        if CHECKPOINT_NAME.fullmatch(name) and complete_checkpoint(root / name):  # a damaged pointer is ignored
            return root / name
    complete = sorted(p for p in root.iterdir() if complete_checkpoint(p))
    return complete[-1] if complete else None


class NotAModelFolder(ZooError):
    """A path that is none of the four kinds of model folder."""


@dataclass(frozen=True)
class ModelFolder:
    """Where a model's files are: ``path`` holds them; ``given`` is what the user named."""

    kind: str
    """``model``, ``checkpoint``, ``run`` or ``hf``."""
    path: Path
    given: Path

    @property
    def recipe_file(self) -> Path | None:
        """The zoo recipe of the model (None for a Hugging Face folder: its recipe comes from config.json)."""
        return None if self.kind == "hf" else self.path / "recipe.yaml"

    @property
    def note(self) -> str:
        """What was read, in words, for a folder that is not the model's own: ``run runs/x: its latest ...``."""
        if self.kind == "run":
            return f"run {self.given}: its latest complete checkpoint, {self.path.name}"
        if self.kind == "hf":
            cached = f" (the hub cache's {self.path})" if self.path != self.given else ""
            return f"{self.given}: a Hugging Face checkpoint{cached}, converted on load"
        return ""


def _is_hf_config(config: Path) -> bool:
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "model_type" in data


def locate(path: str | Path) -> ModelFolder:
    """The kind of model folder ``path`` is, and the folder that holds the model's files.

    Raises:
        NotAModelFolder: ``path`` is missing, not a folder, or a folder of none of the four kinds (a run
            with no complete checkpoint yet says so).
    """
    given = Path(path)
    if not given.exists() and is_hub_id(path):
        return ModelFolder("hf", hub_folder(str(path)), given)
    if not given.exists():
        raise NotAModelFolder(f"{given}: no such folder; a model is read from {FOLDER_KINDS_HELP}")
    if not given.is_dir():
        raise NotAModelFolder(f"{given} is a file, not a folder; a model is read from {FOLDER_KINDS_HELP}")
    if (given / RUN_FILE).is_file() and (given / "recipe.yaml").is_file():
        return ModelFolder("checkpoint", given, given)
    if (given / "recipe.yaml").is_file():
        return ModelFolder("model", given, given)
    if (given / CHECKPOINTS).is_dir():
        checkpoint = latest_checkpoint(given)
        if checkpoint is None:
            raise NotAModelFolder(
                f"{given} is a run folder without a complete checkpoint yet: train it further "
                f"(zoo train RECIPE --out {given} --resume) or wait for its first checkpoint"
            )
        return ModelFolder("run", checkpoint, given)
    config = given / "config.json"
    if config.exists() and not config.is_file():
        raise NotAModelFolder(f"{config} is not a regular file (a pipe, device or folder): zoo reads files only")
    if config.is_file() and _is_hf_config(config):
        return ModelFolder("hf", given, given)
    raise NotAModelFolder(f"{given} holds no model: expected {FOLDER_KINDS_HELP}")


def read_newest(folder: ModelFolder, read: Callable[[Path], T]) -> T:
    """``read(folder.path)``; when ``folder`` is a run whose checkpoint the trainer pruned while it was read (it
    keeps the newest few), ``read`` once more at the run's newest complete checkpoint."""
    try:
        return read(folder.path)
    except (OSError, ZooError):
        if folder.kind != "run" or complete_checkpoint(folder.path):
            raise
    return read(locate(folder.given).path)
