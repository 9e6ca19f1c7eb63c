"""``zoo plan``: does a training step fit, how long do T tokens take, what does serving need, before renting GPUs.

    from zoo.analysis.plan import plan
    p = plan("llama-3.2-1b", gpu="h100-80gb", gpus=8, batch=64, seq_len=4096, checkpointing="every")
    p.memory.needed, p.max_micro_batch, p.time.tokens_per_day, p.serving.sequences

Memory per device comes from a training step traced on fake tensors (``zoo.analysis.steptrace``: what each
component keeps for backward, at the precision and checkpointing asked, composed over the whole stack);
only the distribution over devices is a formula:

=============  =======================================================================================
none / ddp     every device holds the weights, gradients and AdamW state (DDP: one more copy of the
               gradients, its all-reduce buckets) and the activations of its micro-batch
fsdp full      weights, gradients and AdamW state divided by the devices; the layers outside the blocks
               (embeddings, head, final norm) stay gathered for the whole step (FSDP2's root), each block
               is gathered while it runs (forward: itself; backward: itself and the next one, prefetched)
               and its gradients stay whole until their reduce-scatter
fsdp hybrid    as full within a node (``per_node`` devices), replicated across nodes
offload        the sharded weights, gradients and AdamW state live in CPU memory (FSDP2 CPUOffloadPolicy)
=============  =======================================================================================

On top of the traced tensor bytes, a GPU needs the caching allocator's reserve (``RESERVE`` of the peak:
reserved-but-free blocks, fragmentation) and the CUDA context with its library workspaces (``CONTEXT``);
both are stated assumptions, not traced. Time comes from FLOPs (``zoo.analysis.flops``: 3x the forward,
plus the forward of what checkpointing recomputes) at a stated utilisation of the accelerator's dense bf16
peak, beside the roofline (utilisation 1), and the communication volume at the interconnect's bandwidth.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from zoo.errors import PlanError

if TYPE_CHECKING:
    from zoo.recipe import Recipe

    from .steptrace import StepTrace, Timeline, UnitShare

__all__ = [
    "CONTEXT",
    "RESERVE",
    "Accelerator",
    "Memory",
    "Plan",
    "Serving",
    "StepTime",
    "accelerators",
    "get_accelerator",
    "plan",
]

RESERVE = 0.10
"""The caching allocator's reserve on a GPU, as a share of the peak tensor bytes (typically 5-15% in training)."""
CONTEXT = 1 << 30
"""The CUDA context, cuBLAS / NCCL workspaces and kernels: memory a GPU process uses outside tensors."""
DEFAULT_MFU = 0.4
"""Utilisation of the dense bf16 peak that step times assume unless told (well-tuned dense training: 0.35-0.5)."""
GPU_GRANULARITY = 512
"""The CUDA caching allocator rounds every block up to 512 bytes."""
SERVING_DTYPE_BYTES = 2
"""Serving holds bf16 weights and a bf16 KV cache."""
MAX_MICRO_BATCH = 1 << 24


@dataclass(frozen=True)
class Accelerator:
    """One device type of ``zoo/data/accelerators.yaml``: its memory, compute, bandwidths and their sources."""

    name: str
    title: str
    memory: str
    """The datasheet's capacity, as written there."""
    memory_bytes: int
    """Usable bytes (what the driver reports; the machine's memory for ``cpu``)."""
    flops: float
    """Dense bf16 FLOP/s."""
    bandwidth: float
    link: float
    """Intra-node interconnect, bytes/s per device and direction."""
    network: float
    """Inter-node bandwidth, bytes/s per device and direction."""
    per_node: int
    source: dict[str, str]

    @property
    def gpu(self) -> bool:
        return self.name != "cpu"


@cache
def accelerators() -> dict[str, Accelerator]:
    """Every accelerator zoo knows, by name (``zoo/data/accelerators.yaml``)."""
    import yaml

    path = Path(__file__).resolve().parent.parent / "data" / "accelerators.yaml"
    data = yaml.safe_load(path.read_text())
    out = {}
    for name, spec in data.items():
        gib = spec["memory_gib"]
        memory = round(gib * 2**30) if gib is not None else _machine_memory()
        out[name] = Accelerator(
            name=name,
            title=spec["title"],
            memory=spec["memory"],
            memory_bytes=memory,
            flops=float(spec["flops"]),
            bandwidth=float(spec["bandwidth"]),
            link=float(spec["link"]),
            network=float(spec["network"]),
            per_node=int(spec["per_node"]),
            source=dict(spec["source"]),
        )
    return out


