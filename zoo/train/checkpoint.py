"""Training checkpoints: weights, optimizer, scheduler and RNG state, written so that a kill never hurts.

A run directory looks like::

    RUN_DIR/
      metrics.jsonl                 one JSON record per log step and per evaluation
      checkpoints/
        latest                      name of the newest complete checkpoint (atomically replaced)
        step-00000500/
          recipe.yaml  model.safetensors    -> ``zoo.load(path)`` loads the model as it is
          optimizer.pt  trainer.pt           optimizer; scheduler, loss scaler and every rank's RNG state
          tokenizer.json  run.json           how text became ids; step, objective, labels, metrics

A checkpoint is written into a hidden temporary folder, each file flushed to disk, and then the folder is
renamed into place (one atomic step) before ``latest`` is replaced (temp file + rename). A process killed
at any instant leaves either the previous checkpoint or the new one complete, never a half-written one;
leftover temporary folders are ignored and later removed.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from zoo.checkpoint import RECIPE_FILE, WEIGHTS_FILE, atomic_write, dump_recipe
from zoo.errors import TrainError
from zoo.recipe import Recipe

from .tokenizer import Tokenizer, tokenizer_from_json

CHECKPOINTS = "checkpoints"
LATEST = "latest"
OPTIMIZER_FILE = "optimizer.pt"
TRAINER_FILE = "trainer.pt"
TOKENIZER_FILE = "tokenizer.json"
RUN_FILE = "run.json"
"""Written last inside the temporary folder: a checkpoint folder without it is not one."""


def checkpoint_name(step: int) -> str:
    return f"step-{step:08d}"


def tied_aliases(model: nn.Module) -> dict[str, str]:
    """``{alias: kept_name}`` for parameters shared under several names (a tied LM head).

    The kept name is the alphabetically first, the same one ``safetensors.torch.save_model`` keeps, so a
    checkpoint's weights load with ``zoo.load`` as well.
    """
    names: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    aliases = {}
    for group in names.values():
        kept, *others = sorted(group)
        aliases.update({other: kept for other in others})
    return aliases


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(
    run_dir: Path,
    step: int,
    *,
    recipe: Recipe,
    model_state: dict[str, torch.Tensor],
    optimizer_state: dict[str, Any],
    trainer_state: dict[str, Any],
    tokenizer: Tokenizer | None,
    info: dict[str, Any],
    aliases: dict[str, str],
    keep: int,
) -> Path:
    """Write one complete checkpoint of ``step`` atomically; keep the newest ``keep``; return its folder."""
    root = run_dir / CHECKPOINTS
    root.mkdir(parents=True, exist_ok=True)
    final = root / checkpoint_name(step)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=root))
    try:
        weights = {k: v.detach().contiguous() for k, v in model_state.items() if k not in aliases}
        save_file(weights, str(tmp / WEIGHTS_FILE), metadata={"format": "pt", "step": str(step)})
        (tmp / RECIPE_FILE).write_text(dump_recipe(recipe.to_dict()), encoding="utf-8")
        torch.save(optimizer_state, tmp / OPTIMIZER_FILE)
        torch.save(trainer_state, tmp / TRAINER_FILE)
        if tokenizer is not None:
            (tmp / TOKENIZER_FILE).write_text(json.dumps(tokenizer.to_json()), encoding="utf-8")
        (tmp / RUN_FILE).write_text(json.dumps({**info, "step": step, "aliases": aliases}, indent=1), encoding="utf-8")
        for f in tmp.iterdir():
            _fsync(f)
        if final.exists():  # the same step written again (a resumed run): swap, never a moment without one
            old = root / f".old-{final.name}"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
        _fsync(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    atomic_write(root / LATEST, lambda path: path.write_text(final.name, encoding="utf-8"))
    _prune(root, keep)
    return final


def _complete(folder: Path) -> bool:
    return folder.is_dir() and folder.name.startswith("step-") and (folder / RUN_FILE).is_file()


def _prune(root: Path, keep: int) -> None:
    complete = sorted(p for p in root.iterdir() if _complete(p))
    for old in complete[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    for leftover in root.glob(".tmp-step-*"):  # from a process killed while writing
        shutil.rmtree(leftover, ignore_errors=True)


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of a run, or None. ``run_dir`` may also be a checkpoint folder."""
    run_dir = Path(run_dir)
    if _complete(run_dir):
        return run_dir
    root = run_dir / CHECKPOINTS
    if not root.is_dir():
        return None
    pointer = root / LATEST
    if pointer.is_file():
        named = root / pointer.read_text(encoding="utf-8").strip()
        if _complete(named):
            return named
    complete = sorted(p for p in root.iterdir() if _complete(p))
    return complete[-1] if complete else None


