"""The device mesh a plan lays a step out on: ``--parallel auto|ddp|fsdp`` or ``--parallel replicate=R,shard=S,
tensor=T`` (any subset, missing ones 1), as ``train.parallel`` takes them (``zoo.recipe.training.MeshConfig``), and
the mesh each strategy name stands for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zoo.errors import PlanError

__all__ = ["DIMENSIONS", "mesh_dict", "mesh_flag", "mesh_strategy", "parse_parallel"]

DIMENSIONS = ("replicate", "shard", "tensor")
NAMES = ("auto", "ddp", "fsdp")
FORMAT = (
    "auto, ddp, fsdp, or a mesh such as replicate=2,shard=2,tensor=2 (any of the three; missing ones are 1; "
    "sequence=true for sequence parallelism)"
)


def parse_parallel(value: str | Mapping[str, Any] | Any) -> str | dict[str, int]:
    """``--parallel``'s text (or a mapping, or a ``MeshConfig``) as ``train.parallel`` takes it: a name, or a dict
    ``{replicate, shard, tensor}`` with every dimension.

    Raises:
        PlanError: an unknown name, dimension or a size that is not a whole number of at least 1.
    """
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    if isinstance(value, Mapping):
        items = [(str(k), v) for k, v in value.items()]
    else:
        text = str(value).strip()
        if text in NAMES:
            return text
        if "=" not in text:
            raise PlanError(f"--parallel {text!r}: give {FORMAT}")
        items = []
        for part in text.split(","):
            key, sep, size = part.partition("=")
            if not sep:
                raise PlanError(f"--parallel {text!r}: {part.strip()!r} is not dimension=size; give {FORMAT}")
            items.append((key.strip(), size.strip()))
    mesh: dict[str, Any] = dict.fromkeys(DIMENSIONS, 1)
    sequence = [v for k, v in items if k == "sequence"]
    items = [(k, v) for k, v in items if k != "sequence"]
    if sequence and str(sequence[-1]).strip().lower() not in ("true", "false"):
        raise PlanError(f"--parallel: sequence={sequence[-1]} must be true or false")
    if sequence and str(sequence[-1]).strip().lower() == "true":
        mesh["sequence"] = True
    seen: set[str] = set()
    for key, size in items:
        if key not in DIMENSIONS:
            raise PlanError(f"--parallel: unknown mesh dimension {key!r}; the mesh has {', '.join(DIMENSIONS)}")
        if key in seen:
            raise PlanError(f"--parallel: {key} is given twice")
        seen.add(key)
        try:
            number = int(size)
        except (TypeError, ValueError):
            number = 0
        if isinstance(size, float) or number < 1 or str(size).strip() != str(number):
            raise PlanError(f"--parallel: {key}={size} must be a whole number of at least 1")
        mesh[key] = number
    return mesh


def mesh_dict(strategy: str, gpus: int, sharding: str | None, per_node: int) -> dict[str, int]:
    """The mesh a strategy name stands for on ``gpus`` devices (as ``zoo.train.distributed.choose_layout``)."""
    if strategy == "ddp":
        return {"replicate": gpus, "shard": 1, "tensor": 1}
    if strategy == "fsdp":
        if sharding == "hybrid":
            shard = min(gpus, per_node)
            return {"replicate": gpus // shard, "shard": shard, "tensor": 1}
        return {"replicate": 1, "shard": gpus, "tensor": 1}
    return {"replicate": 1, "shard": 1, "tensor": 1}


def mesh_strategy(mesh: Mapping[str, int]) -> str:
    """The data-parallel wrapper the trainer uses on a mesh (``choose_layout``): FSDP2 when anything shards, or when
    tensor-parallel groups replicate (HSDP of shard 1), DDP for replicas alone, else none."""
    R, S, T = mesh["replicate"], mesh["shard"], mesh["tensor"]
    return "fsdp" if S > 1 or (T > 1 and R > 1) else "ddp" if R > 1 else "none"


def mesh_flag(mesh: Mapping[str, int]) -> str:
    """``--parallel``'s text for a mesh: the dimensions above 1 (``tensor=8,shard=2``), tensor first."""
    parts = [f"{k}={mesh[k]}" for k in ("tensor", "shard", "replicate") if mesh[k] > 1]
    parts += ["sequence=true"] if mesh.get("sequence") else []
    return ",".join(parts) or "replicate=1"
