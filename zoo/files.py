"""Files written atomically and read defensively: the primitives every folder zoo reads or writes is made of.

Writing: ``atomic_write`` (a temporary file renamed into place, with the permissions the umask gives).
Reading: JSON, safetensors and torch files, each refused with an error that names the file and what is
wrong (empty, truncated, pickled, holding code, not matching the sha256 its folder records). The names of
a model folder's files are here too. Nothing of zoo but its errors and dtypes is imported here, so any
layer may use these.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import pickle
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open

from .errors import CheckpointError, ZooError
from .paths import folder_file

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
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        unnamed = isinstance(exc, OSError) and exc.filename is None and not isinstance(exc, ZooError)
        if unnamed or (isinstance(exc, Exception) and not isinstance(exc, OSError | ZooError)):
            # torch.save and safetensors report a full disk as RuntimeError / SafetensorError, or an OSError
            # without the file's name: one message that names it
            raise WriteError(f"{path} could not be written: {why_not_written(path, exc)}") from None
        raise


class WriteError(ZooError, OSError):
    """A file could not be written (a full disk, an I/O error); nothing of it is left behind."""


def why_not_written(path: Path, exc: BaseException) -> str:
    """Why writing ``path`` failed: the disk is full (when it is), and what the writer raised."""
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        free = None
    full = "the disk is full; " if free is not None and free < 16 * 2**20 else ""
    said = exc.strerror if isinstance(exc, OSError) and exc.strerror else f"{type(exc).__name__}: {exc}"
    return f"{full}{said}"


class DestinationError(ZooError, ValueError):
    """A folder a command would write into is the one it reads, or holds something else (without ``force``)."""


def _overlaps(a: Path, b: Path) -> bool:
    a, b = a.resolve(), b.resolve()
    return a == b or a in b.parents or b in a.parents


@contextmanager
def destination(
    out: str | Path,
    *,
    what: str,
    force: bool = False,
    same: Callable[[Path], bool] = lambda folder: False,
    reading: tuple[str | Path, ...] = (),
) -> Iterator[Path]:
    """The folder ``out`` to write ``what`` into, made safe: never one being read (``reading``), and never one
    that holds something else unless ``force``. A folder that holds something (the same model, ``same(out)``, or
    anything with ``force``) is replaced whole: moved aside, deleted once the new one is written, or put back if
    the write fails; a new or empty folder that fails to be written is left as it was. What a killed writer left
    (its folder moved aside, the temporary files of its writes) is undone first (``_recover``).

    Raises:
        DestinationError: ``out`` overlaps a folder being read, is a file, or holds something else without
            ``force``; the message says what to do.
    """
    out = Path(out)
    for source in reading:
        if _overlaps(out, Path(source)):
            raise DestinationError(f"{out}: that is the folder being read ({source}); write {what} to another folder")
    if out.exists() and not out.is_dir():
        raise DestinationError(f"{out} is a file: write {what} to a folder")
    _recover(out)
    if not out.exists() or not any(out.iterdir()):
        existed = out.exists()
        try:
            yield out
        except BaseException:  # nothing half-written: the folder goes back to what it was (empty, or none)
            shutil.rmtree(out, ignore_errors=True)
            if existed:
                out.mkdir(parents=True, exist_ok=True)
            raise
        return
    if not force and not same(out):
        held = sorted(p.name for p in out.iterdir())
        listed = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
        other = "another model" if {"recipe.yaml", CONFIG_FILE} & set(held) else "other files"
        raise DestinationError(
            f"{out} already holds {other} ({listed}): pass --force to replace it whole with {what}, or choose "
            "another folder"
        )
    aside = out.with_name(f"{ASIDE_PREFIX.format(name=out.name)}{os.getpid()}")
    out.rename(aside)
    try:
        yield out
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        aside.rename(out)
        raise
    shutil.rmtree(aside, ignore_errors=True)


ASIDE_PREFIX = ".{name}.replaced-"
"""``.OUT.replaced-PID``: a folder being replaced, moved aside by process PID until the new one is written."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only whether it exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's
        pass
    return True


