"""Sharded checkpoints: a run of several processes (torchrun) writes its state without gathering it.

Each process writes its own pieces of the model and optimizer state with ``torch.distributed.checkpoint``
(DCP): ``dcp.save`` of ``get_state_dict(model, optimizer)``, whatever the parallelism (DDP replicas, FSDP2 or
HSDP shards, tensor-parallel DTensors). A sharded checkpoint folder looks like::

    step-00000500/
      .metadata                     DCP's index: every tensor's global shape and dtype, and which file holds
                                    which piece of it (a pickle, written by rank 0)
      __0_0.distcp  __1_0.distcp    each rank's pieces, under the keys ``model.<name>`` and
      ...                           ``optimizer.state.<name>.<moment>`` / ``optimizer.param_groups.<i>.<key>``
      recipe.yaml  trainer.pt       as in a checkpoint of one process (trainer.pt: every rank's RNG state)
      tokenizer.json  run.json      run.json: ``format`` "torch.distributed.checkpoint", the ``mesh`` it was
                                    written on, and the sha256 of every other file, the shards included

It has no ``model.safetensors`` nor ``optimizer.pt``. A tied tensor is stored once (under the name
``run.json``'s ``aliases`` keeps). Every rank writes into the same hidden temporary folder (so all ranks must
see one filesystem); after all have written, rank 0 adds its files and the checksums and renames the folder
into place (``zoo.train.checkpoint.write_checkpoint``): a kill leaves a ``.tmp-*`` folder, never a partial
checkpoint.

Resuming loads the checkpoint into the new run's own state dicts (``dcp.load``, then ``set_state_dict``), so
it resumes on any number of processes and with any strategy, one process included. Readers
(``read_model_state``, ``zoo.load``) read it whole in one process, without a process group
(``zoo.checkpoint.read_sharded``). The checksums are checked before anything is read, and the index (a pickle)
is unpickled with only the classes an index holds (``zoo.checkpoint.sharded_reader``): a crafted one is refused.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from zoo.checkpoint import (
    SHARD_SUFFIX,
    SHARDED_METADATA,
    is_sharded,
    read_index,
    read_sharded,
    sharded_reader,
    verify_sharded,
)
from zoo.compat import dcp_read_keys, dcp_set_element
from zoo.errors import CheckpointError
from zoo.files import WEIGHTS_FILE, nonfinite_tensors, read_json
from zoo.locate import RUN_FILE

from . import distributed as dist

__all__ = [  # with what it re-exports from zoo.checkpoint (the readers below the training layer)
    "FORMAT",
    "NONFINITE",
    "is_sharded",
    "load_shards",
    "local_part",
    "mesh_of",
    "model_outline",
    "nonfinite_anywhere",
    "optimizer_file",
    "optimizer_outline",
    "read_model_state",
    "read_optimizer_state",
    "read_sharded",
    "sharded_reader",
    "sharded_state",
    "verify",
    "verify_sharded",
    "weights_file",
    "write_shards",
]

FORMAT = "torch.distributed.checkpoint"
"""``run.json``'s ``format`` of a sharded checkpoint (a checkpoint of one process has none)."""
NONFINITE = (
    "{where}: {count} weights hold nan or inf (e.g. {name}): the run had diverged when this checkpoint was written; "
    "use an earlier checkpoint folder"
)
"""The error of a checkpoint whose weights hold NaN or inf, whichever its format."""


def weights_file(checkpoint: Path) -> Path:
    """The file that errors about a checkpoint's weights name: model.safetensors, or a sharded one's index."""
    return checkpoint / (SHARDED_METADATA if is_sharded(checkpoint) else WEIGHTS_FILE)


def optimizer_file(checkpoint: Path, single: str) -> Path:
    """The file that errors about a checkpoint's optimizer state name: ``single`` (optimizer.pt), or the index."""
    return checkpoint / (SHARDED_METADATA if is_sharded(checkpoint) else single)


def local_part(t: Any) -> Any:
    """This process's piece of a tensor (a DTensor's local shard), or the tensor itself."""
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) else t


