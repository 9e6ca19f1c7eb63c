"""A training step traced on fake tensors, block by block, and composed into the whole model's memory timeline.

The memory a step needs is not a formula here: the components say it themselves, by running. The recipe's
model is built on the meta device; one block of each kind (same components, same configs, same
checkpointing) is kept, with the embedding, the head and the loss, and its weights become fake tensors
(``zoo.analysis.metatensor``: shapes and dtypes, no memory, dispatched as CPU tensors). One training step of
the trainer (autocast at the precision, the objective's loss, backward, gradient clipping, fused AdamW's
operators, ``zero_grad``) runs on it under ``LiveBytes``, which records the live bytes after every operator
and divides the step into segments: each unit's forward, its backward (checkpointed blocks recompute
there), the optimizer.

``compose`` then lays the segments out for the whole model: every block of the stack is its kind's segment,
forward in order and backward in reverse, each starting where the previous one ended. Weights and optimizer
state come from the full model's parameters (dtype, count, tied once). What the trace leaves out:

* data-dependent sizes: an MoE's tokens per expert are taken balanced (``T · top_k / num_experts``);
* kernels' own workspaces outside tensors (cuBLAS, flash-attention scratch), the CUDA context, and the
  caching allocator's fragmentation: ``zoo.analysis.plan`` adds those as a stated reserve;
* the trace runs CPU kernels: on a GPU, attention's saved tensors are those of the CUDA kernel torch picks
  (flash / memory-efficient attention: the output and a log-sum-exp, as on the CPU) and autocast's CUDA op
  lists differ slightly from the CPU's.

Activations and temporaries scale with the micro-batch (checked by tracing at two sizes in the tests);
gradients do not, so one trace gives the peak at any micro-batch.

The reduced model is made in ``zoo.analysis.stepmodel``, the composition is ``zoo.analysis.timeline``.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .stepmodel import (
    BLOCK,
    _full_kinds,
    _FusedAdamW,
    _nonzero_share,
    _param_bytes,
    _recomputed,
    _reduce,
    _to_fake,
    _unique,
    _units,
)
from .timeline import Timeline, UnitShare, _unit_shares, compose

if TYPE_CHECKING:
    import torch
    from torch import nn

    from zoo.recipe import Recipe

    from .live import Segment
    from .parts import Part
    from .tensorplan import Collectives

__all__ = ["StepTrace", "Timeline", "UnitShare", "compose", "example_batch", "step_loss", "trace_step"]


@dataclass
class StepTrace:
    """One traced training step of the reduced model, and what is needed to lay it out for the full one."""

    recipe: Recipe
    micro_batch: int
    seq_len: int
    precision: str
    checkpointing: str
    checkpoint_every: int | None
    granularity: int
    weights: int
    """Bytes of the full model's parameters and buffers (tied weights once), each rounded to ``granularity``."""
    optimizer: int
    """Bytes of the AdamW state of the full model (two moments and a step per parameter)."""
    parameters: int
    grad_bytes: int
    """Bytes of all parameter gradients (one per trainable parameter)."""
    block_params: dict[str, int]
    """Weight bytes of every block of the full model, by path."""
    full_blocks: dict[str, list[str]]
    """For each stack (path prefix, '' for a single-stack model): the kind (a reduced block's path) of each block."""
    segments: list[Segment]
    end: tuple[int, int, int, int]
    """(gradients, activations, casts, temporaries) live at the end of the traced step."""
    reduced_weights: int
    reduced_optimizer: int
    """What the tracker counted for the reduced model: a check of the formulas above."""
    traced_peak: int
    """The reduced model's own peak (weights and optimizer state of the reduced model included)."""
    notes: list[str] = field(default_factory=list)
    units: list[UnitShare] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)
    """The full model's components and their declared costs (FLOPs, KV cache)."""
    recomputed: list[Part] = field(default_factory=list)
    """The parts that activation checkpointing runs forward a second time, in the backward."""
    tensor: int = 1
    """Ranks each block is split over (tensor parallelism): the trace is of rank 0's share of the model."""
    collectives: Collectives | None = None
    """What a tensor-parallel group all-reduces per token of a micro-step (None: no tensor parallelism)."""


