"""Memory per device of a traced training step, as the step is spread over the devices (one device, DDP,
FSDP2 full or hybrid, CPU offload), with the allocator's reserve and the CUDA context on a GPU; and the
largest micro-batch whose step fits. The layouts are those of ``zoo.analysis.plan``'s table."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .accelerators import Accelerator
    from .steptrace import StepTrace
    from .timeline import Timeline

RESERVE = 0.10
"""The caching allocator's reserve on a GPU, as a share of the peak tensor bytes (typically 5-15% in training)."""
CONTEXT = 1 << 30
"""The CUDA context, cuBLAS / NCCL workspaces and kernels: memory a GPU process uses outside tensors."""
MAX_MICRO_BATCH = 1 << 24
LOW_PRECISION = {"bf16": 0.5, "fp16": 0.5}
"""Bytes of a weight gathered by FSDP2's ``MixedPrecisionPolicy`` per byte of its fp32 shard."""


@dataclass(frozen=True)
class Memory:
    """Bytes per device at the peak of a training step."""

    weights: int
    gradients: int
    optimizer: int
    gathered: int
    """Weights FSDP gathers whole while their layers run (the root's and one or two blocks'; in bf16 / fp16 the
    blocks' are counted in ``casts``), with its flat all-gather and reduce-scatter buffers."""
    activations: int
    """Made in the forward and still alive at the peak: what the backward will read."""
    casts: int
    """The bf16 / fp16 copies of the fp32 weights. One device or DDP: those autocast made and the forward keeps
    (2 B per parameter in bf16 over the blocks whose activations are kept), the backward's inputs of each
    matmul. FSDP (``MixedPrecisionPolicy``, no autocast): the blocks' weights gathered in bf16 / fp16 while they
    run, one block in the forward, two in the backward (itself and the next, prefetched)."""
    temporaries: int
    """Activation gradients, recomputed activations, the optimizer's scratch: made and freed in the step."""
    reserve: int
    """The caching allocator's reserve (``RESERVE`` of the tensor peak) and the CUDA context."""
    offloaded: int = 0
    """Bytes kept in CPU memory instead (FSDP2 CPU offload): the shards of weights, gradients, AdamW state."""
    phase: str = ""
    """Where the peak falls: forward, backward or optimizer."""

    @property
    def peak(self) -> int:
        """Tensor bytes at the peak (what ``torch.cuda.max_memory_allocated`` measures)."""
        kept = self.activations + self.casts + self.temporaries
        return self.weights + self.gradients + self.optimizer + self.gathered + kept

    @property
    def needed(self) -> int:
        """What the device must have: the peak, the allocator's reserve and the context."""
        return self.peak + self.reserve

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "peak": self.peak, "needed": self.needed}


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


@dataclass(frozen=True)
class _Layout:
    """How the traced step is spread over the devices."""

    strategy: str  # none | ddp | fsdp
    shards: int = 1  # devices one copy of the (rank's share of the) weights is sharded over
    offload: bool = False
    grad_accum: int = 1
    tensor: int = 1  # devices each block is split over (the trace is one rank's share)


def _device_memory(trace: StepTrace, timeline: Timeline, layout: _Layout, scale: float, gpu: bool) -> Memory:
    """The peak per device when each device runs ``scale`` x the traced micro-batch, laid out as ``layout``."""
    g = timeline.gradients.astype(np.float64)
    act = timeline.activations * scale
    casts = timeline.casts.astype(np.float64)  # one copy of each weight, whatever the batch
    tmp = timeline.temporaries * scale
    weights, optimizer = float(trace.weights), float(trace.optimizer)
    gathered = np.zeros_like(g)
    extra_grads = 0.0
    offloaded = 0.0
    if layout.strategy == "fsdp":
        grads, gathered, blocks = _fsdp_grads_and_gathered(trace, timeline, layout)
        if trace.precision in LOW_PRECISION:  # the policy gathers the weights in low precision; no autocast
            casts = blocks * LOW_PRECISION[trace.precision]
        else:
            gathered = gathered + blocks
        n = layout.shards
        weights, optimizer = weights / n, optimizer / n
        g = grads
        if layout.offload:
            offloaded = weights + optimizer + trace.grad_bytes / n
            weights = optimizer = 0.0
    elif layout.strategy == "ddp":
        extra_grads = float(trace.grad_bytes)  # the all-reduce buckets: a second copy of every gradient
    total = g + act + casts + tmp + gathered
    if len(total) == 0:
        i, value = 0, 0.0
    else:
        i = int(np.argmax(total))
        value = float(total[i])
    peak = weights + optimizer + extra_grads + value
    reserve = RESERVE * peak + CONTEXT if gpu else 0.0
    phase = timeline.segments[int(timeline.segment[i])][1] if len(total) else ""
    return Memory(
        weights=round(weights),
        gradients=round(extra_grads + (g[i] if len(g) else 0)),
        optimizer=round(optimizer),
        gathered=round(gathered[i]) if len(gathered) else 0,
        activations=round(act[i]) if len(act) else 0,
        casts=round(casts[i]) if len(casts) else 0,
        temporaries=round(tmp[i]) if len(tmp) else 0,
        reserve=round(reserve),
        offloaded=round(offloaded),
        phase=phase,
    )


