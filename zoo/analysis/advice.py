"""What ``zoo plan`` suggests when not even micro-batch 1 fits: FSDP, offload, checkpointing, and the ``--parallel``
meshes that fit (FSDP over every device, tensor parallelism within a node, ``tensor=T,shard=N`` across more nodes),
each with the bytes a device would need. A tensor size is suggested only where the model splits over it (the
components' own ``shard_tensor`` plans and their divisibility rules, run on the meta model)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zoo.errors import PlanError

from .device_memory import _device_memory, _gib, _Layout
from .mesh import mesh_flag

if TYPE_CHECKING:
    from zoo.recipe import Recipe

    from .accelerators import Accelerator
    from .steptrace import StepTrace
    from .timeline import Timeline

MORE = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
"""How many times the devices the advice tries."""


def _tensor_sizes(per_node: int) -> list[int]:
    """Tensor sizes worth trying: powers of two up to a node (tensor parallelism stays within one)."""
    sizes, t = [], 2
    while t <= per_node:
        sizes.append(t)
        t *= 2
    return sizes


class _Traces:
    """The step of one rank's share at micro-batch 1 for each tensor size, traced once (None: cannot split)."""

    def __init__(self, recipe: Recipe, trace: StepTrace, timeline: Timeline) -> None:
        self.recipe, self.trace = recipe, trace
        self.done: dict[int, tuple[StepTrace, Timeline] | None] = {trace.tensor: (trace, timeline)}

    def __call__(self, tensor: int) -> tuple[StepTrace, Timeline] | None:
        if tensor not in self.done:
            from .steptrace import compose, trace_step

            t = self.trace
            try:
                traced = trace_step(
                    self.recipe,
                    micro_batch=1,
                    seq_len=t.seq_len,
                    precision=t.precision,
                    checkpointing=t.checkpointing,
                    checkpoint_every=t.checkpoint_every,
                    granularity=t.granularity,
                    tensor=tensor,
                )
            except PlanError:
                self.done[tensor] = None
            else:
                self.done[tensor] = (traced, compose(traced))
        return self.done[tensor]


def _advice(
    recipe: Recipe, trace: StepTrace, timeline: Timeline, layout: _Layout, acc: Accelerator, gpus: int
) -> list[str]:
    """What would make micro-batch 1 fit (see the module docstring); checkpointing needs a new plan."""
    traces = _Traces(recipe, trace, timeline)
    out = []

    def needed(lay: _Layout) -> int | None:
        traced = traces(lay.tensor)
        if traced is None:
            return None
        t, tl = traced
        return _device_memory(t, tl, lay, 1 / t.micro_batch, acc.gpu).needed

    def fits(lay: _Layout) -> int | None:
        n = needed(lay)
        return n if n is not None and n <= acc.memory_bytes else None

    plain = layout.tensor == 1
    if plain and layout.strategy != "fsdp" and gpus > 1:
        n = fits(_Layout("fsdp", gpus, False, layout.grad_accum))
        if n is not None:
            out.append(f"--parallel fsdp (shards weights, gradients and optimizer state: {_gib(n)})")
    if layout.strategy == "fsdp" and not layout.offload:
        n = fits(_Layout("fsdp", layout.shards, True, layout.grad_accum, layout.tensor))
        if n is not None:
            out.append(f"--offload (FSDP2 CPU offload of the shards: {_gib(n)} per device)")
    if trace.checkpointing == "none":
        out.append("--checkpointing every (keeps only each block's input; plan again with it, and --offload)")
    if not plain and gpus > 1:
        n = fits(_Layout("fsdp", gpus, False, layout.grad_accum))
        if n is not None:
            out.append(f"--parallel shard={gpus} (FSDP2 over every device, no tensor parallelism: {_gib(n)})")
    for t in _tensor_sizes(min(acc.per_node, gpus)):
        if gpus % t or t == layout.tensor:
            continue
        shard = gpus // t
        n = fits(_Layout("fsdp" if shard > 1 else "none", shard, False, layout.grad_accum, t))
        if n is not None:
            mesh = {"replicate": 1, "shard": shard, "tensor": t}
            out.append(
                f"--parallel {mesh_flag(mesh)} (each block split over {t} devices, FSDP2 over {shard}: {_gib(n)}"
                f" per device at micro-batch 1, --batch {shard})"
            )
            break
    for more in MORE:
        n_gpus = gpus * more
        found = None
        for t in [1, *_tensor_sizes(acc.per_node)]:
            shard = n_gpus // t
            n = fits(_Layout("fsdp" if shard > 1 else "none", shard, False, 1, t))
            if n is not None:
                found = (t, shard, n)
                break
        if found is not None:
            t, shard, n = found
            if t == 1:
                out.append(f"--gpus {n_gpus} with --parallel fsdp (micro-batch 1: --batch {n_gpus})")
            else:
                mesh = mesh_flag({"replicate": 1, "shard": shard, "tensor": t})
                out.append(f"--gpus {n_gpus} with --parallel {mesh} (micro-batch 1: --batch {shard}: {_gib(n)})")
            break
    if not out:
        out.append("a device with more memory (--gpu)")
    return out
