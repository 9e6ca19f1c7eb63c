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
"""

from __future__ import annotations

import gc
import re
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch
    from torch import nn

    from zoo.recipe import Recipe

    from .live import Segment
    from .parts import Part

__all__ = ["StepTrace", "Timeline", "UnitShare", "compose", "example_batch", "step_loss", "trace_step"]

BLOCK = re.compile(r"^(?P<stack>(?:.*\.)?)blocks\.(?P<index>\d+)$")


@dataclass(frozen=True)
class UnitShare:
    """What one unit of the model keeps for backward in the forward pass, at the traced micro-batch."""

    name: str
    """``embedding``, ``blocks.0-31`` (a run of blocks of one kind), ``head and loss``..."""
    count: int
    """How many units this row stands for (blocks of one kind)."""
    saved_each: int
    """Bytes each one keeps after its forward (what the backward reads), casts of weights included."""
    casts_each: int
    """Of which low-precision copies of its weights (autocast)."""
    params_each: int
    """Weight bytes of each one (FSDP gathers them whole while it runs)."""


@dataclass
class Timeline:
    """The whole model's step, one entry per operator: live bytes beside the weights and optimizer state."""

    gradients: np.ndarray
    activations: np.ndarray
    casts: np.ndarray
    temporaries: np.ndarray
    segment: np.ndarray
    """Index into ``segments`` of each operator."""
    segments: list[tuple[str | None, str, int]]
    """(unit of the full model, phase, weight bytes gathered while it runs under FSDP: the block's)."""
    grad_start: np.ndarray
    """Gradient bytes when each operator's segment began (FSDP has sharded those by then)."""
    segment_gradients: list[int]
    """Gradient bytes when each segment began, and at the end of the step (one more entry)."""

    @property
    def total(self) -> np.ndarray:
        """Live bytes beside the weights and the optimizer state, after every operator."""
        return self.gradients + self.activations + self.casts + self.temporaries


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


def _units(model: nn.Module) -> dict[str, nn.Module]:
    """The parts a step is divided by: every block, and the model's own children that are not stacks."""
    from torch import nn

    from zoo.architectures.blocks import stacks

    holders = {id(m) for m in stacks(model)}
    units: dict[str, nn.Module] = {}
    for name, child in model.named_children():
        if id(child) not in holders and not isinstance(child, nn.ModuleList):
            units[name] = child
    for path, module in model.named_modules():
        if BLOCK.match(path):
            units[path] = module
    return units


def _signature(model: nn.Module, path: str, block: nn.Module) -> tuple:
    """Blocks with the same signature have the same memory: the same components, configs, checkpointing."""
    from zoo.architectures.blocks import CHECKPOINT_FLAG

    comps = []
    for where, made in getattr(model, "zoo_components", {}).items():
        if where.startswith(path + "."):
            ctx = replace(made.ctx, layer_idx=0) if made.ctx is not None else None
            comps.append((where[len(path) :], made.kind, made.name, repr(made.config), repr(ctx)))
    attention = getattr(block, "attention", None)
    selective = attention is not None and "forward" in vars(attention)  # checkpointed attention (selective)
    return (tuple(comps), repr(block), getattr(block, CHECKPOINT_FLAG, False), selective)


