"""Save a built model as (resolved recipe, weights) and load it back bit for bit.

A saved folder holds ``recipe.yaml``, ``model.safetensors``, ``config.json`` (the recipe as JSON, beside the
weights as Hugging Face tools expect) and ``checksums.json`` (the sha256 of the weights). ``load`` also reads
training checkpoints, run folders and Hugging Face folders (``zoo.locate``). Every file is read defensively:
an empty, truncated or pickled weights file, invalid JSON, a torch file that holds code, weights that do not
match their checksum or do not fit their recipe are each a ``CheckpointError`` naming the file and what is
wrong. Folders saved before checksums existed still load.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_model, save_model
from torch import nn

from .dtypes import from_safetensors
from .errors import CheckpointError, ZooError

RECIPE_FILE = "recipe.yaml"
WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
"""Beside the weights, as Hugging Face tools expect: ``{"zoo_version", "architecture", "recipe"}``."""
CHECKSUMS_FILE = "checksums.json"
"""``{"sha256": {file name: hex digest}}`` of a folder written by ``save``."""
CHECKSUM_RECORDS = (CHECKSUMS_FILE, "run.json")
"""The files that may record the sha256 of the files beside them (a training checkpoint's is run.json)."""


def umask() -> int:
    """The process's file mode creation mask (read without changing it for good)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def public_mode(path: Path, *, directory: bool = False) -> None:
    """Give ``path`` the permissions a plain ``open`` / ``mkdir`` would (0644 / 0755 under umask 022):
    temporary files and folders are created private (0600 / 0700), and a renamed one keeps that."""
    os.chmod(path, (0o777 if directory else 0o666) & ~umask())


def atomic_write(path: Path, write: Any) -> None:
    """Call ``write(tmp_path)`` then rename onto ``path``: readers see the old file or the whole new one,
    with the permissions the umask gives."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        public_mode(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dump_recipe(data: dict[str, Any]) -> str:
    """The recipe as YAML that the recipe loader reads back as the same data (a string like "1e-3" stays one)."""
    from .recipe import dump_yaml

    return dump_yaml(data)


# ---------------------------------------------------------------------------------------------- reading safely


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_json(path: Path, *, error: type[ZooError] = CheckpointError) -> dict[str, Any]:
    """The JSON object in ``path``; damaged, truncated or non-object contents are an ``error`` naming it."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise error(f"{path} is not text (not UTF-8): the file is damaged or of another kind") from None
    except json.JSONDecodeError as exc:
        raise error(f"{path} is not valid JSON ({exc}): the file is damaged or truncated") from None
    if not isinstance(data, dict):
        raise error(f"{path} must hold a JSON object, not a {type(data).__name__}")
    return data


def recorded_checksums(directory: Path) -> tuple[dict[str, str], Path | None]:
    """``({file name: sha256}, the file recording them)`` of a folder; ``({}, None)`` when none is recorded."""
    for name in CHECKSUM_RECORDS:
        record = Path(directory) / name
        if record.is_file():
            sums = read_json(record).get("sha256")
            if isinstance(sums, dict):
                return {str(k): str(v) for k, v in sums.items()}, record
    return {}, None


def verify_checksum(path: Path, expected: str | None, record: Path | None, *, error: type[ZooError] = CheckpointError):
    """Refuse ``path`` when its sha256 is not ``expected`` (None: nothing recorded, nothing to check)."""
    if expected is not None and sha256_file(path) != expected:
        raise error(
            f"{path}: {Path(path).name} does not match its checksum (the sha256 recorded in "
            f"{record.name if record else 'its metadata'}): flipped bytes or a swapped file"
        )


def verify_recorded(directory: Path, *names: str) -> None:
    """Check each named file of ``directory`` against the checksum its folder records, if any."""
    sums, record = recorded_checksums(directory)
    for name in names:
        if (Path(directory) / name).is_file():
            verify_checksum(Path(directory) / name, sums.get(name), record)


def _not_safetensors(path: Path) -> str:
    """Why ``path`` cannot be a safetensors file, from its first bytes."""
    with Path(path).open("rb") as f:
        head = f.read(8)
    if not head:
        return "it is empty (0 bytes): the write was interrupted, or the file was truncated"
    if head.startswith(b"PK\x03\x04"):
        return "it is a zip archive (a torch.save file?), not safetensors"
    if head[:1] == b"\x80":
        return "it is a Python pickle (a torch.save file?), not safetensors"
    return ""


def safetensors_header(path: Path, *, error: type[ZooError] = CheckpointError) -> dict[str, tuple[str, tuple]]:
    """``{tensor name: (dtype, shape)}`` of a safetensors file, its data unread; a bad file is an ``error``."""
    try:
        with safe_open(str(path), framework="pt") as f:
            return {k: (f.get_slice(k).get_dtype(), tuple(f.get_slice(k).get_shape())) for k in f.keys()}
    except SafetensorError as exc:
        # Only a file safetensors refused is diagnosed: a valid header's length may start with any byte.
        reason = _not_safetensors(path) or f"{exc}; the file is truncated, damaged or of another format"
    raise error(f"{path} is not a readable safetensors file: {reason}")


def read_safetensors(
    path: Path, *, sha256: str | None = None, record: Path | None = None, error: type[ZooError] = CheckpointError
) -> dict[str, torch.Tensor]:
    """Every tensor of a safetensors file on the CPU, after its header and (when given) checksum are checked."""
    from safetensors.torch import load_file

    safetensors_header(path, error=error)
    verify_checksum(path, sha256, record, error=error)
    try:
        return load_file(str(path), device="cpu")
    except SafetensorError as exc:
        raise error(f"{path} is not a readable safetensors file: {exc}") from None


def read_torch_file(path: Path, *, error: type[ZooError] = CheckpointError) -> Any:
    """``torch.load(weights_only=True)`` of ``path``: a file holding code is refused, a damaged one named."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except OSError:
        raise
    except pickle.UnpicklingError as exc:
        if "weights only" not in str(exc).lower():
            raise error(f"{path} cannot be read ({_first_line(exc)}): the file is truncated or damaged") from None
        found = re.search(r"Unsupported (?:global|operand)[^\n]*", str(exc))
        detail = f" ({found.group(0).rstrip('.')})" if found else ""
        raise error(
            f"{path} is refused: it holds Python objects other than tensors{detail}, and loading them could run "
            "code. Only plain tensors and containers of them are read (torch.load weights_only=True)"
        ) from None
    except Exception as exc:  # noqa: BLE001 - torch reports a damaged archive with many exception types
        raise error(
            f"{path} cannot be read as a torch file ({type(exc).__name__}: {_first_line(exc)}): "
            "the file is truncated or damaged"
        ) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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
    from .locate import locate

    folder = locate(path)
    if folder.kind == "hf":
        from .hf import from_hf

        model = from_hf(folder.path)
        return model.to(device) if device is not None else model
    return _load_zoo_folder(folder.path, device=device)


def _load_zoo_folder(directory: Path, *, device: str | torch.device | None) -> nn.Module:
    from .builder import build

    recipe_path, weights = directory / RECIPE_FILE, directory / WEIGHTS_FILE
    header = None
    if weights.is_file():
        header = safetensors_header(weights)
        verify_recorded(directory, WEIGHTS_FILE)
    else:
        sums, record = recorded_checksums(directory)
        if WEIGHTS_FILE in sums:  # saved with weights that are gone: never silently a random model
            raise CheckpointError(f"{weights} is missing, though {record} records it: the folder is incomplete")
    # Build in the dtype the weights were saved in (a bf16 model comes back bf16, not upcast).
    dtype = next(iter(header.values()))[0] if header else None
    model = build(recipe_path, device=device, dtype=from_safetensors(dtype))
    if header is not None:
        check_fits(model, {name: shape for name, (_, shape) in header.items()}, weights=weights, recipe=recipe_path)
        load_model(model, str(weights), strict=True, device=str(device or "cpu"))
    return model


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
