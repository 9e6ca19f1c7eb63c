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
mesh           ``{replicate: R, shard: S, tensor: T}``: each block split over T devices (the step traced is
               that of one rank's share of the model, ``zoo.analysis.tensorplan``), then FSDP2 over S
               (HSDP with R > 1) of that share; each of the R x S data groups takes batch / (R x S)
=============  =======================================================================================

On top of the traced tensor bytes, a GPU needs the caching allocator's reserve (``RESERVE`` of the peak:
reserved-but-free blocks, fragmentation) and the CUDA context with its library workspaces (``CONTEXT``);
both are stated assumptions, not traced. Time comes from FLOPs (``zoo.analysis.flops``: 3x the forward,
plus the forward of what checkpointing recomputes) at a stated utilisation of the accelerator's dense bf16
peak, beside the roofline (utilisation 1), and the communication volume at the interconnect's bandwidth:
data-parallel collectives overlapped with compute, tensor-parallel all-reduces after it (each layer waits for its
own; ``zoo.analysis.tensorplan``).

The pieces: accelerators (``zoo.analysis.accelerators``), memory per device (``zoo.analysis.device_memory``),
step time and serving (``zoo.analysis.throughput``); this module puts them together in ``plan``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zoo.errors import PlanError

from .accelerators import Accelerator, accelerators, choose_accelerator, get_accelerator
from .advice import _advice
from .device_memory import CONTEXT, RESERVE, Memory, _device_memory, _gib, _largest_micro_batch, _Layout
from .mesh import mesh_dict, mesh_flag, mesh_strategy, parse_parallel
from .sequence import default_seq_len
from .throughput import Serving, StepTime, _serving, _step_time

if TYPE_CHECKING:
    from zoo.recipe import Recipe
    from zoo.recipe.training import MeshConfig

    from .steptrace import StepTrace
    from .timeline import UnitShare

__all__ = [
    "CONTEXT",
    "RESERVE",
    "Accelerator",
    "Memory",
    "Plan",
    "Serving",
    "StepTime",
    "accelerators",
    "choose_accelerator",
    "get_accelerator",
    "plan",
]