def sharded_state(model: nn.Module, optimizer: torch.optim.Optimizer, aliases: dict[str, str]) -> tuple[dict, dict]:
    """The model's and optimizer's state dicts as this process holds them (DTensor shards under FSDP2 or tensor
    parallelism, whole tensors under DDP), keyed by parameter name; a tied tensor once (``aliases`` left out)."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optimizer_state = get_state_dict(model, optimizer)
    return {k: v for k, v in model_state.items() if k not in aliases}, optimizer_state


def nonfinite_anywhere(state: dict[str, Any], env: dist.Distributed) -> list[str]:
    """Names of the tensors of ``state`` that hold NaN or inf in any process (each checks its own pieces)."""
    mine = nonfinite_tensors({k: local_part(v) for k, v in state.items() if isinstance(v, torch.Tensor)})
    seen: dict[str, None] = {}
    for names in dist.gather_objects(mine, env):
        seen.update(dict.fromkeys(names))
    return list(seen)


def mesh_of(layout: dist.Layout, env: dist.Distributed) -> dict[str, Any]:
    """How the state was laid out: the world size and the mesh (``replicate x shard x tensor``) that wrote it."""
    return {"world_size": env.world_size, "replicate": layout.replicate, "shard": layout.shard, "tensor": layout.tensor}


def write_shards(state: dict[str, Any], tmp: Path, env: dist.Distributed) -> None:
    """Every process writes its pieces of ``state`` into ``tmp`` (a collective: all processes call it)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException

    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="torch.distributed is disabled")
            dcp.save(state, checkpoint_id=str(tmp), no_dist=not env.active)
    except (Exception, CheckpointException) as exc:  # noqa: BLE001 - DCP gathers every rank's failure into one
        raise OSError(_first_line(exc)) from None
    problem = None
    if env.is_main:  # rank 0 records the checksums: it must see every rank's files
        try:
            named = {getattr(i, "relative_path", None) for i in (read_index(tmp).storage_data or {}).values()}
        except CheckpointError as exc:
            problem, named = str(exc), set()
        missing = sorted(n for n in named - {None} if not (tmp / n).is_file())
        if missing:
            problem = (
                f"{', '.join(missing[:3])} written by other processes are not in {tmp} as rank 0 sees it: a sharded "
                "checkpoint needs one filesystem that every process writes to (give --out a shared folder)"
            )
    problem = dist.broadcast_object(problem, env)
    if problem:
        raise OSError(problem)


def verify(checkpoint: Path, env: dist.Distributed) -> None:
    """Check the shards against their checksums, each process a share of the files; a bad file is a
    ``CheckpointError`` on every process."""
    try:
        verify_sharded(checkpoint, rank=env.rank, world_size=env.world_size)
        problem = None
    except CheckpointError as exc:
        problem = str(exc)
    found = [p for p in dist.gather_objects(problem, env) if p is not None]
    if found:
        raise CheckpointError(found[0])


def _aliases(checkpoint: Path) -> dict[str, str]:
    aliases = read_json(checkpoint / RUN_FILE, folder=checkpoint).get("aliases", {})
    return aliases if isinstance(aliases, dict) else {}