def _autocast_dtype(precision: str) -> Any:
    import torch

    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def example_batch(recipe: Recipe, objective: str, batch: int, seq_len: int) -> dict[str, torch.Tensor]:
    """A batch of the shapes and dtypes the objective's ``batch`` gives the model (values are not used)."""
    import torch

    if objective == "causal_lm":
        return {
            "input_ids": torch.zeros(batch, seq_len, dtype=torch.long),
            "targets": torch.zeros(batch, seq_len, dtype=torch.long),
        }
    if objective == "masked_lm":
        return {
            "input_ids": torch.zeros(batch, seq_len, dtype=torch.long),
            "labels": torch.zeros(batch, seq_len, dtype=torch.long),
        }
    if objective == "classification":
        return {
            "input_ids": torch.zeros(batch, seq_len, dtype=torch.long),
            "attention_mask": torch.ones(batch, seq_len, dtype=torch.bool),
            "labels": torch.zeros(batch, dtype=torch.long),
        }
    if objective == "image_classification":
        size, channels = recipe.image_size or 0, recipe.num_channels or 3
        return {"images": torch.zeros(batch, channels, size, size), "labels": torch.zeros(batch, dtype=torch.long)}
    if objective == "contrastive":  # as many captions as images
        vision = recipe.vision
        size, channels = vision.image_size or 0, vision.num_channels or 3
        return {
            "input_ids": torch.zeros(batch, seq_len, dtype=torch.long),
            "attention_mask": torch.ones(batch, seq_len, dtype=torch.bool),
            "images": torch.zeros(batch, channels, size, size),
            "labels": torch.zeros(batch, dtype=torch.long),
        }
    audio = recipe.encoder_embedding
    if objective == "seq2seq" and audio is not None and not getattr(type(audio), "token_input", True):
        return {  # an encoder that hears audio: its whole window of log-mel frames, then the target's tokens
            "input_ids": torch.zeros(batch, audio.num_mel_bins, 2 * audio.frames),
            "labels": torch.zeros(batch, seq_len + 1, dtype=torch.long),
        }
    if objective == "seq2seq":
        return {
            "input_ids": torch.zeros(batch, seq_len, dtype=torch.long),
            "attention_mask": torch.ones(batch, seq_len, dtype=torch.bool),
            "labels": torch.zeros(batch, seq_len + 1, dtype=torch.long),  # room for [eos], as the objective
        }
    raise ValueError(f"no example batch for objective {objective!r}")


