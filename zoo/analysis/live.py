"""Live tensor bytes, tracked at the dispatcher: the one instrument for predicted and measured training steps.

``LiveBytes`` is a ``TorchDispatchMode``. Every storage that an operator returns counts from the moment it
is made until it is freed (a weak reference's callback), so ``peak`` is the most tensor memory alive at any
point of what ran inside it, and ``at_peak`` says what that memory was:

=================  ==================================================================================
weights            the model's parameters and buffers (registered on entering)
gradients          parameter gradients (from the moment autograd accumulates them)
optimizer          the optimizer's state (registered on entering, and what its ``step`` leaves in it)
activations        made in the forward pass and still alive: what the backward pass will read
casts              low-precision copies of weights made in the forward (autocast's casts of fp32
                   weights, which the backward keeps: 2 bytes per parameter in bf16)
temporaries        made in the backward pass (activation gradients, recomputed activations) or inside
                   the optimizer's step, and not kept
=================  ==================================================================================

Activations are also attributed to the *unit* whose forward made them (a block ``blocks.3``, ``embedding``,
``head``; made between units: the last unit that ran). The same mode traces a step on fake tensors (the
plan: nothing is allocated) and measures it on real ones, so prediction and measurement differ only by what
the kernels really make. It is a leaner sibling of torch's ``MemTracker`` (``torch.distributed._tools``),
which attributes every tensor to every module at every operator: too slow to trace a 32-layer model.

    with LiveBytes(model, optimizer) as live:
        trainer.train_step(2)
    live.peak, live.at_peak["activations"]
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from zoo.compat import TorchDispatchMode, dynamo_disabled, in_backward, is_fake_tensor, tree_flatten

from .metatensor import MetaTensor

__all__ = ["CATEGORIES", "LiveBytes", "Segment"]

CATEGORIES = ("weights", "gradients", "optimizer", "activations", "casts", "temporaries")


@dataclass
class Segment:
    """A stretch of the step: one unit's forward or backward (``unit`` None: between units), or the optimizer.

    ``gradients``, ``activations``, ``casts`` and ``temporaries`` are the live bytes of each after every
    operator of the stretch; ``start`` the four when it began.
    """

    unit: str | None
    phase: str
    """forward | backward | optimizer"""
    start: tuple[int, int, int]
    gradients: list[int] = field(default_factory=list)
    activations: list[int] = field(default_factory=list)
    casts: list[int] = field(default_factory=list)
    temporaries: list[int] = field(default_factory=list)


class _Info:
    __slots__ = ("category", "nbytes", "unit")

    def __init__(self, nbytes: int, category: str, unit: str | None) -> None:
        self.nbytes = nbytes
        self.category = category
        self.unit = unit


class LiveBytes(TorchDispatchMode):
    """Track the live tensor bytes of what runs inside (see the module docstring).

    Args:
        model: its parameters and buffers count as weights from the start, its gradients as gradients.
        optimizer: its state counts as optimizer state (created lazily in the first step, or already there).
        units: module path -> module, whose forwards (and backwards) divide the step into ``segments``.
        granularity: round every storage up to a multiple of this many bytes (512: the CUDA allocator).
        nonzero_share: on fake tensors, the share of True elements ``nonzero`` returns (a data-dependent size
            that fake tensors cannot know): a callable giving it at the time of the call.
        record: keep the ``segments`` (the plan composes them); off for a plain measurement.
    """

    def __init__(
        self,
        model: nn.Module | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        *,
        units: dict[str, nn.Module] | None = None,
        granularity: int = 1,
        nonzero_share: Callable[[], float] | None = None,
        record: bool = False,
    ) -> None:
        super().__init__()
        self.model = model
        self.optimizer = optimizer
        self.units = units or {}
        self.granularity = granularity
        self.nonzero_share = nonzero_share
        self.record = record
        self.live = 0
        self.peak = 0
        self.by_category = dict.fromkeys(CATEGORIES, 0)
        self.by_unit: dict[str, int] = {}
        self.at_peak: dict[str, int] = dict(self.by_category)
        self.units_at_peak: dict[str, int] = {}
        self.peak_phase = ""
        self.segments: list[Segment] = []
        self._info: dict[int, tuple[_Info, Any]] = {}
        self._unit: str | None = None
        self._last_unit: str | None = None
        self._phase = "forward"
        self._handles: list[Any] = []
        self._resize: Any = None

    # --------------------------------------------------------------------------------------- bookkeeping

    def _bytes(self, storage: torch.UntypedStorage) -> int:
        n = storage.nbytes()
        g = self.granularity
        return -(-n // g) * g if g > 1 else n

    def _add(self, storage: torch.UntypedStorage, category: str, unit: str | None = None) -> _Info | None:
        key = id(storage)
        known = self._info.get(key)
        if known is not None:
            return known[0]
        info = _Info(self._bytes(storage), category, unit)
        try:
            ref = weakref.ref(storage, lambda _, key=key, info=info: self._freed(key, info))
        except TypeError:  # a storage that cannot be referenced weakly is not tracked
            return None
        self._info[key] = (info, ref)
        self._count(info, +1)
        return info

    def _freed(self, key: int, info: _Info) -> None:
        known = self._info.get(key)
        if known is not None and known[0] is info:
            del self._info[key]
            self._count(info, -1)

    def _count(self, info: _Info, sign: int) -> None:
        self.live += sign * info.nbytes
        self.by_category[info.category] += sign * info.nbytes
        if info.category == "activations" and info.unit is not None:
            self.by_unit[info.unit] = self.by_unit.get(info.unit, 0) + sign * info.nbytes

    def _retag(self, t: torch.Tensor | None, category: str) -> None:
        for storage in _storages(t):
            known = self._info.get(id(storage))
            if known is None:
                self._add(storage, category)
                continue
            info = known[0]
            if info.category != category:
                self._count(info, -1)
                info.category, info.unit = category, None
                self._count(info, +1)

    def _check_peak(self) -> None:
        if self.record and self.segments:
            seg, c = self.segments[-1], self.by_category
            seg.gradients.append(c["gradients"])
            seg.activations.append(c["activations"])
            seg.casts.append(c["casts"])
            seg.temporaries.append(c["temporaries"])
        if self.live > self.peak:
            self.peak = self.live
            self.at_peak = dict(self.by_category)
            self.units_at_peak = {u: n for u, n in self.by_unit.items() if n}
            self.peak_phase = self._phase

    def _segment(self, unit: str | None, phase: str) -> None:
        self._phase = phase
        if self.record:
            c = self.by_category
            start = (c["gradients"], c["activations"], c["casts"], c["temporaries"])
            self.segments.append(Segment(unit, phase, start))

    @property
    def in_backward(self) -> bool:
        return in_backward()

    # --------------------------------------------------------------------------------------- the mode

    def __enter__(self) -> LiveBytes:
        if self.model is not None:
            for t in [*self.model.parameters(), *self.model.buffers()]:
                for storage in _storages(t):
                    self._add(storage, "weights")
            for p in self.model.parameters():
                if p.grad is not None:
                    self._retag(p.grad, "gradients")
                if p.requires_grad:
                    self._handles.append(p.register_post_accumulate_grad_hook(self._grad_hook))
        self._track_optimizer_state()
        if self.optimizer is not None:
            self._handles.append(self.optimizer.register_step_pre_hook(self._optimizer_starts))
            self._handles.append(self.optimizer.register_step_post_hook(self._optimizer_ends))
        for name, module in self.units.items():
            self._handles.append(module.register_forward_pre_hook(self._unit_starts(name)))
            self._handles.append(module.register_forward_hook(self._unit_ends(name)))
        self._patch_resize()
        self._segment(None, "forward")
        self.peak = self.live
        self.at_peak = dict(self.by_category)
        return super().__enter__()

    def __exit__(self, *args: Any) -> None:
        super().__exit__(*args)
        torch.UntypedStorage.resize_ = self._resize
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # torch's own wrapper would import torch._dynamo (seconds): see dynamo_disabled

    @dynamo_disabled
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if any(getattr(t, "__name__", "") == "DTensor" for t in types):
            return NotImplemented  # DTensor runs its local operators, which come back here
        kwargs = kwargs or {}
        if func is torch.ops.aten.nonzero.default and self.nonzero_share is not None and _is_fake(args[0]):
            x = args[0]
            out = torch.empty((round(x.numel() * self.nonzero_share()), x.dim()), dtype=torch.long, device=x.device)
        else:
            out = func(*args, **kwargs)
        if self._phase == "optimizer":
            category, unit = "temporaries", None
        elif self.in_backward:
            category, unit = "temporaries", None
            if self._phase != "backward":
                self._segment(None, "backward")  # the loss's backward, before any unit's
        else:
            category, unit = "activations", self._unit or self._last_unit
            if func is torch.ops.aten._to_copy.default and self._is_weight(args[0]):
                category = "casts"
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                for storage in _storages(t):
                    self._add(storage, category, unit)
        self._check_peak()
        return out

    # --------------------------------------------------------------------------------------- hooks

    def _is_weight(self, t: Any) -> bool:
        if not isinstance(t, torch.Tensor):
            return False
        known = self._info.get(id(t.untyped_storage()))
        return known is not None and known[0].category == "weights"

    def _grad_hook(self, p: torch.Tensor) -> None:
        self._retag(p.grad, "gradients")

    def _track_optimizer_state(self) -> None:
        if self.optimizer is None:
            return
        for state in self.optimizer.state.values():
            for value in state.values():
                if isinstance(value, torch.Tensor):
                    self._retag(value, "optimizer")

    def _optimizer_starts(self, *_: Any) -> None:
        self._segment(None, "optimizer")

    def _optimizer_ends(self, *_: Any) -> None:
        self._track_optimizer_state()
        if self.model is not None:
            for p in self.model.parameters():
                self._retag(p.grad, "gradients")
        self._check_peak()

    def _unit_starts(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any) -> None:
            if self.in_backward:  # an activation-checkpointed forward, recomputed in the backward
                return
            self._unit = name
            self._segment(name, "forward")

        return hook

    def _unit_ends(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            if self.in_backward:
                return
            self._unit, self._last_unit = None, name
            self._segment(None, "forward")
            grads = [t for t in tree_flatten(_tensors_of(output))[0] if isinstance(t, torch.Tensor)]
            for t in grads:
                if t.requires_grad:
                    t.register_hook(self._backward_starts(name))
                    break

        return hook

    def _backward_starts(self, name: str) -> Callable[[torch.Tensor], None]:
        def hook(grad: torch.Tensor) -> None:
            self._segment(name, "backward")

        return hook

    def _patch_resize(self) -> None:
        """FSDP frees and re-allocates unsharded parameters with ``storage.resize_``, which no operator sees."""
        self._resize = original = torch.UntypedStorage.resize_
        tracker = self

        def resize_(storage: torch.UntypedStorage, size: int) -> Any:
            result = original(storage, size)
            known = tracker._info.get(id(storage))
            if known is None:
                category = "temporaries" if tracker.in_backward or tracker._phase == "optimizer" else "activations"
                tracker._add(storage, category, tracker._unit)
            else:
                info = known[0]
                tracker._count(info, -1)
                info.nbytes = tracker._bytes(storage)
                tracker._count(info, +1)
            tracker._check_peak()
            return result

        torch.UntypedStorage.resize_ = resize_  # type: ignore[method-assign]


def _tensors_of(output: Any) -> Any:
    """The tensors of a module's output (a dataclass such as ``ModelOutput`` included)."""
    if hasattr(output, "to_tuple"):
        return output.to_tuple()
    return output


def _is_fake(t: Any) -> bool:
    """A tensor without data: zoo's ``MetaTensor`` (the plan's) or torch's ``FakeTensor``."""
    return isinstance(t, MetaTensor) or is_fake_tensor(t)


def _storages(t: Any) -> Iterable[torch.UntypedStorage]:
    """The storages behind a tensor (a wrapper subclass's inner tensors), none for None."""
    if not isinstance(t, torch.Tensor):
        return ()
    if hasattr(t, "__tensor_flatten__") and not _is_fake(t):
        inner, _ = t.__tensor_flatten__()
        return [s for name in inner for s in _storages(getattr(t, name))]
    return (t.untyped_storage(),)
