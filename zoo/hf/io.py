"""Reading and writing Hugging Face checkpoint folders with json, safetensors and torch only.

A folder holds ``config.json`` and the weights in one of four layouts: ``model.safetensors``, sharded
safetensors (``model.safetensors.index.json``), ``pytorch_model.bin`` or sharded ``.bin`` files. Pickled
``.bin`` files are read with ``torch.load(weights_only=True)``: tensors only, never arbitrary objects.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from zoo.errors import HFImportError
from zoo.files import atomic_write, folder_file, read_json, read_safetensors, read_torch_file, safetensors_header

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
    if not os.path.lexists(path):
        raise HFImportError(f"no {CONFIG_FILE} in {directory}: not a Hugging Face checkpoint folder")
    return read_json(path, error=HFImportError, folder=directory)


def weight_files(directory: str | Path) -> list[Path]:
    """The weight files of a checkpoint folder, safetensors preferred over pickled ``.bin``."""
    directory = Path(directory)
    for single, index in ((SAFETENSORS_FILE, SAFETENSORS_INDEX), (BIN_FILE, BIN_INDEX)):
        if os.path.lexists(directory / single):  # a link out of the folder is found, then refused
            return [folder_file(directory, single, error=HFImportError)]
        if os.path.lexists(directory / index):
            return _shards(directory, folder_file(directory, index, error=HFImportError))
    raise HFImportError(
        f"no weights in {directory}: expected {SAFETENSORS_FILE}, {SAFETENSORS_INDEX}, {BIN_FILE} or {BIN_INDEX}"
    )


def _shards(directory: Path, index: Path) -> list[Path]:
    """The shard files an index lists, each confined to ``directory`` (no ``..``, absolute paths or links out)."""
    weight_map = read_json(index, error=HFImportError, folder=directory).get("weight_map", {})
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise HFImportError(f"{index}: 'weight_map' must map tensor names to shard file names")
    names = list(dict.fromkeys(weight_map.values()))
    for name in names:
        if Path(name).is_absolute() or ".." in Path(name).parts or not Path(name).parts:
            raise HFImportError(f"{index} lists the shard {name!r}, which is outside {directory}: refused")
    absent = [n for n in names if not os.path.lexists(directory / n)]
    if absent:
        raise HFImportError(f"{index.name} lists shards that are not in {directory}: {', '.join(absent)}")
    return [folder_file(directory, name, error=HFImportError) for name in names]


def read_weights(directory: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint folder by name, on the CPU.

    Raises:
        HFImportError: a damaged or truncated weights file, or a pickled one that holds more than tensors.
    """
    state: dict[str, torch.Tensor] = {}
    for path in weight_files(directory):
        if path.suffix == ".safetensors":
            state.update(read_safetensors(path, error=HFImportError))
        else:
            loaded = read_torch_file(path, error=HFImportError)
            if not isinstance(loaded, dict) or not all(isinstance(t, torch.Tensor) for t in loaded.values()):
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
            names.update(safetensors_header(path, error=HFImportError))
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
