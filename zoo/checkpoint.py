"""Save a built model as (resolved recipe, weights) and load it back bit for bit.

A saved folder holds ``recipe.yaml``, ``model.safetensors``, ``config.json`` (the recipe as JSON, beside the
weights as Hugging Face tools expect) and ``checksums.json`` (the sha256 of the weights). ``load`` also reads
training checkpoints (a sharded one of several processes read whole: ``read_sharded``), run folders and Hugging
Face folders (``zoo.locate``; the built-in plugin ``zoo.hf`` converts those). Every file is read defensively
(``zoo.files``): an empty, truncated or pickled weights file, invalid JSON, a torch file that holds code, weights
that do not match their checksum or do not fit their recipe are each a ``CheckpointError`` naming the file and
what is wrong. Folders saved before checksums existed still load.
"""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_model, save_model
from torch import nn

from .compat import dcp_read_keys
from .dtypes import from_safetensors
from .errors import CheckpointError, ZooError
from .files import (
    CHECKSUMS_FILE,
    CONFIG_FILE,
    RECIPE_FILE,
    WEIGHTS_FILE,
    atomic_write,
    check_weights,
    folder_file,
    recorded_checksums,
    safetensors_header,
    sha256_file,
    verify_checksum,
    verify_recorded,
)
from .lora import adapt_as_recipe
from .plugins import load_hf_folder


def dump_recipe(data: dict[str, Any]) -> str:
    """The recipe as YAML that the recipe loader reads back as the same data (a string like "1e-3" stays one)."""
    from .recipe import dump_yaml

    return dump_yaml(data)


def tied_aliases(model: nn.Module) -> dict[str, str]:
    """``{alias: kept_name}`` for parameters shared under several names (a tied LM head).

    The kept name is the alphabetically first, the same one ``safetensors.torch.save_model`` keeps.
    """
    names: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    aliases = {}
    for group in names.values():
        kept, *others = sorted(group)
        aliases.update({other: kept for other in others})
    return aliases


def check_fits(
    model: nn.Module, shapes: Mapping[str, tuple], *, weights: Path, recipe: Path | str = RECIPE_FILE
) -> None:
    """Refuse weights (``{name: shape}``) that do not fit ``model``: every missing, unexpected and
    mis-shaped tensor named, in one ``CheckpointError``. A tied tensor may be stored under any of its names."""
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    groups: dict[str, set[str]] = {}
    for alias, kept in tied_aliases(model).items():
        groups.setdefault(kept, {kept}).add(alias)
    for group in list(groups.values()):
        for name in group:
            groups[name] = group
    problems = []
    missing = [n for n in expected if n not in shapes and not (groups.get(n, set()) & set(shapes))]
    unexpected = [n for n in shapes if n not in expected]
    for name, shape in shapes.items():
        if name in expected and tuple(shape) != expected[name]:
            problems.append(f"{name}: shape {tuple(shape)} in the file, {expected[name]} in the model")
    if missing:
        problems.append(f"missing from the file: {_names(missing)}")
    if unexpected:
        problems.append(f"not in the model: {_names(unexpected)}")
    if problems:
        shown = problems[:8] + ([f"... and {len(problems) - 8} more"] if len(problems) > 8 else [])
        raise CheckpointError(
            f"{weights} does not fit the model of {recipe} (weights or recipe of another model?):\n  "
            + "\n  ".join(shown)
        )


def _names(names: list[str], limit: int = 6) -> str:
    return ", ".join(names[:limit]) + (f" (and {len(names) - limit} more)" if len(names) > limit else "")


def holds_recipe(recipe: Any) -> Callable[[Path], bool]:
    """Whether a folder holds a zoo model of ``recipe``'s architecture (written over in place, not refused)."""

    def same(folder: Path) -> bool:
        from zoo.recipe import load_recipe

        if not (folder / "recipe.yaml").is_file():
            return False
        try:
            held = load_recipe(folder / "recipe.yaml")
        except (ZooError, OSError):
            return False
        skip = {"name", "description"}
        return held.model_dump(exclude=skip) == recipe.model_dump(exclude=skip)

    return same