def _param_bytes(tensors: list[torch.Tensor], granularity: int) -> int:
    def rounded(n: int) -> int:
        return -(-n // granularity) * granularity

    return sum(rounded(t.numel() * t.element_size()) for t in tensors)


def _unique(tensors: Any) -> list[torch.Tensor]:
    seen: dict[int, torch.Tensor] = {}
    for t in tensors:
        seen.setdefault(id(t), t)
    return list(seen.values())


def _reduce(model: nn.Module) -> dict[str, list[str]]:
    """Keep one block of each kind in every stack (in place); return each full stack's blocks as kinds."""
    from torch import nn

    from zoo.architectures.blocks import collect_aux_losses, stacks

    full: dict[str, list[str]] = {}
    prefix = {id(m): name for name, m in model.named_modules()}
    for stack in stacks(model):
        path = prefix[id(stack)]
        stem = f"{path}.blocks" if path else "blocks"
        kinds: dict[tuple, int] = {}
        kept: list[nn.Module] = []
        order: list[int] = []
        for i, block in enumerate(stack.blocks):
            sig = _signature(model, f"{stem}.{i}", block)
            if sig not in kinds:
                kinds[sig] = len(kept)
                kept.append(block)
            order.append(kinds[sig])
        stack.blocks = nn.ModuleList(kept)
        full[f"{path}." if path else ""] = [f"{stem}.{k}" for k in order]
    for module in model.modules():
        if hasattr(module, "_aux_modules"):
            module._aux_modules = collect_aux_losses(module)
    return full


def _to_fake(model: nn.Module) -> None:
    """Replace the meta weights and buffers with fake CPU ones (under an active ``MetaMode``), ties kept."""
    import torch
    from torch import nn

    memo: dict[int, torch.Tensor] = {}
    for module in model.modules():
        for name, p in list(module._parameters.items()):
            if p is not None:
                if id(p) not in memo:
                    memo[id(p)] = nn.Parameter(torch.empty(p.shape, dtype=p.dtype), requires_grad=p.requires_grad)
                module._parameters[name] = memo[id(p)]
        for name, b in list(module._buffers.items()):
            if b is not None:
                if id(b) not in memo:
                    memo[id(b)] = torch.zeros(b.shape, dtype=b.dtype)
                module._buffers[name] = memo[id(b)]
        for name, value in list(vars(module).items()):
            if isinstance(value, torch.Tensor) and value.device.type == "meta":
                setattr(module, name, torch.zeros(value.shape, dtype=value.dtype))


class _FusedAdamW:
    """What ``torch.optim.AdamW(fused=True)`` does to memory, for the trace; torch's own optimizer imports
    ``torch._dynamo`` when it is made and at every step (seconds of start-up, more than the trace).

    The same state (two moments like each parameter and a float32 step count each, made by the first step),
    the same operators in its step (``_foreach_add_`` on the step counts, ``_fused_adamw_``: in place), and the
    step hooks ``LiveBytes`` registers. The trainer's real AdamW is what the tests measure it against.
    """

    def __init__(self, groups: list[dict[str, Any]]) -> None:
        self.param_groups = groups
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}
        self._hooks: dict[str, OrderedDict[int, Any]] = {"pre": OrderedDict(), "post": OrderedDict()}

    def _register(self, when: str, hook: Any) -> Any:
        from torch.utils.hooks import RemovableHandle

        handle = RemovableHandle(self._hooks[when])
        self._hooks[when][handle.id] = hook
        return handle

    def register_step_pre_hook(self, hook: Any) -> Any:
        return self._register("pre", hook)

    def register_step_post_hook(self, hook: Any) -> Any:
        return self._register("post", hook)

    def step(self) -> None:
        import torch

        for hook in list(self._hooks["pre"].values()):
            hook(self, (), {})
        with torch.no_grad():
            for group in self.param_groups:
                by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if p not in self.state:
                        self.state[p] = {
                            "step": torch.zeros((), dtype=torch.float32, device=p.device),
                            "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                            "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
                        }
                    by_dtype.setdefault(p.dtype, []).append(p)
                for params in by_dtype.values():
                    state = [self.state[p] for p in params]
                    steps = [s["step"] for s in state]
                    torch._foreach_add_(steps, 1)
                    torch._fused_adamw_(
                        params,
                        [p.grad for p in params],
                        [s["exp_avg"] for s in state],
                        [s["exp_avg_sq"] for s in state],
                        [],
                        steps,
                        amsgrad=False,
                        lr=1e-3,
                        beta1=0.9,
                        beta2=0.999,
                        weight_decay=group.get("weight_decay", 0.0),
                        eps=1e-8,
                        maximize=False,
                    )
        for hook in list(self._hooks["post"].values()):
            hook(self, (), {})

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None