DEFAULT_MFU = 0.4
"""Utilisation of the dense bf16 peak that step times assume unless told (well-tuned dense training: 0.35-0.5)."""
GPU_GRANULARITY = 512
"""The CUDA caching allocator rounds every block up to 512 bytes."""


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
    mesh: dict[str, int]
    """The device mesh ``{replicate, shard, tensor}`` the step is laid out on (``strategy`` its data-parallel
    wrapper; a strategy's name stands for its mesh: ddp replicates over every device, fsdp shards over them)."""
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
    needed_at_one: int | None = None
    """Bytes a device needs at micro-batch 1, when even that does not fit and ``micro_batch`` is larger."""

    @property
    def available(self) -> int:
        return self.accelerator.memory_bytes

    def error(self) -> str | None:
        """Why this plan cannot train (None when it can)."""
        where = f"{self.gpus} x {self.accelerator.name}"
        m = self.memory
        if self.max_micro_batch == 0:
            one = f"; micro-batch 1 needs {_gib(self.needed_at_one)}" if self.needed_at_one else ""
            what = (
                f"{self.recipe} does not fit on {where}: at micro-batch {self.micro_batch} a device needs "
                f"{_gib(m.needed)} (weights {_gib(m.weights)}, gradients {_gib(m.gradients)}, optimizer "
                f"{_gib(m.optimizer)}, activations and temporaries {_gib(m.activations + m.casts + m.temporaries)}"
                f" (of which {m.casts / 2**30:.2f} GiB {self.precision} copies of weights)"
                + (f", gathered weights {_gib(m.gathered)}" if self.strategy == "fsdp" else "")
                + f", reserve {_gib(m.reserve)}) of its {_gib(self.available)}{one}"
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
            "mesh": self.mesh,
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


def plan(
    recipe: str | Path | dict[str, Any] | Recipe,
    *,
    gpu: str | Accelerator | None = None,
    gpu_spec: str | Path | None = None,
    gpus: int = 1,
    batch: int | None = None,
    seq_len: int | None = None,
    precision: str | None = None,
    checkpointing: str | None = None,
    checkpoint_every: int | None = None,
    parallel: str | dict[str, int] | MeshConfig | None = None,
    sharding: str | None = None,
    offload: bool | None = None,
    mfu: float = DEFAULT_MFU,
    tokens: float | None = None,
) -> Plan:
    """Plan training (and serving) ``recipe`` on ``gpus`` devices of type ``gpu``.

    ``gpu``: an ``Accelerator``, or a name (case-insensitive) among ``accelerators()`` and the entries of the
    YAML file ``gpu_spec``; None: the file's one entry, or ``h100-80gb`` without a file.

    Unset options come from the recipe's ``train:`` section: ``batch`` (all devices together, per
    micro-step, as ``train.batch_size``), ``seq_len`` (else 4096 capped at ``max_len``: ``default_seq_len``, said
    in the notes), ``precision`` (auto: bf16 on a GPU, fp32 on the CPU),
    ``checkpointing`` / ``checkpoint_every``, ``parallel`` (auto: FSDP when 16 bytes per parameter exceed 80% of
    a device, as the trainer decides; or a mesh ``{replicate, shard, tensor}``, a ``MeshConfig`` or the text
    ``replicate=2,shard=2,tensor=2``, whose product must be ``gpus``), ``sharding``, ``offload``.

    Raises:
        PlanError: an unknown accelerator or a bad ``gpu_spec`` file, fewer than one device, a batch that does
            not split over the devices, a sequence longer than the positions, a utilisation outside (0, 1], a
            component that cannot be traced, a mesh of another size than ``gpus``, a model that cannot split
            over the mesh's tensor dimension (in the trainer's words). A model that does not fit is a ``Plan``
            with ``fits`` False (``Plan.check``).
        RecipeError: an invalid recipe or option.
    """
    from zoo.recipe import Recipe, load_recipe, positions_fit

    from .steptrace import compose, trace_step

    acc = choose_accelerator(gpu, gpu_spec)
    if not isinstance(gpus, int) or gpus < 1:
        raise PlanError(f"--gpus must be at least 1 (got {gpus}): the devices the batch is split over")
    if not 0 < mfu <= 1:
        raise PlanError(f"--mfu must be in (0, 1] (got {mfu}): the share of the dense bf16 peak a step reaches")
    if tokens is not None and not (math.isfinite(tokens) and tokens > 0):
        raise PlanError(f"--tokens must be a positive finite number, such as 1e9 (got {tokens})")
    overrides: dict[str, Any] = {}
    for key, value in (
        ("train.activation_checkpointing", checkpointing),
        ("train.checkpoint_every", checkpoint_every),
        ("train.parallel", parse_parallel(parallel) if parallel is not None else None),
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
    mesh = None if isinstance(t.parallel, str) else t.parallel.model_dump(exclude={"sequence"})
    if mesh is not None and t.parallel.sequence:
        mesh["sequence"] = True
    if mesh is not None and t.parallel.world_size != gpus:
        size = t.parallel.world_size
        raise PlanError(
            f"--parallel {mesh_flag(mesh)} is a mesh of replicate x shard x tensor = {size} devices, and --gpus is "
            f"{gpus}: set --gpus {size}, or change the mesh to multiply to {gpus}"
        )
    groups = gpus if mesh is None else mesh["replicate"] * mesh["shard"]
    if batch % groups:
        whose = f"all {gpus} devices" if mesh is None else f"the {groups} data-parallel groups (replicate x shard)"
        raise PlanError(
            f"--batch {batch} is the batch of {whose} together (as train.batch_size) and must split "
            f"evenly over them: use a multiple of {groups}"
        )
    vision = r.architecture == "vit"
    if seq_len is not None and seq_len < 1:
        raise PlanError(f"--seq must be at least 1 (got {seq_len}): the tokens per sequence")
    default, why = default_seq_len(r)
    seq = default if vision or seq_len is None else seq_len  # a vision model sees its patches, whatever --seq says
    said = seq_len != seq and not (vision and seq_len is None)  # assumed, or --seq overruled
    notes: list[str] = [f"{seq:,} tokens per sequence: {why}"] if said else []
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
    micro = batch // groups
    tensor = 1 if mesh is None else mesh["tensor"]
    trace = trace_step(
        r,
        micro_batch=micro,
        seq_len=seq,
        precision=prec,
        checkpointing=t.activation_checkpointing,
        checkpoint_every=t.checkpoint_every,
        granularity=GPU_GRANULARITY if acc.gpu else 1,
        tensor=tensor,
    )
    timeline = compose(trace)
    if mesh is None:
        strategy = _strategy(trace, acc, gpus, t.parallel)
        sharding_used = t.fsdp_sharding if strategy == "fsdp" else None
        if strategy == "fsdp" and t.fsdp_sharding == "hybrid" and gpus % min(gpus, acc.per_node):
            raise PlanError(f"hybrid sharding groups {acc.per_node} devices per node: --gpus {gpus} is not a multiple")
        mesh = mesh_dict(strategy, gpus, sharding_used, acc.per_node)
    else:
        strategy = mesh_strategy(mesh)
        sharding_used = ("hybrid" if mesh["replicate"] > 1 else "full") if strategy == "fsdp" else None
    shards = mesh["shard"] if strategy == "fsdp" else 1
    layout = _Layout(strategy, shards, t.fsdp_offload and strategy == "fsdp", t.grad_accum, mesh["tensor"])
    notes += _precision_notes(strategy, prec)
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
        mesh=mesh,
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
    if tensor > 1:
        notes.append(
            f"tensor parallelism over {tensor} devices: traced as one rank's share of the model (its heads, FFN "
            f"width, experts and vocabulary rows / {tensor}, as each component's plan splits them; norms, positions, "
            "routers and the residual stream whole); its all-reduces add to the step time, not overlapped"
        )
    if mesh.get("sequence"):
        notes.append(
            "sequence parallelism is not traced: the figures are those of tensor parallelism alone, an upper bound "
            f"(it divides the blocks' norm, dropout and residual activations by {tensor}, and adds an all-gather "
            "before each attention and FFN)"
        )
    if largest == 0:
        result.advice = _advice(r, trace, timeline, layout, acc, gpus)
        if micro > 1:
            result.needed_at_one = _device_memory(trace, timeline, layout, 1 / micro, acc.gpu).needed
    elif not fits:
        result.advice = [
            f"micro-batch {micro} does not fit; {largest} does: --batch {largest * groups} with train.grad_accum "
            f"{math.ceil(micro / largest) * t.grad_accum} keeps about the same tokens per step"
        ]
    return result


def _precision_notes(strategy: str, precision: str) -> list[str]:
    """Which mixed precision the plan models: the trainer's (``zoo.train.distributed``)."""
    if precision == "fp32":
        return []
    if strategy == "fsdp":
        return [
            f"FSDP2 with MixedPrecisionPolicy(param_dtype={precision}, reduce_dtype=fp32) and no autocast, as the "
            f"trainer: the {precision} copies of weights are the blocks gathered in {precision} while they run (one "
            "in the forward; two in the backward, itself and the next, prefetched), not a copy of every weight; "
            "gradients are reduce-scattered in fp32"
        ]
    return [
        f"autocast to {precision}, as the trainer: its cached {precision} copies of the weights stay until the backward"
    ]


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
