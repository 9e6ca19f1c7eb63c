"""How long a planned training step takes (FLOPs at a stated utilisation beside the roofline, communication
at the interconnect's bandwidth) and what serving fits beside the weights (KV caches, decoding roofline)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from .device_memory import CONTEXT, RESERVE

if TYPE_CHECKING:
    from .accelerators import Accelerator
    from .device_memory import _Layout
    from .steptrace import StepTrace

SERVING_DTYPE_BYTES = 2
"""Serving holds bf16 weights and a bf16 KV cache."""


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
    """Compute and data-parallel communication overlapped (DDP's buckets, FSDP2's prefetching): the longer of
    the two; then the tensor-parallel all-reduces, which the next layer waits for."""
    tokens_per_s: float
    tokens: float | None = None
    seconds: float | None = None
    """Time for ``tokens`` tokens."""
    tensor_comm_bytes: float = 0.0
    """Bytes each device sends per step in its tensor-parallel group's all-reduces (activations and their
    gradients, ``zoo.analysis.tensorplan.Collectives``)."""
    tensor_comm_s: float = 0.0

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
    cross_bytes_per_sequence: int = 0
    """An encoder-decoder's cross-attention cache of one sequence: the keys and values of its source (an audio
    encoder's whole window of frames; else a source as long as the target)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    tensor_bytes = _tensor_comm_bytes(trace, layout, gpus, batch)
    tensor_s = tensor_bytes / (acc.link if layout.tensor <= acc.per_node else acc.network)
    step_s = max(compute_s, comm_s) + tensor_s
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
        tensor_comm_bytes=tensor_bytes,
        tensor_comm_s=tensor_s,
        _peak=peak,
    )


def _comm_bytes(trace: StepTrace, acc: Accelerator, layout: _Layout, gpus: int) -> tuple[float, float]:
    """(intra-node, inter-node) bytes each device sends per optimizer step in data parallelism, ring collectives.

    DDP all-reduces the fp32 gradients once per step: 2 (N-1)/N of them. FSDP all-gathers the weights in
    the forward of every micro-step and again in the backward (the root's stay gathered), and
    reduce-scatters the gradients once: (N-1)/N each. Hybrid (or a mesh with replicate > 1): that within a
    shard group, plus an all-reduce of the gradient shards across the replicas. Under tensor parallelism the
    bytes are those of the rank's share, over the ``gpus / tensor`` data-parallel peers. A ring that spans nodes
    runs at the network's bandwidth (a shard group spans nodes when ``shard x tensor`` devices do).
    """
    data = gpus // layout.tensor
    if data == 1:
        return 0.0, 0.0
    grads, weights = float(trace.grad_bytes), float(trace.weights)
    blocks = float(sum(trace.block_params.values()))
    spans = gpus > acc.per_node
    if layout.strategy == "ddp":
        volume = 2 * (data - 1) / data * grads
        return (0.0, volume) if spans else (volume, 0.0)
    n = layout.shards
    share = (n - 1) / n
    volume = share * (weights + blocks) * layout.grad_accum + share * grads
    shard_spans = n * layout.tensor > acc.per_node
    sharded = (0.0, volume) if shard_spans else (volume, 0.0)
    replicas = data // n
    if replicas == 1:
        return sharded
    across = 2 * (replicas - 1) / replicas * grads / n
    return (sharded[0], sharded[1] + across) if spans else (sharded[0] + across, sharded[1])


def _tensor_comm_bytes(trace: StepTrace, layout: _Layout, gpus: int, batch: int) -> float:
    """Bytes each device sends per optimizer step in its tensor-parallel group: ring all-reduces, 2 (T-1)/T of
    each, of the activations (4 B in fp32, 2 B in bf16 / fp16) that ``trace.collectives`` counts per token."""
    c, T = trace.collectives, layout.tensor
    if c is None or T == 1:
        return 0.0
    tokens = batch // (gpus // T) * trace.seq_len
    element = 4 if trace.precision == "fp32" else 2
    return 2 * (T - 1) / T * (c.forward + c.backward) * tokens * element * layout.grad_accum


def _serving(trace: StepTrace, acc: Accelerator, gpus: int, seq_len: int) -> Serving:
    from .memory import memory_estimate

    est = memory_estimate(trace.parts, parameters=trace.parameters, batch=1, seq_len=seq_len, max_len=None)
    weights = trace.parameters * SERVING_DTYPE_BYTES
    per_token = est.kv_bytes_per_token
    if per_token is None:
        return Serving(weights, None, seq_len, None, None)
    usable = gpus * max(0.0, acc.memory_bytes - (CONTEXT if acc.gpu else 0)) * (1 - (RESERVE if acc.gpu else 0))
    free = usable - weights
    source = next((p.context for p in trace.parts if p.cross and p.context is not None), seq_len)
    cross = (est.cross_kv_bytes_per_source_token or 0) * source
    per_sequence = per_token * seq_len + (est.state_bytes_per_sequence or 0) + cross
    sequences = max(0, int(free // per_sequence)) if per_sequence else 0
    read = weights + sequences * per_sequence
    decode = sequences / (read / (gpus * acc.bandwidth)) if sequences else 0.0
    return Serving(weights, per_token, seq_len, sequences, decode, cross)