def save(model: nn.Module, directory: str | Path) -> Path:
    """Write a model folder: ``model.safetensors``, ``recipe.yaml`` (fully resolved), ``config.json`` (the same
    recipe as JSON beside the weights, as Hugging Face tools expect) and ``checksums.json``.

    ``model.save_pretrained(directory)`` is the same call.
    """
    from . import __version__

    recipe = getattr(model, "recipe", None)
    if recipe is None:
        raise ValueError("this model was not built by zoo.build (it has no .recipe); cannot save its recipe")
    if any(p.is_meta for p in model.parameters()):
        raise ValueError("a model built on the meta device has no weights to save; build it on cpu or cuda")
    directory = Path(directory)
    data = recipe.to_dict()
    config = {"zoo_version": __version__, "architecture": recipe.architecture, "recipe": data}
    atomic_write(directory / WEIGHTS_FILE, lambda tmp: save_model(model, str(tmp)))
    atomic_write(directory / CONFIG_FILE, lambda tmp: tmp.write_text(json.dumps(config, indent=1), encoding="utf-8"))
    atomic_write(directory / RECIPE_FILE, lambda tmp: tmp.write_text(dump_recipe(data), encoding="utf-8"))
    text = json.dumps({"sha256": {WEIGHTS_FILE: sha256_file(directory / WEIGHTS_FILE)}}, indent=1)
    atomic_write(directory / CHECKSUMS_FILE, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return directory


def load(path: str | Path, *, device: str | torch.device | None = None) -> nn.Module:
    """The model in ``path``: a zoo model folder (what ``save`` wrote: same recipe, identical weights), a training
    checkpoint folder, a run folder (its latest complete checkpoint) or a Hugging Face folder (converted).

    ``Model.from_pretrained(path)`` is the same call. Which folder was read: ``zoo.locate.locate(path).note``.

    Raises:
        NotAModelFolder: ``path`` is none of those (the message lists what each holds).
        RecipeError: an invalid recipe. ``HFImportError``: a Hugging Face config zoo does not reproduce.
        CheckpointError: weights that are damaged, do not match their checksum or do not fit the recipe.
    """
    from .locate import locate, read_newest

    folder = locate(path)
    if folder.kind == "hf":  # converted by the built-in plugin zoo.hf
        return load_hf_folder(folder.path, device=device)
    return read_newest(folder, lambda directory: _load_zoo_folder(directory, device=device))


def _load_zoo_folder(directory: Path, *, device: str | torch.device | None) -> nn.Module:
    from .builder import build

    recipe_path, weights = folder_file(directory, RECIPE_FILE), directory / WEIGHTS_FILE
    if is_sharded(directory):  # a checkpoint written by several processes, read whole
        state = read_sharded(directory, "model")
        dtype = next((t.dtype for t in state.values() if t.is_floating_point()), None)
        model = build(recipe_path, device=device, dtype=dtype)
        adapt_as_recipe(model, fresh=False)
        where = directory / SHARDED_METADATA
        check_fits(model, {name: tuple(t.shape) for name, t in state.items()}, weights=where, recipe=recipe_path)
        for alias, kept in tied_aliases(model).items():
            if alias not in state and kept in state:
                state[alias] = state[kept]
        model.load_state_dict(state, strict=True)
        check_weights(dict(model.state_dict()), str(where))
        return model
    header = None
    if os.path.lexists(weights):
        folder_file(directory, WEIGHTS_FILE)
        header = safetensors_header(weights)
        verify_recorded(directory, WEIGHTS_FILE)
    else:
        sums, record = recorded_checksums(directory)
        if WEIGHTS_FILE in sums:  # saved with weights that are gone: never silently a random model
            raise CheckpointError(f"{weights} is missing, though {record} records it: the folder is incomplete")
    # Build in the dtype the weights were saved in (a bf16 model comes back bf16, not upcast).
    dtype = next(iter(header.values()))[0] if header else None
    model = build(recipe_path, device=device, dtype=from_safetensors(dtype))
    adapt_as_recipe(model, fresh=False)  # a model trained with train.lora loads with its adapters
    if header is not None:
        check_fits(model, {name: shape for name, (_, shape) in header.items()}, weights=weights, recipe=recipe_path)
        load_model(model, str(weights), strict=True, device=str(device or "cpu"))
        check_weights(dict(model.state_dict()), str(weights))
    return model


SHARDED_METADATA = ".metadata"
"""The index of a sharded checkpoint (``torch.distributed.checkpoint``): which ``*.distcp`` file holds which
piece of which tensor. Its presence makes a checkpoint folder a sharded one (``zoo.train.sharded``)."""
SHARD_SUFFIX = ".distcp"


def is_sharded(directory: Path) -> bool:
    """Whether ``directory`` is a checkpoint written by several processes (``.metadata`` + ``*.distcp``)."""
    return os.path.lexists(Path(directory) / SHARDED_METADATA)


def verify_sharded(directory: Path, *, rank: int = 0, world_size: int = 1) -> None:
    """Check the index and shards of a sharded checkpoint against the checksums its ``run.json`` records (with
    ``world_size`` > 1, process ``rank``'s share of the files): a damaged, truncated or swapped file, a recorded
    shard that is gone and a shard that was not recorded are each a ``CheckpointError`` naming the file."""
    directory = Path(directory)
    sums, record = recorded_checksums(directory)
    present = [p.name for p in directory.iterdir() if p.name.endswith(SHARD_SUFFIX)]
    recorded = [n for n in sums if n == SHARDED_METADATA or n.endswith(SHARD_SUFFIX)]
    names = sorted({SHARDED_METADATA, *present, *recorded})
    for name in names[rank::world_size]:
        path = directory / name
        if not os.path.lexists(path):
            raise CheckpointError(
                f"{path} is missing, though {record or directory} records it: the checkpoint is incomplete; "
                "use an earlier checkpoint folder"
            )
        folder_file(directory, name)
        if record is not None and name not in sums:
            raise CheckpointError(
                f"{path} is not one of the files {record} records: a shard of another checkpoint? Remove it, or use "
                "an earlier checkpoint folder"
            )
        verify_checksum(path, sums.get(name), record)


INDEX_CLASSES = {
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("pathlib", "Path"),
    ("pathlib", "PosixPath"),
    ("pathlib", "WindowsPath"),
}
"""What a DCP index (``.metadata``) may name beside ``torch.distributed.checkpoint.metadata``'s classes and torch's
dtypes: everything else is refused unread (unpickling it could run code)."""


class _IndexUnpickler(pickle.Unpickler):
    def __init__(self, file: Any, path: Path) -> None:
        super().__init__(file)
        self.path = path

    def find_class(self, module: str, name: str) -> Any:
        import torch.distributed.checkpoint.metadata as index

        found = getattr(index, name, None) if module == index.__name__ else None
        if isinstance(found, type) or (module, name) in INDEX_CLASSES:
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise CheckpointError(
            f"{self.path} is refused: it names {module}.{name}, which no checkpoint index holds, and unpickling it "
            "could run code. Use a checkpoint that zoo train wrote"
        )


def sharded_reader(directory: Path) -> Any:
    """DCP's ``FileSystemReader`` of a sharded checkpoint, whose index (``.metadata``, a pickle) is unpickled with
    only the classes an index holds (``INDEX_CLASSES``): a crafted index is a ``CheckpointError``, never run.

    DCP reads the rest itself: tensors as raw bytes, other values with ``torch.load(weights_only=True)``.
    """
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import Metadata, StorageMeta

    class IndexReader(FileSystemReader):
        def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
            path = Path(directory) / SHARDED_METADATA
            with path.open("rb") as f:
                metadata = _IndexUnpickler(f, path).load()
            if not isinstance(metadata, Metadata):
                raise CheckpointError(f"{path} holds a {type(metadata).__name__}, not a checkpoint index: damaged")
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata

    return IndexReader(str(directory))


def read_index(directory: Path, reader: Any = None) -> Any:
    """The DCP index (``.metadata``) of a sharded checkpoint, read by ``reader`` (default: ``sharded_reader``).

    Raises:
        CheckpointError: an index that cannot be read, or names code other than an index's classes.
    """
    try:
        return (reader or sharded_reader(directory)).read_metadata()
    except CheckpointError:
        raise
    except Exception as exc:  # noqa: BLE001 - an unpickling error has many types
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise CheckpointError(
            f"{directory / SHARDED_METADATA} cannot be read ({type(exc).__name__}: {first}): the checkpoint is "
            "damaged; use an earlier checkpoint folder"
        ) from None


def read_sharded(directory: Path, prefix: str, *, verify: bool = True) -> dict[str, Any]:
    """The state saved under ``prefix`` (``model``, ``optimizer``) in a sharded checkpoint, read whole into this
    process (CPU tensors) without a process group; its files are checked against their checksums first."""
    from torch.distributed.checkpoint.api import CheckpointException

    if verify:
        verify_sharded(directory)
    reader = sharded_reader(directory)
    read_index(directory, reader)  # a crafted index is refused here, by name (DCP would wrap the error)
    state: dict[str, Any] = {}
    try:
        dcp_read_keys(state, reader, {prefix})
    except (Exception, CheckpointException) as exc:  # noqa: BLE001 - DCP reports a damaged index or shard with many exception types
        raise CheckpointError(
            f"{directory}: its shards (*{SHARD_SUFFIX}, {SHARDED_METADATA}) cannot be read ({type(exc).__name__}: "
            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}): the checkpoint is damaged; use an "
            "earlier checkpoint folder"
        ) from None
    found = state.get(prefix)
    if not isinstance(found, dict):
        raise CheckpointError(f"{directory / SHARDED_METADATA} holds no {prefix} state: not a zoo checkpoint")
    return found


class Pretrained:
    """``save_pretrained`` / ``from_pretrained`` for zoo's models, by the names Hugging Face users expect.

    The same as ``zoo.save(model, directory)`` and ``zoo.load(path)``, which work for any model ``zoo.build``
    made (a plugin architecture's too).
    """

    def save_pretrained(self, directory: str | Path) -> Path:
        """Write this model's folder (recipe.yaml, config.json, model.safetensors, checksums.json)."""
        return save(self, directory)  # type: ignore[arg-type]

    @classmethod
    def from_pretrained(cls, path: str | Path, *, device: str | torch.device | None = None) -> nn.Module:
        """The model in ``path`` (a model, checkpoint, run or Hugging Face folder), which must be a ``cls``."""
        model = load(path, device=device)
        if not isinstance(model, cls):
            raise ZooError(
                f"{path} holds a {type(model).__name__} ({model.recipe.architecture}), not a {cls.__name__}: "
                "load it with zoo.load(path), which returns whatever the folder holds"
            )
        return model