def _machine_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def get_accelerator(name: str) -> Accelerator:
    """The accelerator called ``name`` (case-insensitive).

    Raises:
        PlanError: an unknown name; the message lists the known ones.
    """
    known = accelerators()
    found = known.get(name.strip().lower())
    if found is None:
        listed = ", ".join(f"{n} ({a.title})" for n, a in known.items())
        raise PlanError(f"unknown accelerator {name!r}: --gpu takes one of {listed}")
    return found


@dataclass(frozen=True)
class Memory:
    """Bytes per device at the peak of a training step."""

    weights: int
    gradients: int
    optimizer: int
    gathered: int
    """Weights FSDP gathers whole while their layers run (the root's and one or two blocks')."""
    activations: int
    """Made in the forward and still alive at the peak: what the backward will read."""
    casts: int
    """Of what the forward keeps, the bf16 / fp16 copies of the fp32 weights autocast made (2 B per parameter
    in bf16 over the blocks whose activations are kept): the backward's inputs of each matmul."""
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


@dataclass(frozen=True)
class StepTime:
    """One optimizer step: its FLOPs, time and throughput, and what T tokens take."""

    tokens_per_step: int
    flops: float
    """Model FLOPs of the step (3x the forward)."""
    recompute_flops: float
    """The forward FLOPs that activation checkpointing runs again."""
    mfu: float
    """The utilisation assumed: the share of the devices' dense peak the executed FLOPs reach."""
    compute_s: float
    roofline_s: float
    """The same FLOPs at the full dense peak: no step can be faster."""
    comm_bytes: float
    """Bytes each device sends per step (all-reduce, all-gather, reduce-scatter), intra- and inter-node."""
    comm_s: float
    step_s: float
    """Compute and communication overlapped (DDP's buckets, FSDP2's prefetching): the longer of the two."""
    tokens_per_s: float
    tokens: float | None = None
    seconds: float | None = None
    """Time for ``tokens`` tokens."""

    @property
    def tokens_per_day(self) -> float:
        return self.tokens_per_s * 86400

    @property
    def model_mfu(self) -> float:
        """Model FLOPs per second / the devices' peak, at ``step_s`` (below ``mfu`` when recomputing)."""
        return self.flops / self.step_s / self._peak if self.step_s > 0 else 0.0

    _peak: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if not k.startswith("_")}
        return {**d, "tokens_per_day": self.tokens_per_day, "model_mfu": self.model_mfu}