def step_loss(objective: str, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The loss ``zoo.train.objectives`` computes for ``objective`` (causal LM: all L positions, no shifted copy)."""
    if objective == "causal_lm":
        out = model(batch["input_ids"])
        loss = model.head.loss(out.logits, batch["targets"])
        return loss + out.aux_loss if out.aux_loss is not None else loss
    return model(**batch).loss


def trace_step(
    recipe: Recipe,
    *,
    micro_batch: int,
    seq_len: int,
    precision: str = "fp32",
    checkpointing: str = "none",
    checkpoint_every: int | None = None,
    granularity: int = 1,
    whole: bool = False,
    tensor: int = 1,
) -> StepTrace:
    """Trace one training step of ``recipe``'s model on fake tensors (see the module docstring).

    ``whole`` traces every block instead of one of each kind (slower; to check ``compose``). ``tensor`` > 1: the
    model one rank holds when each block splits over ``tensor`` ranks (``zoo.analysis.tensorplan``); weights,
    gradients, optimizer state and activations are then that rank's, ``parameters`` and ``parts`` the whole
    model's.

    Raises:
        PlanError: a component that cannot run on fake tensors, or that cannot split over ``tensor`` ranks.
    """
    import torch

    from zoo.architectures.blocks import set_activation_checkpointing
    from zoo.builder import build
    from zoo.compat import import_dynamo
    from zoo.errors import PlanError
    from zoo.train.objectives import objective_name
    from zoo.train.optim import autocast, parameter_groups

    from .live import LiveBytes
    from .metatensor import MetaMode
    from .parts import model_parts

    model = build(recipe, device="meta")
    set_activation_checkpointing(model, checkpointing, checkpoint_every)
    parts = model_parts(model)
    recomputed = [p for p in parts if _recomputed(model, p.path)]
    parameters = sum(p.numel() for p in _unique(model.parameters()))
    reduces = None
    if tensor > 1:  # the rank's share of the model, split as the trainer splits it
        from .tensorplan import collectives, split_model

        reduces = collectives(split_model(model, tensor), lambda path: _recomputed(model, path))
    params = _unique(model.parameters())
    trainable = [p for p in params if p.requires_grad]
    weights = _param_bytes(params + _unique(model.buffers()), granularity)
    step_bytes = -(-4 // granularity) * granularity  # fused AdamW: one fp32 step count per parameter
    optimizer_bytes = 2 * _param_bytes(trainable, granularity) + step_bytes * len(trainable)
    grad_bytes = _param_bytes(trainable, granularity)
    block_params = {
        path: _param_bytes(_unique(m.parameters()), granularity)
        for path, m in model.named_modules()
        if BLOCK.match(path)
    }
    full_blocks = {stack: list(kinds) for stack, kinds in _full_kinds(model).items()} if whole else _reduce(model)
    objective = objective_name(recipe)
    amp = _autocast_dtype(precision)
    notes: list[str] = []
    if checkpointing != "none":  # torch.utils.checkpoint reads torch._dynamo's config: import it outside the
        import_dynamo()  # modes (tensors it makes at import would be fake and counted)
    was_enabled = gc.isenabled()
    gc.disable()  # every storage freed by reference counting, at the same operator in every trace
    try:
        with MetaMode():  # entered first: LiveBytes, inside it, sees every operator before it runs on meta
            _to_fake(model)
            model.train()
            optimizer = _FusedAdamW(parameter_groups(model, recipe.train.weight_decay))
            for p in model.parameters():  # the state exists before the measured step, as from step 2 on
                p.grad = torch.zeros_like(p)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            share, (handles, unplanned) = _nonzero_share(model)
            live = LiveBytes(
                model, optimizer, units=_units(model), granularity=granularity, nonzero_share=share, record=True
            )
            try:
                with live:
                    batch = example_batch(recipe, objective, micro_batch, seq_len)
                    with autocast("cpu", amp, checkpointing) if amp is not None else _null():
                        loss = step_loss(objective, model, batch)
                    (loss / recipe.train.grad_accum).backward()
                    if recipe.train.clip_grad is not None:
                        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.train.clip_grad)
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
                    del loss, batch
            finally:
                for h in handles:
                    h.remove()
    except (RuntimeError, TypeError, ValueError, NotImplementedError, AssertionError) as exc:
        raise PlanError(
            f"{recipe.name}: tracing a training step on fake tensors failed ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}); the plan runs every component on fake tensors "
            "(no data-dependent Python branches, no .item())"
        ) from exc
    finally:
        if was_enabled:
            gc.enable()
    if unplanned:
        notes.append("a data-dependent size outside a router was taken at one half of its elements")
    if any(getattr(m, "num_experts", None) for m in model.modules()):
        notes.append("tokens per expert taken balanced (T · top_k / num_experts each)")
    c = live.by_category
    trace = StepTrace(
        recipe=recipe,
        micro_batch=micro_batch,
        seq_len=seq_len,
        precision=precision,
        checkpointing=checkpointing,
        checkpoint_every=checkpoint_every,
        granularity=granularity,
        weights=weights,
        optimizer=optimizer_bytes,
        parameters=parameters,
        grad_bytes=grad_bytes,
        block_params=block_params,
        full_blocks=full_blocks,
        segments=live.segments,
        end=(c["gradients"], c["activations"], c["casts"], c["temporaries"]),
        reduced_weights=c["weights"],
        reduced_optimizer=c["optimizer"],
        traced_peak=live.peak,
        notes=notes,
        parts=parts,
        recomputed=recomputed,
        tensor=tensor,
        collectives=reduces,
    )
    trace.units = _unit_shares(trace)
    return trace


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: Any) -> None:
        return None
