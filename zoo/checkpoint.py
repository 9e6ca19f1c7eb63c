"""Save a built model as (resolved recipe, weights) and load it back bit for bit."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch
import yaml
from safetensors import safe_open
from safetensors.torch import load_model, save_model
from torch import nn

from .dtypes import from_safetensors
from .errors import RecipeError

RECIPE_FILE = "recipe.yaml"
WEIGHTS_FILE = "model.safetensors"


def atomic_write(path: Path, write: Any) -> None:
    """Call ``write(tmp_path)`` then rename onto ``path``: readers see the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dump_recipe(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None)


def save(model: nn.Module, directory: str | Path) -> Path:
    """Write ``recipe.yaml`` (fully resolved) and ``model.safetensors`` into ``directory``."""
    recipe = getattr(model, "recipe", None)
    if recipe is None:
        raise ValueError("this model was not built by zoo.build (it has no .recipe); cannot save its recipe")
    if any(p.is_meta for p in model.parameters()):
        raise ValueError("a model built on the meta device has no weights to save; build it on cpu or cuda")
    directory = Path(directory)
    atomic_write(directory / WEIGHTS_FILE, lambda tmp: save_model(model, str(tmp)))
    atomic_write(directory / RECIPE_FILE, lambda tmp: tmp.write_text(dump_recipe(recipe.to_dict()), encoding="utf-8"))
    return directory


def load(directory: str | Path, *, device: str | torch.device | None = None) -> nn.Module:
    """The model ``save`` wrote: same recipe, identical weights."""
    from .builder import build

    directory = Path(directory)
    recipe_path, weights = directory / RECIPE_FILE, directory / WEIGHTS_FILE
    if not recipe_path.is_file():
        raise RecipeError(f"no {RECIPE_FILE} in {directory}: not a directory written by zoo build --out / zoo.save")
    dtype = None
    if weights.is_file():
        with safe_open(str(weights), framework="pt") as f:
            keys = list(f.keys())
            # Build in the dtype the weights were saved in (a bf16 model comes back bf16, not upcast).
            dtype = f.get_slice(keys[0]).get_dtype() if keys else None
    model = build(recipe_path, device=device, dtype=from_safetensors(dtype))
    if weights.is_file():
        load_model(model, str(weights), strict=True, device=str(device or "cpu"))
    return model