@dataclass(frozen=True)
class Serving:
    """Inference beside bf16 weights spread over the devices: KV cache and concurrent sequences."""

    weights: int
    kv_bytes_per_token: int | None
    """None: the model keeps no KV cache (not a generative decoder)."""
    seq_len: int
    sequences: int | None
    """Sequences of ``seq_len`` tokens whose KV caches fit beside the weights on all devices together."""
    decode_tokens_per_s: float | None
    """The memory-bandwidth roofline of decoding that many sequences: weights and caches read once per token."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Plan:
    """What ``zoo plan`` answers for one recipe on ``gpus`` devices of one accelerator."""

    recipe: str
    accelerator: Accelerator
    gpus: int
    batch: int
    micro_batch: int
    grad_accum: int
    seq_len: int
    precision: str
    checkpointing: str
    checkpoint_every: int | None
    strategy: str
    """none (one device), ddp or fsdp."""
    sharding: str | None
    offload: bool
    parameters: int
    memory: Memory
    fits: bool
    max_micro_batch: int
    """The largest micro-batch per device whose step fits (0: none)."""
    units: list[UnitShare]
    """What each unit keeps for backward, at ``micro_batch``."""
    time: StepTime
    serving: Serving
    notes: list[str] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    """What would make a step that does not fit fit."""

    @property
    def available(self) -> int:
        return self.accelerator.memory_bytes

    def error(self) -> str | None:
        """Why this plan cannot train (None when it can)."""
        where = f"{self.gpus} x {self.accelerator.name}"
        m = self.memory
        if self.max_micro_batch == 0:
            what = (
                f"{self.recipe} does not fit on {where} even at micro-batch 1: a device needs "
                f"{_gib(m.needed)} (weights {_gib(m.weights)}, gradients {_gib(m.gradients)}, optimizer "
                f"{_gib(m.optimizer)}, activations and temporaries {_gib(m.activations + m.casts + m.temporaries)}"
                f" (of which {m.casts / 2**30:.2f} GiB {self.precision} copies of weights), gathered weights "
                f"{_gib(m.gathered)}, reserve "
                f"{_gib(m.reserve)}) of its {_gib(self.available)}"
            )
            return what + (": " + "; ".join(self.advice) if self.advice else "")
        return None

    def check(self) -> None:
        """Raise ``PlanError`` when not even micro-batch 1 fits."""
        message = self.error()
        if message is not None:
            raise PlanError(message)

    def to_dict(self) -> dict[str, Any]:
        return {
            "recipe": self.recipe,
            "accelerator": asdict(self.accelerator),
            "gpus": self.gpus,
            "batch": self.batch,
            "micro_batch": self.micro_batch,
            "grad_accum": self.grad_accum,
            "seq_len": self.seq_len,
            "precision": self.precision,
            "checkpointing": self.checkpointing,
            "checkpoint_every": self.checkpoint_every,
            "strategy": self.strategy,
            "sharding": self.sharding,
            "offload": self.offload,
            "parameters": self.parameters,
            "memory": {**self.memory.to_dict(), "available": self.available},
            "fits": self.fits,
            "max_micro_batch": self.max_micro_batch,
            "activations_per_unit": [asdict(u) for u in self.units],
            "time": self.time.to_dict(),
            "serving": self.serving.to_dict(),
            "assumptions": {"reserve": RESERVE, "context_bytes": CONTEXT if self.accelerator.gpu else 0},
            "notes": self.notes,
            "advice": self.advice,
            "error": self.error(),
        }


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


# ------------------------------------------------------------------------------------------- memory


@dataclass(frozen=True)
class _Layout:
    """How the traced step is spread over the devices."""

    strategy: str  # none | ddp | fsdp
    shards: int = 1  # devices one copy of the weights is sharded over
    offload: bool = False
    grad_accum: int = 1


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
        grads, gathered = _fsdp_grads_and_gathered(trace, timeline, layout)
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


def _fsdp_grads_and_gathered(trace: StepTrace, timeline: Timeline, layout: _Layout) -> tuple[np.ndarray, np.ndarray]:
    """Per operator, under FSDP2: the gradient bytes on a device and the weights it holds gathered.

    A block's gradients are whole until its backward ends (then reduce-scattered: 1/shards stays); the
    root's (every weight outside the blocks) until the backward ends; with gradient accumulation, all stay
    whole (no reduce-scatter before the last micro-step). Gathered: the root's weights through forward and
    backward; a block's while it runs, with the next block of the backward prefetched; at a gather (a block's
    start) and a reduce-scatter (its backward's end), one more copy of the block for the flat buffers.
    """
    n = layout.shards
    segs = timeline.segments
    seg = timeline.segment
    g = timeline.gradients.astype(np.float64)
    root = float(trace.weights - sum(trace.block_params.values()))
    k = len(segs)
    done = np.zeros(k)  # gradient bytes already reduce-scattered when each segment begins
    gathered_seg = np.zeros(k)
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
        gathered_seg[j] = root
        if name in trace.block_params:
            gathered_seg[j] += params
            if phase == "backward":
                nxt = following[j]
                gathered_seg[j] += segs[nxt][2] if nxt is not None else 0.0
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
            gathered[starts[j]] += params
            if phase == "backward":
                gathered[ends[j] - 1] += params
    return grads, gathered


# ------------------------------------------------------------------------------------------- time


def _step_time(
    trace: StepTrace, acc: Accelerator, layout: _Layout, gpus: int, batch: int, mfu: float, tokens: float | None
) -> StepTime:
    from .flops import flop_estimate

    seq = trace.seq_len
    est = flop_estimate(trace.parts, seq_len=seq, batch=batch)
    flops = float(est.train_per_batch) * layout.grad_accum
    recompute = float(flop_estimate(trace.recomputed, seq_len=seq, batch=batch).forward_per_batch) * layout.grad_accum
    peak = gpus * acc.flops
    compute_s = (flops + recompute) / (peak * mfu)
    roofline_s = (flops + recompute) / peak
    intra, inter = _comm_bytes(trace, acc, layout, gpus)
    comm_s = intra / acc.link + inter / acc.network
    step_s = max(compute_s, comm_s)
    per_step = batch * seq * layout.grad_accum
    tokens_per_s = per_step / step_s if step_s > 0 else 0.0
    return StepTime(
        tokens_per_step=per_step,
        flops=flops,
        recompute_flops=recompute,
        mfu=mfu,
        compute_s=compute_s,
        roofline_s=roofline_s,
        comm_bytes=intra + inter,
        comm_s=comm_s,
        step_s=step_s,
        tokens_per_s=tokens_per_s,
        tokens=tokens,
        seconds=tokens / tokens_per_s if tokens and tokens_per_s else None,
        _peak=peak,
    )


def _comm_bytes(trace: StepTrace, acc: Accelerator, layout: _Layout, gpus: int) -> tuple[float, float]:
    """(intra-node, inter-node) bytes each device sends per optimizer step, ring collectives.

    DDP all-reduces the fp32 gradients once per step: 2 (N-1)/N of them. FSDP all-gathers the weights in
    the forward of every micro-step and again in the backward (the root's stay gathered), and
    reduce-scatters the gradients once: (N-1)/N each. Hybrid: that within a node, plus an all-reduce of the
    gradient shards across nodes. A ring that spans nodes runs at the network's bandwidth.
    """
    if gpus == 1:
        return 0.0, 0.0
    grads, weights = float(trace.grad_bytes), float(trace.weights)
    blocks = float(sum(trace.block_params.values()))
    spans = gpus > acc.per_node
    if layout.strategy == "ddp":
        volume = 2 * (gpus - 1) / gpus * grads
        return (0.0, volume) if spans else (volume, 0.0)
    n = layout.shards
    share = (n - 1) / n
    volume = share * (weights + blocks) * layout.grad_accum + share * grads
    if n == gpus:
        return (0.0, volume) if spans else (volume, 0.0)
    replicas = gpus // n
    return volume, 2 * (replicas - 1) / replicas * grads / n


# ------------------------------------------------------------------------------------------- serving


def _serving(trace: StepTrace, acc: Accelerator, gpus: int, seq_len: int) -> Serving:
    from .memory import memory_estimate

    est = memory_estimate(trace.parts, parameters=trace.parameters, batch=1, seq_len=seq_len, max_len=None)
    weights = trace.parameters * SERVING_DTYPE_BYTES
    per_token = est.kv_bytes_per_token
    if per_token is None:
        return Serving(weights, None, seq_len, None, None)
    usable = gpus * max(0.0, acc.memory_bytes - (CONTEXT if acc.gpu else 0)) * (1 - (RESERVE if acc.gpu else 0))
    free = usable - weights
    per_sequence = per_token * seq_len + (est.state_bytes_per_sequence or 0)
    sequences = max(0, int(free // per_sequence)) if per_sequence else 0
    read = weights + sequences * per_sequence
    decode = sequences / (read / (gpus * acc.bandwidth)) if sequences else 0.0
    return Serving(weights, per_token, seq_len, sequences, decode)


# ------------------------------------------------------------------------------------------- the plan


def plan(
    recipe: str | Path | dict[str, Any] | Recipe,
    *,
    gpu: str = "h100-80gb",
    gpus: int = 1,
    batch: int | None = None,
    seq_len: int | None = None,
    precision: str | None = None,
    checkpointing: str | None = None,
    checkpoint_every: int | None = None,
    parallel: str | None = None,
    sharding: str | None = None,
    offload: bool | None = None,
    mfu: float = DEFAULT_MFU,
    tokens: float | None = None,
) -> Plan:
    """Plan training (and serving) ``recipe`` on ``gpus`` devices of type ``gpu``.

    Unset options come from the recipe's ``train:`` section: ``batch`` (all devices together, per
    micro-step, as ``train.batch_size``), ``seq_len``, ``precision`` (auto: bf16 on a GPU, fp32 on the CPU),
    ``checkpointing`` / ``checkpoint_every``, ``parallel`` (auto: FSDP when 16 bytes per parameter exceed 80% of
    a device, as the trainer decides), ``sharding``, ``offload``.

    Raises:
        PlanError: an unknown accelerator, fewer than one device, a batch that does not split over the
            devices, a sequence longer than the positions, a utilisation outside (0, 1], a component that
            cannot be traced. A model that does not fit is a ``Plan`` with ``fits`` False (``Plan.check``).
        RecipeError: an invalid recipe or option.
    """
    from zoo.recipe import Recipe, load_recipe, positions_fit

    from .steptrace import compose, trace_step

    acc = get_accelerator(gpu)
    if not isinstance(gpus, int) or gpus < 1:
        raise PlanError(f"--gpus must be at least 1 (got {gpus}): the devices the batch is split over")
    if not 0 < mfu <= 1:
        raise PlanError(f"--mfu must be in (0, 1] (got {mfu}): the share of the dense bf16 peak a step reaches")
    if tokens is not None and tokens <= 0:
        raise PlanError(f"--tokens must be positive (got {tokens})")
    overrides: dict[str, Any] = {}
    for key, value in (
        ("train.activation_checkpointing", checkpointing),
        ("train.checkpoint_every", checkpoint_every),
        ("train.parallel", parallel),
        ("train.fsdp_sharding", sharding),
        ("train.fsdp_offload", offload),
    ):
        if value is not None:
            overrides[key] = value
    if checkpointing is not None and checkpointing != "every_k" and checkpoint_every is None:
        overrides["train.checkpoint_every"] = None
    r = recipe if isinstance(recipe, Recipe) and not overrides else load_recipe(recipe, **overrides)
    t = r.train
    batch = t.batch_size if batch is None else batch
    if batch < 1:
        raise PlanError(f"--batch must be at least 1 (got {batch})")
    if batch % gpus:
        raise PlanError(
            f"--batch {batch} is the batch of all {gpus} devices together (as train.batch_size) and must split "
            f"evenly over them: use a multiple of {gpus}"
        )
    vision = r.architecture == "vit"
    seq = (r.max_len or 1) if vision else (seq_len or t.seq_len or r.max_len or 0)
    notes: list[str] = []
    if vision and seq_len is not None and seq_len != seq:
        notes.append(f"a vision model sees {seq} tokens per image (patches + CLS): --seq is that")
    if seq < 1:
        raise PlanError(f"{r.name}: give --seq (the recipe has no max_len)")
    longest = seq + 1 if r.architecture == "encoder-decoder" else seq
    if not vision and positions_fit(r, longest) is not None:
        raise PlanError(
            f"--seq {seq} needs {longest} positions, beyond the {r.positional.type} position table of max_len "
            f"{r.max_len}: lower --seq or raise max_len"
        )
    prec = precision or t.precision
    if prec == "auto":
        prec = "bf16" if acc.gpu else "fp32"
    if prec not in ("fp32", "bf16", "fp16"):
        raise PlanError(f"--precision {prec!r}: choose fp32, bf16 or fp16")
    micro = batch // gpus
    trace = trace_step(
        r,
        micro_batch=micro,
        seq_len=seq,
        precision=prec,
        checkpointing=t.activation_checkpointing,
        checkpoint_every=t.checkpoint_every,
        granularity=GPU_GRANULARITY if acc.gpu else 1,
    )
    timeline = compose(trace)
    strategy = _strategy(trace, acc, gpus, t.parallel)
    sharding_used = t.fsdp_sharding if strategy == "fsdp" else None
    shards = (min(gpus, acc.per_node) if t.fsdp_sharding == "hybrid" else gpus) if strategy == "fsdp" else 1
    if strategy == "fsdp" and t.fsdp_sharding == "hybrid" and gpus % shards:
        raise PlanError(f"hybrid sharding groups {acc.per_node} devices per node: --gpus {gpus} is not a multiple")
    layout = _Layout(strategy, shards, t.fsdp_offload and strategy == "fsdp", t.grad_accum)
    if strategy == "fsdp" and t.grad_accum > 1:
        notes.append(
            "FSDP with grad_accum > 1 keeps whole gradients between micro-steps (no reduce-scatter until the last)"
        )
    memory = _device_memory(trace, timeline, layout, 1.0, acc.gpu)
    fits = memory.needed <= acc.memory_bytes
    largest = _largest_micro_batch(trace, timeline, layout, acc)
    time = _step_time(trace, acc, layout, gpus, batch, mfu, tokens)
    notes += trace.notes
    if acc.gpu:
        notes.append(
            "traced with the CPU's kernels and autocast lists; on the GPU, attention keeps what its fused kernel "
            "keeps (output and log-sum-exp, as on the CPU)"
        )
    result = Plan(
        recipe=r.name,
        accelerator=acc,
        gpus=gpus,
        batch=batch,
        micro_batch=micro,
        grad_accum=t.grad_accum,
        seq_len=seq,
        precision=prec,
        checkpointing=t.activation_checkpointing,
        checkpoint_every=t.checkpoint_every,
        strategy=strategy,
        sharding=sharding_used,
        offload=layout.offload,
        parameters=trace.parameters,
        memory=memory,
        fits=fits,
        max_micro_batch=largest,
        units=trace.units,
        time=time,
        serving=_serving(trace, acc, gpus, seq),
        notes=notes,
    )
    if largest == 0:
        result.advice = _advice(trace, timeline, layout, acc, gpus)
    elif not fits:
        result.advice = [
            f"micro-batch {micro} does not fit; {largest} does: --batch {largest * gpus} with train.grad_accum "
            f"{math.ceil(micro / largest) * t.grad_accum} keeps about the same tokens per step"
        ]
    return result


def _strategy(trace: StepTrace, acc: Accelerator, gpus: int, parallel: str) -> str:
    """What the trainer would use: ``parallel`` as set, or auto's rule (``zoo.train.distributed``)."""
    from zoo.train.distributed import BYTES_PER_PARAMETER

    if gpus == 1:
        return "none"
    if parallel != "auto":
        return parallel
    if not acc.gpu:
        return "ddp"
    return "fsdp" if trace.parameters * BYTES_PER_PARAMETER > 0.8 * acc.memory_bytes else "ddp"


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


def _advice(trace: StepTrace, timeline: Timeline, layout: _Layout, acc: Accelerator, gpus: int) -> list[str]:
    """What would make micro-batch 1 fit, tried on the same trace (checkpointing needs a new trace)."""
    scale = 1 / trace.micro_batch
    out = []

    def needed(lay: _Layout) -> int:
        return _device_memory(trace, timeline, lay, scale, acc.gpu).needed

    if layout.strategy != "fsdp" and gpus > 1:
        lay = _Layout("fsdp", gpus, False, layout.grad_accum)
        if needed(lay) <= acc.memory_bytes:
            out.append(f"--parallel fsdp (shards weights, gradients and optimizer state: {_gib(needed(lay))})")
    if layout.strategy == "fsdp" and not layout.offload:
        lay = _Layout("fsdp", layout.shards, True, layout.grad_accum)
        if needed(lay) <= acc.memory_bytes:
            out.append(f"--offload (FSDP2 CPU offload of the shards: {_gib(needed(lay))} per device)")
    if trace.checkpointing == "none":
        out.append("--checkpointing every (keeps only each block's input; plan again with it, and --offload)")
    for more in (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096):
        n = gpus * more
        if needed(_Layout("fsdp", n, False, 1)) <= acc.memory_bytes:
            out.append(f"--gpus {n} with --parallel fsdp (micro-batch 1: --batch {n})")
            break
    if not out:
        out.append("a device with more memory (--gpu)")
    return out