def _nonzero_share(model: nn.Module) -> tuple[Any, list[Any]]:
    """A callable for ``LiveBytes(nonzero_share=...)``: inside a router (a module with ``num_experts``), the
    balanced share ``1 / num_experts``; elsewhere one half (noted: it should not happen)."""
    active: list[float] = []
    seen: list[bool] = []

    def share() -> float:
        if active:
            return active[-1]
        seen.append(True)
        return 0.5

    def leave(module: nn.Module, args: Any, output: Any) -> None:
        active.pop()

    handles = []
    for module in model.modules():
        experts = getattr(module, "num_experts", None)
        if isinstance(experts, int) and experts > 0:
            handles.append(module.register_forward_pre_hook(lambda m, a, s=1.0 / experts: active.append(s)))
            handles.append(module.register_forward_hook(leave))
    return share, [handles, seen]


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
) -> StepTrace:
    """Trace one training step of ``recipe``'s model on fake tensors (see the module docstring).

    ``whole`` traces every block instead of one of each kind (slower; to check ``compose``).

    Raises:
        PlanError: a component that cannot run on fake tensors.
    """
    import torch

    from zoo.architectures.blocks import set_activation_checkpointing
    from zoo.builder import build
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
        import torch._dynamo  # noqa: F401  modes (tensors it makes at import would be fake and counted)
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
        parameters=sum(p.numel() for p in params),
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
    )
    trace.units = _unit_shares(trace)
    return trace


def _recomputed(model: nn.Module, path: str) -> bool:
    """Whether activation checkpointing recomputes the component at ``path`` (its block, or its attention)."""
    from zoo.architectures.blocks import CHECKPOINT_FLAG

    module = model
    for name in path.split("."):
        module = getattr(module, name, None)
        if module is None:
            return False
        if getattr(module, CHECKPOINT_FLAG, False) or "forward" in vars(module):
            return True
    return False


def _full_kinds(model: nn.Module) -> dict[str, list[str]]:
    from zoo.architectures.blocks import stacks

    prefix = {id(m): name for name, m in model.named_modules()}
    out = {}
    for stack in stacks(model):
        path = prefix[id(stack)]
        stem = f"{path}.blocks" if path else "blocks"
        out[f"{path}." if path else ""] = [f"{stem}.{i}" for i in range(len(stack.blocks))]
    return out


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: Any) -> None:
        return None


# ------------------------------------------------------------------------------------------- composition


@dataclass
class _Piece:
    unit: str | None
    phase: str
    start: tuple[int, int, int, int]
    end: tuple[int, int, int, int]
    values: list[np.ndarray]  # gradients, activations, casts, temporaries after each operator


def _pieces(trace: StepTrace) -> list[_Piece]:
    """The recorded segments with their end values, gaps between two blocks of a stack merged into the first."""
    segs = trace.segments
    pieces: list[_Piece] = []
    for i, s in enumerate(segs):
        values = [np.asarray(v, dtype=np.int64) for v in (s.gradients, s.activations, s.casts, s.temporaries)]
        pieces.append(_Piece(s.unit, s.phase, s.start, segs[i + 1].start if i + 1 < len(segs) else trace.end, values))
    merged: list[_Piece] = []
    for i, p in enumerate(pieces):
        prev = merged[-1] if merged else None
        nxt = next((q for q in pieces[i + 1 :] if q.unit is not None), None)
        if (
            prev is not None
            and prev.phase == p.phase
            and (p.unit is None or p.unit == prev.unit)
            and _stack_of(prev.unit) is not None
            and (p.unit == prev.unit or (nxt is not None and _stack_of(nxt.unit) == _stack_of(prev.unit)))
        ):
            prev.values = [np.concatenate([a, b]) for a, b in zip(prev.values, p.values, strict=True)]
            prev.end = p.end
            continue
        merged.append(p)
    return merged


def _stack_of(unit: str | None) -> str | None:
    if unit is None:
        return None
    m = BLOCK.match(unit)
    return m.group("stack") if m else None