def _fsdp_grads_and_gathered(
    trace: StepTrace, timeline: Timeline, layout: _Layout
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per operator, under FSDP2: the gradient bytes on a device, the weights it holds gathered outside the
    blocks (with the flat buffers), and the blocks' weights it holds gathered, as fp32 bytes.

    A block's gradients are whole until its backward ends (then reduce-scattered: 1/shards stays); the
    root's (every weight outside the blocks) until the backward ends; with gradient accumulation, all stay
    whole (no reduce-scatter before the last micro-step). Gathered: the root's weights through forward and
    backward; a block's while it runs, with the next block of the backward prefetched; at a gather (a block's
    start) and a reduce-scatter (its backward's end), one more copy of the block for the flat buffers. In bf16 /
    fp16 the root's weights and the all-gather buffers are in that dtype (``MixedPrecisionPolicy``), the
    reduce-scatter's in fp32 (its ``reduce_dtype``).
    """
    n = layout.shards
    segs = timeline.segments
    seg = timeline.segment
    g = timeline.gradients.astype(np.float64)
    root = float(trace.weights - sum(trace.block_params.values()))
    k = len(segs)
    done = np.zeros(k)  # gradient bytes already reduce-scattered when each segment begins
    gathered_seg = np.zeros(k)
    blocks_seg = np.zeros(k)
    gather = LOW_PRECISION.get(trace.precision, 1.0)  # bytes gathered per fp32 byte of weight
    running = 0.0
    backward_blocks = [
        j for j, (name, phase, _) in enumerate(segs) if phase == "backward" and name in trace.block_params
    ]
    following = {
        j: (backward_blocks[i + 1] if i + 1 < len(backward_blocks) else None) for i, j in enumerate(backward_blocks)
    }
    starts = np.searchsorted(seg, np.arange(k))
    ends = np.searchsorted(seg, np.arange(k), side="right")
    for j, (name, phase, params) in enumerate(segs):
        done[j] = running
        if phase == "optimizer":
            continue
        gathered_seg[j] = root * gather
        if name in trace.block_params:
            blocks_seg[j] = params
            if phase == "backward":
                nxt = following[j]
                blocks_seg[j] += segs[nxt][2] if nxt is not None else 0.0
                running += timeline.segment_gradients[j + 1] - timeline.segment_gradients[j]
    grads = g.copy()
    if layout.grad_accum == 1:
        kept = 0.0 if layout.offload else 1 / n  # offloaded, the gradient shards go to CPU memory
        sharded = done[seg]
        grads = g - sharded + sharded * kept
        optimizer = np.array([segs[j][1] == "optimizer" for j in range(k)])[seg]
        grads[optimizer] = g[optimizer] * kept  # the root's reduce-scattered too by the end of the backward
    gathered = gathered_seg[seg].copy()
    for j, (name, phase, params) in enumerate(segs):  # the flat all-gather and reduce-scatter buffers
        if name in trace.block_params and ends[j] > starts[j]:
            gathered[starts[j]] += params * gather
            if phase == "backward":
                gathered[ends[j] - 1] += params
    return grads, gathered, blocks_seg[seg]


def _largest_micro_batch(trace: StepTrace, timeline: Timeline, layout: _Layout, acc: Accelerator) -> int:
    """The largest micro-batch per device whose step fits (activations scale with it; 0: not even 1)."""

    def fits(m: int) -> bool:
        memory = _device_memory(trace, timeline, layout, m / trace.micro_batch, acc.gpu)
        return memory.needed <= acc.memory_bytes

    if not fits(1):
        return 0
    low, high = 1, 2
    while high <= MAX_MICRO_BATCH and fits(high):
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low
