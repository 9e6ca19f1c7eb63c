"""Reading and writing Hugging Face checkpoint folders with json, safetensors and torch only.

A folder holds ``config.json`` and the weights in one of four layouts: ``model.safetensors``, sharded
safetensors (``model.safetensors.index.json``), ``pytorch_model.bin`` or sharded ``.bin`` files. Pickled
``.bin`` files are read with ``torch.load(weights_only=True)``: tensors only, never arbitrary objects.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from zoo.checkpoint import atomic_write
from zoo.errors import HFImportError

CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
BIN_FILE = "pytorch_model.bin"
BIN_INDEX = "pytorch_model.bin.index.json"


def read_config(directory: str | Path) -> dict[str, Any]:
    """The parsed ``config.json`` of a checkpoint folder."""
    directory = Path(directory)
    path = directory / CONFIG_FILE
    if not directory.is_dir():
        raise HFImportError(f"{directory} is not a directory (expected a Hugging Face checkpoint folder)")
    if not path.is_file():
        raise HFImportError(f"no {CONFIG_FILE} in {directory}: not a Hugging Face checkpoint folder")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise HFImportError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise HFImportError(f"{path} must hold a JSON object, not {type(config).__name__}")
    return config


def weight_files(directory: str | Path) -> list[Path]:
    """The weight files of a checkpoint folder, safetensors preferred over pickled ``.bin``."""
    directory = Path(directory)
    for single, index in ((SAFETENSORS_FILE, SAFETENSORS_INDEX), (BIN_FILE, BIN_INDEX)):
        if (directory / single).is_file():
            return [directory / single]
        if (directory / index).is_file():
            weight_map = json.loads((directory / index).read_text(encoding="utf-8")).get("weight_map", {})
            shards = [directory / name for name in dict.fromkeys(weight_map.values())]
            absent = [s.name for s in shards if not s.is_file()]
            if absent:
                raise HFImportError(f"{index} lists shards that are not in {directory}: {', '.join(absent)}")
            return shards
    raise HFImportError(
        f"no weights in {directory}: expected {SAFETENSORS_FILE}, {SAFETENSORS_INDEX}, {BIN_FILE} or {BIN_INDEX}"
    )


def read_weights(directory: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint folder by name, on the CPU."""
    state: dict[str, torch.Tensor] = {}
    for path in weight_files(directory):
        if path.suffix == ".safetensors":
            state.update(load_file(str(path), device="cpu"))
        else:
            loaded = torch.load(path, map_location="cpu", weights_only=True)
            if not isinstance(loaded, dict):
                raise HFImportError(f"{path} holds a {type(loaded).__name__}, not a state dict of tensors")
            state.update(loaded)
    return state


def read_names(directory: str | Path) -> frozenset[str] | None:
    """The tensor names of a folder's weights, without reading safetensors data; None if it has no weights."""
    try:
        files = weight_files(directory)
    except HFImportError:
        return None
    if all(f.suffix == ".safetensors" for f in files):
        names: set[str] = set()
        for path in files:
            with safe_open(str(path), framework="pt") as f:
                names.update(f.keys())
        return frozenset(names)
    return frozenset(read_weights(directory))


def write_checkpoint(directory: str | Path, config: dict[str, Any], tensors: dict[str, torch.Tensor]) -> Path:
    """Write ``config.json`` and ``model.safetensors`` (HF's ``format: pt`` metadata) into ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    # Contiguous CPU copies: safetensors refuses views that share storage (a split qkv, a transposed weight).
    plain = {n: t.detach().cpu().contiguous() for n, t in tensors.items()}
    atomic_write(directory / SAFETENSORS_FILE, lambda tmp: save_file(plain, str(tmp), metadata={"format": "pt"}))
    text = json.dumps(config, indent=2, sort_keys=True) + "\n"
    atomic_write(directory / CONFIG_FILE, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return directory
