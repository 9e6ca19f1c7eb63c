"""Several processes (GPUs, nodes) from the environment ``torchrun`` sets; one process otherwise.

The recipe does not change: ``train.batch_size`` is the batch of all processes together, each process
takes its slice of every batch, and gradients are averaged (DDP) or reduce-scattered (FSDP2), so a run on
N processes follows the single-process run up to floating-point summation order.

``parallel: auto`` picks DDP unless the weights, gradients and AdamW moments (16 bytes per parameter in
fp32) would not fit in 80% of one GPU, and then FSDP2 (``fully_shard`` on every block, then the model).

Precision: DDP and one process run the forward under ``torch.autocast``. FSDP2 does not: autocast's cached
casts of the gathered weights, saved for backward, would keep a bf16 copy of every weight on every device
until the backward. FSDP2 instead gathers the weights in bf16 / fp16 (``MixedPrecisionPolicy(param_dtype,
reduce_dtype=fp32)``, as torchtitan does), so the low-precision copies are those of the blocks in flight; the
fp32 shards stay the master weights and gradients are reduce-scattered in fp32.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from zoo.compat import flatten_mesh
from zoo.errors import TrainError

BYTES_PER_PARAMETER = 16  # fp32 weight + gradient + two AdamW moments


@dataclass(frozen=True)
class Distributed:
    """Where this process sits: rank, world size, its device, and how the model is replicated."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    owns_group: bool = False
    """True when ``setup`` created the process group (and ``teardown`` should end it)."""

    @property
    def active(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def pick_device(device: str) -> torch.device:
    """``auto`` is CUDA when present, else CPU; ``cuda`` without CUDA is an error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise TrainError("--device cuda was asked for, but this torch sees no CUDA device")
    if device not in ("cpu",) and not device.startswith("cuda"):
        raise TrainError(f"--device {device!r}: choose auto, cpu or cuda")
    return torch.device(device)


def process_ranks() -> tuple[int, int, int]:
    """``(rank, local_rank, world_size)`` from the environment torchrun sets; ``(0, 0, 1)`` for one process.

    With ``WORLD_SIZE`` unset or 1 the process is alone, whatever ``RANK`` and ``LOCAL_RANK`` say.

    Raises:
        TrainError: ``WORLD_SIZE`` > 1 without a ``RANK``.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1:
        return 0, 0, 1
    if "RANK" not in os.environ:
        raise TrainError(f"WORLD_SIZE is {world_size} but RANK is not set: start the processes with torchrun")
    return int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0")), world_size


def is_main_process() -> bool:
    """Rank 0 (or the only process): the one that reports and writes, as ``setup`` would decide."""
    return process_ranks()[0] == 0


def setup(device: str) -> Distributed:
    """Join the process group that torchrun describes (``WORLD_SIZE`` > 1), or stay single."""
    rank, local_rank, world_size = process_ranks()
    chosen = pick_device(device)
    if world_size == 1:
        return Distributed(device=chosen)
    if chosen.type == "cuda":
        chosen = torch.device("cuda", local_rank)
        torch.cuda.set_device(chosen)
    owns = not dist.is_initialized()
    if owns:
        dist.init_process_group("nccl" if chosen.type == "cuda" else "gloo")
    return Distributed(rank=rank, world_size=world_size, local_rank=local_rank, device=chosen, owns_group=owns)


@dataclass(frozen=True)
class Layout:
    """How the processes share the work: ``replicate x shard`` data-parallel groups, each of ``tensor`` processes
    that split every block (tensor innermost: rank ``r`` is in data group ``r // tensor``). ``strategy`` is the
    data-parallel wrapper: ``none`` (one data group), ``ddp`` or ``fsdp`` (FSDP2; HSDP with ``replicate > 1``)."""

    strategy: str = "none"
    replicate: int = 1
    shard: int = 1
    tensor: int = 1
    sequence: bool = False
    """The blocks hold 1/tensor of the sequence between their attention and FFN (sequence parallelism)."""

    @property
    def data(self) -> int:
        """Data-parallel groups: each takes its own slice of every batch."""
        return self.replicate * self.shard

    def data_rank(self, rank: int) -> int:
        return rank // self.tensor

    def __str__(self) -> str:
        return f"{{replicate: {self.replicate}, shard: {self.shard}, tensor: {self.tensor}}}"


def choose_layout(model: nn.Module, env: Distributed, parallel: Any, *, sharding: str = "full") -> Layout:
    """The layout of ``train.parallel``: ``auto``, ``ddp``, ``fsdp`` (``sharding`` full or hybrid), or a mesh
    ``{replicate, shard, tensor}`` whose product must be the number of processes torchrun started.

    Raises:
        TrainError: a mesh of another size than the world.
    """
    W = env.world_size
    if not isinstance(parallel, str):  # a MeshConfig
        if parallel.world_size != W:
            started = "one process (no torchrun)" if W == 1 else f"{W} processes"
            raise TrainError(
                f"train.parallel {parallel} needs replicate x shard x tensor = {parallel.world_size} processes, and "
                f"this run has {started}: start torchrun with --nproc-per-node {parallel.world_size} (all nodes "
                "together), or change the mesh to multiply to the number of processes"
            )
        R, S, T = parallel.replicate, parallel.shard, parallel.tensor
        strategy = "fsdp" if S > 1 or (T > 1 and R > 1) else "ddp" if R > 1 else "none"
        return Layout(strategy, R, S, T, parallel.sequence)
    if not env.active:
        return Layout()
    if parallel == "auto":
        parallel = "ddp"
        if env.device.type == "cuda":
            need = sum(p.numel() for p in model.parameters()) * BYTES_PER_PARAMETER
            parallel = "fsdp" if need > 0.8 * torch.cuda.get_device_properties(env.device).total_memory else "ddp"
    if parallel == "ddp":
        return Layout("ddp", replicate=W)
    if parallel != "fsdp":
        raise TrainError(f"unknown parallel strategy {parallel!r}")
    if sharding == "full":
        return Layout("fsdp", shard=W)
    if sharding != "hybrid":
        raise TrainError(f"fsdp_sharding {sharding!r}: choose full or hybrid")
    local = int(os.environ.get("LOCAL_WORLD_SIZE", W))
    if local < 1 or W % local:
        raise TrainError(
            f"fsdp_sharding hybrid shards within a node of LOCAL_WORLD_SIZE ({local}) processes, which must divide "
            f"the world size ({W}): start the same number of processes on every node"
        )
    return Layout("fsdp", replicate=W // local, shard=local)


def data_groups(parallel: Any, env: Distributed) -> int:
    """How many slices each batch is cut into: the mesh's ``replicate x shard``, or every process."""
    return env.world_size if isinstance(parallel, str) else parallel.replicate * parallel.shard


def data_group(mesh: Any, layout: Layout) -> Any:
    """The process group of this rank's data-parallel peers (the ranks that read other slices of each batch and
    hold the same part of the model), or None with one data group."""
    if layout.data == 1:
        return None
    if layout.tensor == 1:
        return dist.group.WORLD
    return flatten_mesh(mesh["replicate", "shard"], "data").get_group()


def device_mesh(env: Distributed, layout: Layout) -> Any:
    """The 3-D mesh ``(replicate, shard, tensor)`` of the layout, or None for one process."""
    if not env.active:
        return None
    from torch.distributed.device_mesh import init_device_mesh

    shape = (layout.replicate, layout.shard, layout.tensor)
    return init_device_mesh(env.device.type, shape, mesh_dim_names=("replicate", "shard", "tensor"))


def wrap(
    model: nn.Module,
    env: Distributed,
    layout: Layout,
    *,
    mesh: Any = None,
    offload: bool = False,
    param_dtype: torch.dtype | None = None,
) -> nn.Module:
    """The model as the training step calls it: itself, DDP around it, or sharded in place by FSDP2.

    FSDP2 shards over the mesh's ``shard`` dimension, and replicates over ``replicate`` (HSDP); a model that
    tensor parallelism has split (``zoo.train.tensor``) is sharded over the data dimensions only, its
    parameters becoming 2-D (data x tensor) DTensors. ``offload`` keeps the shards (weights, gradients, optimizer
    state) in CPU memory (``CPUOffloadPolicy``). ``param_dtype`` (bf16 / fp16; None: fp32): FSDP2 gathers the
    weights in it and reduce-scatters gradients in fp32 (``mixed_precision``), in place of autocast, which the
    trainer then leaves off.
    """
    if layout.strategy == "none":
        return model
    if layout.strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        # Routed experts that received no token this step have no gradient; DDP must be told to expect that.
        routed = any(hasattr(m, "aux_loss") for m in model.modules() if m is not model)
        device_ids = [env.device.index] if env.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=device_ids, find_unused_parameters=routed)
    if layout.strategy == "fsdp":
        from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy, fully_shard

        mesh = device_mesh(env, layout) if mesh is None else mesh
        data = mesh["replicate", "shard"] if layout.replicate > 1 else mesh["shard"]
        options: dict[str, Any] = {"mesh": data}
        options["offload_policy"] = (
            CPUOffloadPolicy(pin_memory=env.device.type == "cuda") if offload else OffloadPolicy()
        )
        options["mp_policy"] = mixed_precision(param_dtype)
        for stack in _stacks(model):
            for block in stack.blocks:
                fully_shard(block, **options)
        fully_shard(model, **options)
        return model
    raise TrainError(f"unknown parallel strategy {layout.strategy!r}")


def mixed_precision(param_dtype: torch.dtype | None) -> Any:
    """FSDP2's ``MixedPrecisionPolicy``: weights gathered in ``param_dtype``, gradients reduce-scattered in fp32,
    floating-point inputs of each sharded module cast to ``param_dtype``; None or fp32: everything in fp32."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if param_dtype is None or param_dtype == torch.float32:
        return MixedPrecisionPolicy()
    if param_dtype not in (torch.bfloat16, torch.float16):
        raise TrainError(f"FSDP mixed precision {param_dtype}: choose bf16, fp16 or fp32")
    return MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)


def _stacks(model: nn.Module) -> list[nn.Module]:
    """The modules holding ``blocks`` (the model itself, or an encoder-decoder's two stacks)."""
    return [m for m in model.modules() if isinstance(getattr(m, "blocks", None), nn.ModuleList)]


@contextmanager
def gradient_sync(model: nn.Module, strategy: str, sync: bool) -> Iterator[None]:
    """Skip the gradient all-reduce on micro-steps that are not the last of an optimizer step."""
    if strategy == "ddp" and not sync:
        with model.no_sync():
            yield
        return
    if strategy == "fsdp":
        model.set_requires_gradient_sync(sync)
    with nullcontext():
        yield


def all_reduce_sum(t: torch.Tensor, env: Distributed) -> torch.Tensor:
    if env.active:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def all_reduce_mean(t: torch.Tensor, env: Distributed) -> torch.Tensor:
    if env.active:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        t = t / env.world_size
    return t


def gather_objects(obj: Any, env: Distributed) -> list[Any]:
    """Every rank's ``obj`` (in rank order) on every rank."""
    if not env.active:
        return [obj]
    out: list[Any] = [None] * env.world_size
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj: Any, env: Distributed) -> Any:
    """Rank 0's ``obj`` on every rank."""
    if not env.active:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier(env: Distributed) -> None:
    if env.active:
        dist.barrier()


def teardown(env: Distributed, finished: bool = False) -> None:
    """End the process group this process joined. After a finished run every rank first waits for the others:
    a rank that tears its connections down while a peer still sends (the last checkpoint's gather) can abort
    that peer's process. After a failure there is no waiting, as a peer may be gone."""
    if env.owns_group and dist.is_initialized():
        if finished:
            dist.barrier()
        dist.destroy_process_group()


def full_state(model: nn.Module, optimizer: torch.optim.Optimizer, env: Distributed) -> tuple[dict, dict]:
    """Full (unsharded) model and optimizer state dicts, keyed by parameter name, on rank 0's CPU.

    The same format whatever the strategy, so a checkpoint written by 4 FSDP ranks resumes on one CPU.
    """
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    options = StateDictOptions(full_state_dict=True, cpu_offload=env.active)
    return get_model_state_dict(model, options=options), get_optimizer_state_dict(model, optimizer, options=options)


def load_full_state(
    model: nn.Module, optimizer: torch.optim.Optimizer, model_state: dict, optim_state: dict, env: Distributed
) -> None:
    """Load the full state dicts that ``full_state`` made (present on every rank) into model and optimizer."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    options = StateDictOptions(full_state_dict=True)
    set_model_state_dict(model, model_state, options=options)
    set_optimizer_state_dict(model, optimizer, optim_state, options=options)