def model_outline(checkpoint: Path) -> dict[str, torch.Tensor]:
    """The model's tensors as the index records them (shape and dtype, on the meta device, nothing read), tied
    aliases included: what the resume checks compare with the new model before any shard is read."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    metadata = read_index(checkpoint)
    outline = {}
    for key, item in metadata.state_dict_metadata.items():
        path = metadata.planner_data.get(key, ())
        if len(path) == 2 and path[0] == "model" and isinstance(item, TensorStorageMetadata):
            outline[path[1]] = torch.empty(item.size, dtype=item.properties.dtype, device="meta")
    for alias, kept in _aliases(checkpoint).items():
        if kept in outline:
            outline[alias] = outline[kept]
    return outline


def optimizer_outline(checkpoint: Path, *, verify: bool = True) -> dict[str, Any]:
    """The optimizer state as ``check_training_state`` reads it: the parameter groups and step counts read, the
    moments as meta tensors of their recorded shape and dtype (not read). ``verify``: check every shard first."""
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    if verify:
        verify_sharded(checkpoint)
    metadata = read_index(checkpoint)
    small, moments = set(), {}
    for key, item in metadata.state_dict_metadata.items():
        path = metadata.planner_data.get(key, ())
        if not path or path[0] != "optimizer":
            continue
        if isinstance(item, TensorStorageMetadata) and path[-1] != "step":
            moments[key] = (path, torch.empty(item.size, dtype=item.properties.dtype, device="meta"))
        else:
            small.add(key)
    state: dict[str, Any] = {}
    if small:
        try:
            dcp_read_keys(state, sharded_reader(checkpoint), small)
        except (Exception, CheckpointException) as exc:  # noqa: BLE001 - DCP reports a damaged shard with many exception types
            raise CheckpointError(
                f"{checkpoint}: the optimizer's parameter groups cannot be read from its shards (*{SHARD_SUFFIX}) "
                f"({type(exc).__name__}: {_first_line(exc)}): the checkpoint is damaged; use an earlier one"
            ) from None
    for path, tensor in moments.values():
        dcp_set_element(state, path, tensor)
    optimizer = state.get("optimizer", {})
    optimizer.setdefault("state", {})
    optimizer.setdefault("param_groups", [])
    return optimizer


def load_shards(
    checkpoint: Path, model: nn.Module, optimizer: torch.optim.Optimizer, aliases: dict[str, str], env: dist.Distributed
) -> None:
    """Load a sharded checkpoint into ``model`` (as wrapped for training) and ``optimizer``: each process reads the
    pieces its own state dicts hold (``dcp.load``), whatever mesh wrote them; weights that hold NaN or inf anywhere
    are a ``CheckpointError`` (before the optimizer state is set). A collective: all processes call it."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.state_dict import set_state_dict

    model_state, optimizer_state = sharded_state(model, optimizer, aliases)
    state = {"model": model_state, "optimizer": optimizer_state}
    try:
        with warnings.catch_warnings():  # one process: DCP warns that it reads without a process group, as asked
            warnings.filterwarnings("ignore", message="torch.distributed is disabled")
            dcp.load(state, storage_reader=sharded_reader(checkpoint), no_dist=not env.active)
    except (Exception, CheckpointException) as exc:  # noqa: BLE001 - DCP gathers every rank's failure into one
        raise CheckpointError(
            f"{checkpoint}: the shards do not fit this model and optimizer, or are damaged ({type(exc).__name__}: "
            f"{_first_line(exc)}); use the recipe the run was started with, or an earlier checkpoint folder"
        ) from None
    bad = nonfinite_anywhere(model_state, env)
    if bad:
        where = weights_file(checkpoint)
        raise CheckpointError(NONFINITE.format(where=where, count=len(bad), name=bad[0]))
    model_state = state["model"]
    for alias, kept in aliases.items():
        model_state[alias] = model_state[kept]
    set_state_dict(model, optimizer, model_state_dict=model_state, optim_state_dict=state["optimizer"])


def read_model_state(checkpoint: Path, aliases: dict[str, str]) -> dict[str, torch.Tensor]:
    """The weights of a sharded checkpoint, read whole into this process (CPU), tied ``aliases`` restored."""
    state = read_sharded(checkpoint, "model")
    for alias, kept in aliases.items():
        if kept not in state:
            raise CheckpointError(
                f"{checkpoint / SHARDED_METADATA} lacks {kept}, which {checkpoint / RUN_FILE} names as a tied weight"
            )
        state[alias] = state[kept]
    return state


def read_optimizer_state(checkpoint: Path) -> dict[str, Any]:
    """The optimizer state of a sharded checkpoint, read whole into this process (``{"state", "param_groups"}``)."""
    return read_sharded(checkpoint, "optimizer")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