def compose(trace: StepTrace) -> Timeline:
    """The whole model's timeline from the reduced model's trace (see the module docstring)."""
    pieces = _pieces(trace)
    layout: list[_Piece | tuple[str, str]] = []  # a piece, or (stack, phase): the place of that stack's run
    runs: dict[tuple[str, str], dict[str, _Piece]] = {}
    for p in pieces:
        stack = _stack_of(p.unit)
        if stack is None:
            layout.append(p)
            continue
        key = (stack, p.phase)
        if key not in runs:
            runs[key] = {}
            layout.append(key)
        runs[key][p.unit] = p
    order: list[tuple[str | None, _Piece]] = []
    for item in layout:
        if isinstance(item, _Piece):
            order.append((item.unit, item))
            continue
        stack, phase = item
        kinds = trace.full_blocks[stack]
        names = [f"{stack}blocks.{i}" for i in range(len(kinds))]
        sequence = list(zip(names, kinds, strict=True))
        if phase == "backward":
            sequence.reverse()
        for name, kind in sequence:
            piece = runs[item].get(kind)
            if piece is not None:
                order.append((name, piece))
    columns: list[list[np.ndarray]] = [[], [], [], []]
    seg_index, grad_start = [], []
    segments: list[tuple[str | None, str, int]] = []
    offset = [0, 0, 0, 0]
    seg_grads = [0]
    for k, (name, piece) in enumerate(order):
        for c in range(4):
            columns[c].append(offset[c] + piece.values[c] - piece.start[c])
        n = len(piece.values[0])
        seg_index.append(np.full(n, k, dtype=np.int64))
        grad_start.append(np.full(n, offset[0], dtype=np.int64))
        segments.append((name, piece.phase, trace.block_params.get(name or "", 0)))
        offset = [offset[c] + piece.end[c] - piece.start[c] for c in range(4)]
        seg_grads.append(offset[0])

    def cat(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    return Timeline(
        gradients=cat(columns[0]),
        activations=cat(columns[1]),
        casts=cat(columns[2]),
        temporaries=cat(columns[3]),
        segment=cat(seg_index),
        segments=segments,
        grad_start=cat(grad_start),
        segment_gradients=seg_grads,
    )


def _unit_shares(trace: StepTrace) -> list[UnitShare]:
    """What each unit keeps after its forward: blocks folded by kind, the loss with the head."""
    rows: dict[str, list[int]] = {}
    order: list[str] = []
    seen_head = False
    for p in _pieces(trace):
        if p.phase != "forward":
            continue
        saved = p.end[1] - p.start[1] + p.end[2] - p.start[2]
        casts = p.end[2] - p.start[2]
        name = p.unit
        if name == "head":
            seen_head = True
        if name is None:
            if not seen_head:
                continue  # inputs and the moments between units before the head: the next unit's input
            name = "head"
        if name not in rows:
            rows[name] = [0, 0]
            order.append(name)
        rows[name][0] += saved
        rows[name][1] += casts
    out: list[UnitShare] = []
    block_rows: dict[str, tuple[int, int]] = {}
    for name in order:
        if BLOCK.match(name):
            block_rows[name] = (rows[name][0], rows[name][1])
            continue
        label = "head and loss" if name == "head" else name
        out.append(UnitShare(label, 1, rows[name][0], rows[name][1], 0))
    for stack, kinds in trace.full_blocks.items():
        runs: list[tuple[str, int, int]] = []  # kind, first index, count
        for i, kind in enumerate(kinds):
            if runs and runs[-1][0] == kind and runs[-1][1] + runs[-1][2] == i:
                runs[-1] = (kind, runs[-1][1], runs[-1][2] + 1)
            else:
                runs.append((kind, i, 1))
        for kind, first, count in runs:
            saved, casts = block_rows.get(kind, (0, 0))
            label = f"{stack}blocks.{first}" + (f"-{first + count - 1}" if count > 1 else "")
            params = trace.block_params.get(f"{stack}blocks.{first}", 0)
            out.append(UnitShare(label, count, saved, casts, params))
    head = [u for u in out if u.name == "head and loss"]
    rest = [u for u in out if u.name != "head and loss"]
    return rest + head