def _recover(out: Path) -> None:
    """Undo what a killed writer of ``out`` left: the folder it moved aside comes back in place of its partial
    new one, and the temporary files of its unfinished atomic writes go."""
    prefix = ASIDE_PREFIX.format(name=out.name)
    for aside in out.parent.glob(f"{glob.escape(prefix)}*") if out.parent.is_dir() else []:
        pid = aside.name.removeprefix(prefix)
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(out, ignore_errors=True)
            aside.rename(out)
    if out.is_dir():
        for leftover in out.rglob(".*.tmp"):
            if leftover.is_file() and not leftover.is_symlink():
                leftover.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------- reading safely

BUILT_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
"""The floating-point dtypes a model's weights may be stored in (``zoo.dtypes.DTYPE_CHOICES``)."""


def nonfinite_tensors(state: dict[str, torch.Tensor]) -> list[str]:
    """Names of the floating-point tensors of ``state`` that hold a NaN or an infinity."""
    return [n for n, t in state.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]


def check_weights(state: dict[str, torch.Tensor], where: str, error: type[ZooError] = CheckpointError) -> None:
    """Refuse weights zoo cannot build exactly: a floating-point dtype it does not build in (fp8 and other
    quantized formats), and NaN or infinite values (a diverged or damaged checkpoint), naming the first."""
    odd = [(n, t.dtype) for n, t in state.items() if t.is_floating_point() and t.dtype not in BUILT_DTYPES]
    if odd:
        name, dtype = odd[0]
        raise error(
            f"{where}: {len(odd)} weights are {str(dtype).removeprefix('torch.')} (e.g. {name}); zoo builds "
            "float32, bfloat16, float16 and float64 models: dequantize the checkpoint first"
        )
    bad = nonfinite_tensors(state)
    if bad:
        raise error(f"{where}: {len(bad)} weights hold NaN or infinite values (e.g. {bad[0]}): refused")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


MAX_JSON_BYTES = 128 * 2**20
"""The largest JSON file zoo reads (config, index, tokenizer, run records): the largest tokenizer.json of a
published model is about 35 MB; parsing JSON costs about 4x its size in memory."""
MAX_JSON_DEPTH = 64
"""The deepest nesting of JSON zoo reads (a tokenizer.json nests about 6 deep, a config.json 4)."""


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the key {key!r} appears twice in one object")
        seen[key] = value
    return seen


def _depth(data: Any) -> int:
    deepest, stack = 0, [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def read_json(
    path: Path, *, error: type[ZooError] = CheckpointError, folder: str | Path | None = None
) -> dict[str, Any]:
    """The JSON object in ``path``: at most ``MAX_JSON_BYTES``, nested at most ``MAX_JSON_DEPTH`` deep, no key twice
    in one object; with ``folder``, a regular file inside it (``folder_file``). Anything else is an ``error``
    naming the file and what is wrong (damaged, truncated, not an object, too large, too deep, ambiguous)."""
    path = Path(path)
    if folder is not None:
        folder_file(folder, path.relative_to(folder) if path.is_relative_to(folder) else path.name, error=error)
    size = path.stat().st_size
    if size > MAX_JSON_BYTES:
        raise error(f"{path} is {size:,} bytes: zoo reads JSON files of at most {MAX_JSON_BYTES:,} bytes")
    try:
        data = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_reject_duplicates)
    except UnicodeDecodeError:
        raise error(f"{path} is not text (not UTF-8): the file is damaged or of another kind") from None
    except json.JSONDecodeError as exc:
        raise error(f"{path} is not valid JSON ({exc}): the file is damaged or truncated") from None
    except RecursionError:
        raise error(f"{path} nests deeper than {MAX_JSON_DEPTH} levels: not a file zoo reads") from None
    except ValueError as exc:  # a duplicate key
        raise error(f"{path}: {exc}, so its value is ambiguous: keep one") from None
    if _depth(data) > MAX_JSON_DEPTH:
        raise error(f"{path} nests deeper than {MAX_JSON_DEPTH} levels: not a file zoo reads")
    if not isinstance(data, dict):
        raise error(f"{path} must hold a JSON object, not a {type(data).__name__}")
    return data


def recorded_checksums(directory: Path) -> tuple[dict[str, str], Path | None]:
    """``({file name: sha256}, the file recording them)`` of a folder; ``({}, None)`` when none is recorded."""
    for name in CHECKSUM_RECORDS:
        record = Path(directory) / name
        if os.path.lexists(record):
            sums = read_json(record, folder=directory).get("sha256")
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
