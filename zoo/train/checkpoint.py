"""Training checkpoints: weights, optimizer, scheduler and RNG state, written so that a kill never hurts.

A run directory looks like::

    RUN_DIR/
      run.yaml                      how the run was started: recipe, overrides, data (--resume rebuilds it)
      metrics.jsonl                 one JSON record per log step and per evaluation
      checkpoints/
        latest                      name of the newest complete checkpoint (atomically replaced)
        step-00000500/
          recipe.yaml  model.safetensors    -> ``zoo.load(path)`` loads the model as it is
          optimizer.pt  trainer.pt           optimizer; scheduler, loss scaler and every rank's RNG state
          tokenizer.json  run.json           how text became ids; step, objective, labels, metrics

A run of several processes writes each rank's shards instead of model.safetensors and optimizer.pt (``sharded``).

A checkpoint is written into a hidden temporary folder, each file flushed to disk, and then the folder is
renamed into place (one atomic step) before ``latest`` is replaced (temp file + rename). An old checkpoint
is renamed to a hidden folder before it is deleted. A process killed at any instant leaves either the
previous checkpoint or the new one complete, never a half-written or half-deleted ``step-*`` folder; the
hidden leftovers are ignored, and removed when the next run starts (``clean_leftovers``).

``run.json`` records the sha256 of every other file of its checkpoint: reading a checkpoint checks them,
and every file that is damaged, truncated, swapped or of the wrong kind is a ``CheckpointError`` that names
it (checkpoints written before checksums existed still load).
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
from safetensors.torch import save_file
from torch import nn

from zoo.checkpoint import (
    check_fits,
    dump_recipe,
    tied_aliases,  # noqa: F401 - part of this module's interface (the loop calls ckpt.tied_aliases)
)
from zoo.errors import CheckpointError, TrainError, ZooError
from zoo.files import (
    RECIPE_FILE,
    WEIGHTS_FILE,
    WriteError,
    atomic_write,
    folder_file,
    nonfinite_tensors,
    public_mode,
    read_json,
    read_safetensors,
    read_torch_file,
    sha256_file,
    verify_checksum,
    why_not_written,
)
from zoo.locate import (
    CHECKPOINT_NAME,
    CHECKPOINT_REQUIRED,
    CHECKPOINTS,
    LATEST,
    RUN_FILE,
    complete_checkpoint,
    latest_checkpoint,  # noqa: F401 - part of this module's interface
)
from zoo.recipe import Recipe

from . import sharded
from .tokenizer import Tokenizer, tokenizer_from_json

OPTIMIZER_FILE = "optimizer.pt"
TRAINER_FILE = "trainer.pt"
TOKENIZER_FILE = "tokenizer.json"
REQUIRED = CHECKPOINT_REQUIRED
LEFTOVER_PREFIXES = (".tmp-", ".old-", ".del-")
"""Hidden folders of writes, swaps and deletions that a killed process did not finish."""


def checkpoint_name(step: int) -> str:
    return f"step-{step:08d}"


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
    model_state: dict[str, torch.Tensor] | None,
    optimizer_state: dict[str, Any] | None,
    trainer_state: dict[str, Any],
    tokenizer: Tokenizer | None,
    info: dict[str, Any],
    aliases: dict[str, str],
    keep: int,
    tmp: Path | None = None,
) -> Path:
    """Write one complete checkpoint of ``step`` atomically; keep the newest ``keep``; return its folder. ``tmp``:
    the ``new_checkpoint_folder`` that already holds every process's shards (``zoo.train.sharded``), or None."""
    final = run_dir / CHECKPOINTS / checkpoint_name(step)
    root, tmp = final.parent, tmp or new_checkpoint_folder(run_dir, step)
    try:
        if model_state is not None:
            weights = {k: v.detach().contiguous() for k, v in model_state.items() if k not in aliases}
            save_file(weights, str(tmp / WEIGHTS_FILE), metadata={"format": "pt", "step": str(step)})
        (tmp / RECIPE_FILE).write_text(dump_recipe(recipe.to_dict()), encoding="utf-8")
        for name, state in ((OPTIMIZER_FILE, optimizer_state), (TRAINER_FILE, trainer_state)):
            if state is not None:  # (a sharded checkpoint's optimizer state is in its shards)
                with (tmp / name).open("wb") as f:  # closed even when torch.save fails (it keeps a path's file open)
                    torch.save(state, f)
        if tokenizer is not None:
            (tmp / TOKENIZER_FILE).write_text(json.dumps(tokenizer.to_json()), encoding="utf-8")
        sums = {f.name: sha256_file(f) for f in sorted(tmp.iterdir())}
        record = {**info, "step": step, "aliases": aliases, "sha256": sums}
        (tmp / RUN_FILE).write_text(json.dumps(record, indent=1), encoding="utf-8")
        for f in tmp.iterdir():
            public_mode(f)  # safetensors writes its files 0600 whatever the umask
            _fsync(f)
        if final.exists():  # the same step written again (a resumed run): swap, never a moment without one
            old = root / f".old-{final.name}"
            _remove(old)
            os.replace(final, old)
            os.replace(tmp, final)
            _remove(old)
        else:
            os.replace(tmp, final)
        _fsync(root)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, Exception) and not isinstance(exc, ZooError):  # torch.save on a full disk: RuntimeError
            raise WriteError(
                f"{final} could not be written: {why_not_written(final, exc)}. The run keeps its last complete "
                "checkpoint: fix that, then zoo train --resume"
            ) from None
        raise
    atomic_write(root / LATEST, lambda path: path.write_text(final.name, encoding="utf-8"))
    _prune(root, keep)
    return final