def read_info(checkpoint: Path) -> dict[str, Any]:
    return json.loads((checkpoint / RUN_FILE).read_text(encoding="utf-8"))


def read_tokenizer(checkpoint: Path) -> Tokenizer | None:
    path = checkpoint / TOKENIZER_FILE
    return tokenizer_from_json(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else None


def read_model_state(checkpoint: Path) -> dict[str, torch.Tensor]:
    """The weights, tied aliases restored, keyed like ``model.state_dict()``."""
    state = load_file(str(checkpoint / WEIGHTS_FILE))
    for alias, kept in read_info(checkpoint).get("aliases", {}).items():
        state[alias] = state[kept]
    return state


def read_training_state(checkpoint: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(optimizer state, trainer state) of a checkpoint."""
    optimizer = torch.load(checkpoint / OPTIMIZER_FILE, map_location="cpu", weights_only=True)
    trainer = torch.load(checkpoint / TRAINER_FILE, map_location="cpu", weights_only=True)
    return optimizer, trainer


def recipe_differences(checkpoint: Path, recipe: Recipe) -> list[str]:
    """The model fields in which ``recipe`` differs from the one the checkpoint was trained with."""
    from zoo.recipe import load_recipe

    saved = load_recipe(checkpoint / RECIPE_FILE).to_dict()
    current = recipe.to_dict()
    ignore = {"train", "description", "expect"}
    a = _flatten({k: v for k, v in saved.items() if k not in ignore})
    b = _flatten({k: v for k, v in current.items() if k not in ignore})
    keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    return [f"{k}: checkpoint {a.get(k, '(unset)')!r}, recipe {b.get(k, '(unset)')!r}" for k in keys]


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): data}


@dataclass
class Run:
    """A trained model as ``zoo generate`` needs it: weights, tokenizer and what the run recorded."""

    path: Path
    checkpoint: Path
    step: int
    model: nn.Module
    tokenizer: Tokenizer | None
    info: dict[str, Any]

    @property
    def maps_source_to_target(self) -> bool:
        """Trained as seq2seq: generation maps each prompt to its target instead of continuing it."""
        from .objectives import objective_maps_source_to_target

        return objective_maps_source_to_target(self.info.get("objective"))


def load_run(run_dir: str | Path, *, device: str | torch.device | None = None) -> Run:
    """The newest complete checkpoint of a run (or a checkpoint folder itself), built and loaded.

    Raises:
        TrainError: no run or no complete checkpoint at ``run_dir``.
    """
    from zoo.builder import build

    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise TrainError(f"{run_dir}: no such run directory")
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is None:
        raise TrainError(f"{run_dir}: no complete checkpoint (is it a run directory written by zoo train?)")
    model = build(checkpoint / RECIPE_FILE)
    model.load_state_dict(read_model_state(checkpoint), strict=True)
    if device is not None:
        model = model.to(device)
    model.eval()
    info = read_info(checkpoint)
    return Run(run_dir, checkpoint, int(info["step"]), model, read_tokenizer(checkpoint), info)