def new_checkpoint_folder(run_dir: Path, step: int) -> Path:
    """A new hidden temporary folder for the checkpoint of ``step`` (renamed into place once complete)."""
    root = run_dir / CHECKPOINTS
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{checkpoint_name(step)}-", dir=root))
    public_mode(tmp, directory=True)  # mkdtemp makes it 0700; once renamed it is the checkpoint folder
    return tmp


_complete = complete_checkpoint


def _remove(folder: Path) -> None:
    """Delete a folder so that a kill half-way leaves a hidden ``.del-*`` folder, never a partial ``step-*``."""
    if not folder.exists():
        return
    doomed = folder
    if not folder.name.startswith("."):
        doomed = folder.parent / f".del-{folder.name}"
        shutil.rmtree(doomed, ignore_errors=True)
        os.replace(folder, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


def _prune(root: Path, keep: int) -> None:
    complete = sorted(p for p in root.iterdir() if _complete(p))
    for old in complete[:-keep]:
        _remove(old)
    for leftover in root.glob(".tmp-step-*"):  # from a process killed while writing
        shutil.rmtree(leftover, ignore_errors=True)


LOCK_FILE = ".zoo-train.lock"
"""``RUN_DIR/.zoo-train.lock``: held (``flock``) by the process that writes the run, for as long as it runs."""


class RunLock:
    """The writer's hold on a run directory: a second ``zoo train`` into it is refused while the first runs.

    An advisory ``flock`` on ``RUN_DIR/.zoo-train.lock``: the operating system releases it when the process ends,
    however it ends (a killed run leaves no stale lock). The file records the holder's pid for the message.
    """

    def __init__(self, run_dir: Path) -> None:
        import fcntl

        run_dir.mkdir(parents=True, exist_ok=True)
        self.path = run_dir / LOCK_FILE
        self.file = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(self.file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.file.seek(0)
            holder = self.file.read().strip() or "another process"
            self.file.close()
            raise TrainError(
                f"{run_dir} is being written by another zoo train (pid {holder}): wait for it to end, or train into "
                "another --out"
            ) from None
        self.file.seek(0)
        self.file.truncate()
        self.file.write(str(os.getpid()))
        self.file.flush()

    def release(self) -> None:
        if not self.file.closed:
            self.file.close()  # closing the descriptor drops the flock


def clean_leftovers(run_dir: str | Path) -> list[str]:
    """Remove what killed processes left in a run directory; return the names removed (for the run's notice).

    That is: the hidden folders of unfinished checkpoint writes, swaps and deletions, the temporary files of
    atomic writes (``.latest.*.tmp``, ``.metrics.jsonl.*.tmp``) and half-deleted ``step-*`` folders: incomplete
    ones older than the newest complete checkpoint (what an older zoo's pruning left; zoo never writes an
    incomplete ``step-*`` folder, so a newer one is someone else's and stays). Call it only when no other
    process writes into the run (at the start of a run).
    """
    run_dir = Path(run_dir)
    root = run_dir / CHECKPOINTS
    removed: list[str] = []
    if run_dir.is_dir():
        for f in run_dir.glob(".*.tmp"):
            if f.is_file():
                f.unlink(missing_ok=True)
                removed.append(f.name)
    if root.is_dir():
        newest = max((_step_of(p) for p in root.iterdir() if _complete(p)), default=-1)

        def half_deleted(entry: Path) -> bool:
            return CHECKPOINT_NAME.fullmatch(entry.name) is not None and _step_of(entry) < newest

        for entry in sorted(root.iterdir()):
            name = entry.name
            if entry.is_dir() and (
                name.startswith(LEFTOVER_PREFIXES) or (half_deleted(entry) and not _complete(entry))
            ):
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(f"{CHECKPOINTS}/{name}")
            elif entry.is_file() and name.startswith(".") and name.endswith(".tmp"):
                entry.unlink(missing_ok=True)
                removed.append(f"{CHECKPOINTS}/{name}")
    return removed


def _step_of(folder: Path) -> int:
    return int(folder.name.removeprefix("step-"))


def read_info(checkpoint: Path) -> dict[str, Any]:
    """``run.json`` of a checkpoint, checked: a JSON object with an integer ``step``."""
    path = checkpoint / RUN_FILE
    info = read_json(path, folder=checkpoint)
    step = info.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise CheckpointError(f"{path} has no valid step (found {step!r}): the file is damaged")
    aliases = info.get("aliases", {})
    if not isinstance(aliases, dict) or not all(isinstance(v, str) for v in aliases.values()):
        raise CheckpointError(f"{path}: 'aliases' must map tensor names to tensor names, found {aliases!r}")
    sums = info.get("sha256", {})
    if not isinstance(sums, dict):
        raise CheckpointError(f"{path}: 'sha256' must map file names to digests, found {sums!r}")
    return info


def _verified(checkpoint: Path, name: str, info: dict[str, Any] | None = None) -> Path:
    """``checkpoint / name`` after its checksum (when run.json records one) is checked."""
    info = read_info(checkpoint) if info is None else info
    path = folder_file(checkpoint, name)
    verify_checksum(path, info.get("sha256", {}).get(name), checkpoint / RUN_FILE)
    return path


def read_tokenizer(checkpoint: Path) -> Tokenizer | None:
    if not os.path.lexists(checkpoint / TOKENIZER_FILE):
        return None
    path = _verified(checkpoint, TOKENIZER_FILE)
    data = read_json(path)
    try:
        return tokenizer_from_json(data)
    except TrainError as exc:
        raise CheckpointError(f"{path}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the tokenizers library reports a bad table in its own ways
        raise CheckpointError(f"{path} does not describe a tokenizer ({type(exc).__name__}: {exc})") from None


def read_model_state(checkpoint: Path) -> dict[str, torch.Tensor]:
    """The weights, tied aliases restored, keyed like ``model.state_dict()`` (a sharded checkpoint's read whole)."""
    info = read_info(checkpoint)
    if sharded.is_sharded(checkpoint):
        return sharded.read_model_state(checkpoint, info.get("aliases", {}))
    path = folder_file(checkpoint, WEIGHTS_FILE)
    state = read_safetensors(path, sha256=info.get("sha256", {}).get(WEIGHTS_FILE), record=checkpoint / RUN_FILE)
    for alias, kept in info.get("aliases", {}).items():
        if kept not in state:
            raise CheckpointError(f"{path} lacks {kept}, which {checkpoint / RUN_FILE} names as a tied weight")
        state[alias] = state[kept]
    return state


def check_state_fits(model: nn.Module, state: dict[str, torch.Tensor], checkpoint: Path) -> None:
    """Refuse weights of another shape than ``model``'s (a recipe or weights file swapped), naming them."""
    shapes = {name: tuple(t.shape) for name, t in state.items()}
    check_fits(model, shapes, weights=sharded.weights_file(checkpoint), recipe=checkpoint / RECIPE_FILE)


def check_finite(state: dict[str, torch.Tensor], checkpoint: Path) -> None:
    """Refuse the weights of a run that had diverged when the checkpoint was written (zoo never writes such
    a checkpoint now; an older version or another tool may have)."""
    if bad := nonfinite_tensors(state):
        where = sharded.weights_file(checkpoint)
        raise CheckpointError(sharded.NONFINITE.format(where=where, count=len(bad), name=bad[0]))


def read_training_state(checkpoint: Path, *, verified: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """(optimizer state, trainer state) of a checkpoint. A sharded one's optimizer state is its outline (groups,
    step counts, moments on the meta device: ``sharded.optimizer_outline``), its shards checked unless ``verified``."""
    info = read_info(checkpoint)
    if sharded.is_sharded(checkpoint):
        optimizer = sharded.optimizer_outline(checkpoint, verify=not verified)
    else:
        optimizer = read_torch_file(_verified(checkpoint, OPTIMIZER_FILE, info))
    trainer = read_torch_file(_verified(checkpoint, TRAINER_FILE, info))
    if not isinstance(optimizer, dict) or not {"state", "param_groups"} <= set(optimizer):
        raise CheckpointError(f"{checkpoint / OPTIMIZER_FILE} does not hold an optimizer state")
    if not isinstance(trainer, dict) or not {"step", "scheduler", "rng"} <= set(trainer):
        raise CheckpointError(f"{checkpoint / TRAINER_FILE} does not hold a trainer state (step, scheduler, rng)")
    return optimizer, trainer


def check_training_state(
    checkpoint: Path,
    optimizer: dict[str, Any],
    trainer: dict[str, Any],
    model_state: dict[str, torch.Tensor],
    group_sizes: list[int],
) -> None:
    """Refuse optimizer and trainer state that does not fit the model before any of it is loaded: the fused
    AdamW kernels index moments by the parameters' shapes, so a moment of another shape would crash the process
    rather than raise.

    ``group_sizes``: the parameters in each of the new optimizer's groups (the checkpoint's must match).

    Raises:
        CheckpointError: naming the file, the parameter and what is wrong.
    """
    where, step = sharded.optimizer_file(checkpoint, OPTIMIZER_FILE), trainer.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise CheckpointError(f"{checkpoint / TRAINER_FILE}: step must be an integer >= 0, found {step!r}")
    saved_step = read_info(checkpoint)["step"]
    if step != saved_step:
        raise CheckpointError(f"{checkpoint / TRAINER_FILE}: step {step} is not the checkpoint's ({saved_step})")
    groups = optimizer["param_groups"]
    sizes = (
        [len(g.get("params", ())) if isinstance(g, dict) else -1 for g in groups] if isinstance(groups, list) else []
    )
    if sizes != group_sizes:
        raise CheckpointError(
            f"{where}: its parameter groups hold {sizes} parameters, the model's {group_sizes}: the optimizer state "
            "is of another model or cut down"
        )
    state = optimizer["state"]
    if not isinstance(state, dict):
        raise CheckpointError(f"{where}: 'state' must map parameter names to their moments")
    for group in groups:
        for name in group["params"]:
            if name not in model_state:
                raise CheckpointError(f"{where} names a parameter the model does not have: {name!r}")
            moments = state.get(name, {})
            if not isinstance(moments, dict):
                raise CheckpointError(f"{where}: the state of {name} must be a mapping, found {type(moments).__name__}")
            for key, value in moments.items():
                if key == "step":
                    number = float(value) if isinstance(value, torch.Tensor) and value.numel() == 1 else value
                    if isinstance(number, bool) or not isinstance(number, int | float) or not number >= 0:
                        raise CheckpointError(
                            f"{where}: the step count of {name} must be a number >= 0, found {value!r}"
                        )
                elif not isinstance(value, torch.Tensor) or not value.is_floating_point():
                    raise CheckpointError(f"{where}: {name}'s {key} must be a floating-point tensor")
                elif value.shape != model_state[name].shape:
                    raise CheckpointError(
                        f"{where}: {name}'s {key} has shape {list(value.shape)}, the parameter "
                        f"{list(model_state[name].shape)}: the optimizer state is damaged or of another model"
                    )


FIXED_BY_CHECKPOINT = ("train.tokenizer", "train.objective", "train.lora")
"""Training settings a checkpoint fixes (its tokenizer, objective and adapters): never changed on resume."""
IGNORED_ON_RESUME = ("description", "expect")
"""Recipe fields that say nothing about the run."""


@dataclass(frozen=True)
class Difference:
    """One field in which a recipe differs from the checkpoint's: ``field: saved -> given``."""

    field: str
    saved: Any
    given: Any

    @property
    def changeable(self) -> bool:
        """Whether a resumed run can take the new value (``allow_changes``): training settings, the name."""
        fixed = any(self.field == f or self.field.startswith(f"{f}.") for f in FIXED_BY_CHECKPOINT)
        return (self.field == "name" or self.field.startswith("train.")) and not fixed

    def __str__(self) -> str:
        return f"{self.field}: {_shown(self.saved)} → {_shown(self.given)}"


class _Unset:
    def __repr__(self) -> str:
        return "(unset)"


UNSET = _Unset()


def _shown(value: Any) -> str:
    return repr(value) if value is not UNSET else "(unset)"


def recipe_differences(checkpoint: Path, recipe: Recipe) -> list[Difference]:
    """Every field (training settings included) in which ``recipe`` differs from the checkpoint's own."""
    from zoo.recipe import load_recipe

    saved = load_recipe(_verified(checkpoint, RECIPE_FILE)).to_dict()
    current = recipe.to_dict()
    a = _flatten({k: v for k, v in saved.items() if k not in IGNORED_ON_RESUME})
    b = _flatten({k: v for k, v in current.items() if k not in IGNORED_ON_RESUME})
    keys = sorted(k for k in a.keys() | b.keys() if a.get(k, UNSET) != b.get(k, UNSET))
    return [Difference(k, a.get(k, UNSET), b.get(k, UNSET)) for k in keys]


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): data}


START_FILE = "run.yaml"
"""``RUN_DIR/run.yaml``: how the run was started (the recipe named, its file, the overrides on top, the data,
the folder its weights came from). ``--resume`` rebuilds that recipe: the recipe as it reads now, with the
saved overrides under any new ones."""
_START_HEADER = (
    "# How this run was started: `zoo train RECIPE --out RUN --resume` re-reads the recipe with these overrides.\n"
)


def write_start(run_dir: Path, record: dict[str, Any]) -> None:
    """Write ``run.yaml`` atomically (plain data: the overrides as JSON-like values)."""
    from zoo.recipe import dump_yaml

    plain = json.loads(json.dumps(record, default=str))  # tuples -> lists, paths -> text
    text = _START_HEADER + dump_yaml(plain)
    atomic_write(run_dir / START_FILE, lambda path: path.write_text(text, encoding="utf-8"))


def read_start(run_dir: Path) -> dict[str, Any] | None:
    """``run.yaml`` of a run, or None when it has none (a run of an older zoo, or a new folder).

    Raises:
        TrainError: the file is not a mapping with a mapping of ``overrides`` (it was edited or damaged).
    """
    import yaml

    from zoo.recipe import load_yaml

    path = run_dir / START_FILE
    if not path.is_file():
        return None
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise TrainError(f"{path} cannot be read ({exc}): delete it to resume with the recipe as given") from None
    overrides = data.get("overrides") if isinstance(data, dict) else None
    if not isinstance(overrides, dict) or not all(isinstance(k, str) for k in overrides):
        raise TrainError(
            f"{path} does not record how the run was started (no mapping of 'overrides'): delete it to resume "
            "with the recipe as given"
        )
    return data
