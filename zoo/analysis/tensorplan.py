"""Tensor parallelism in a plan: the model one rank of a tensor-parallel group holds, and what the group sends.

``split_model`` runs the trainer's own ``zoo.train.tensor.parallelize`` on the meta model, over a fake process
group of ``tensor`` ranks (torch's ``fake`` backend: nothing is sent) as rank 0, so every component splits as its
``shard_tensor`` declares, with the same refusals (a module with weights and no plan, sizes that do not divide),
in the trainer's words. Each split weight (a ``DTensor``) then becomes its local shard, a plain meta tensor, and
the hooks the parallel styles installed are removed: what the step trace runs is the rank's own model. Its
attention has ``num_heads / T`` and ``num_kv_heads / T`` heads of the same width, its FFN ``hidden / T``, its
mixtures run their ``num_experts / T`` experts on the tokens the whole router sends them (taken balanced, as
without TP), the embedding and the LM head hold ``vocab / T`` rows (the logits ``vocab / T`` columns, the loss
computed from them as ``loss_parallel`` does), T5's bias its heads; norms, positional tables, routers, a token
embedding's extras and the residual stream (N x L x E) stay whole. A tied head shares the embedding's shard.

What the trace of the rank's model leaves out: the all-reduced copies of the N x L x E activations (the partial
output of a row-wise projection and its sum are both alive for a moment) and the masks of a vocabulary-parallel
lookup; both are temporaries of one layer, small beside what a step keeps. Against torch's ``FSDPMemTracker`` on
the trainer's own step (gloo, 4 CPU processes, ``tests/test_plan_parallel.py``), the per-rank peak of gpt-, llama-,
moe- and t5-tiny on tensor 2 x shard 2 and replicate 2 x tensor 2 comes within 0.99-1.09 of the measured one.
The fake process group is torch's test backend (``zoo.compat.fake_store``); a process
that already belongs to a process group cannot plan tensor parallelism (``PlanError``).

``Collectives`` counts what the group all-reduces per token of each micro-step: forward, the output (E wide) of
every row-wise projection (attention's ``o_proj``, an FFN's ``down_proj``), a mixture's sum of its experts'
outputs and a vocabulary-parallel embedding's lookup, again for what activation checkpointing recomputes, and
loss-parallel's three numbers per position (the maximum, the sum of exponentials, the target's logit); backward,
the input gradient of every column-wise projection (q, k, v, gate, up, the LM head: each its own all-reduce, as
the styles do) and of a mixture's experts.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zoo.errors import PlanError

if TYPE_CHECKING:
    from torch import nn

__all__ = ["Collectives", "split_model"]

LOSS_PARALLEL_VALUES = 3
"""Numbers per position loss-parallel all-reduces in the forward: the logits' maximum, the sum of exponentials and
the target's logit."""


@dataclass(frozen=True)
class Collectives:
    """Elements each rank of a tensor-parallel group all-reduces per token of a micro-step, and how many times."""

    forward: int
    """Elements per token all-reduced in the forward (recomputed ones counted again)."""
    backward: int
    """Elements per token all-reduced in the backward (the inputs' gradients of column-wise projections)."""
    count: int
    """All-reduces per micro-step (each a latency beside its bytes)."""


@contextmanager
def _fake_group(size: int) -> Iterator[Any]:
    """A 1-D mesh of ``size`` ranks in this process, on torch's fake process group (collectives do nothing)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from zoo.compat import fake_store

    if dist.is_initialized():
        raise PlanError(
            f"planning tensor parallelism (tensor {size}) splits the model over a process group of its own, and this "
            "process already belongs to one: plan outside torchrun"
        )
    dist.init_process_group("fake", store=fake_store(), rank=0, world_size=size)
    try:
        yield init_device_mesh("cpu", (size,))
    finally:
        dist.destroy_process_group()


def split_model(model: nn.Module, tensor: int) -> list[tuple[str, int, int]]:
    """Make ``model`` (on the meta device) the model rank 0 of ``tensor`` ranks holds, in place (see the module
    docstring). Returns the all-reduces its split layers make: ``(module path, elements per token forward,
    backward)``.

    Raises:
        PlanError: what the trainer refuses, in its words: a module with weights and no tensor-parallel plan, a
            component whose sizes do not divide by ``tensor`` or whose options cannot split.
    """
    from zoo.errors import TrainError
    from zoo.train.tensor import parallelize

    hooks = {id(m): (set(m._forward_pre_hooks), set(m._forward_hooks)) for m in model.modules()}
    with _fake_group(tensor) as mesh:
        try:
            parallelize(model, mesh)
        except TrainError as exc:
            raise PlanError(str(exc)) from None
        found = _all_reduces(model)
        _localize(model, hooks)
    return found


def _placement(param: Any) -> int | None:
    """The dimension a split weight is sharded on (None: whole)."""
    placements = getattr(param, "placements", None)
    if not placements:
        return None
    dim = getattr(placements[0], "dim", None)
    return dim if isinstance(dim, int) else None


def _all_reduces(model: nn.Module) -> list[tuple[str, int, int]]:
    from torch import nn

    out: list[tuple[str, int, int]] = []
    head = getattr(model, "head", None)
    for path, module in model.named_modules():
        weight = module._parameters.get("weight")
        dim = _placement(weight) if weight is not None else None
        if isinstance(module, nn.Linear) and dim == 0:  # column-wise: the input's gradient summed
            loss = LOSS_PARALLEL_VALUES if head is not None and module is getattr(head, "proj", None) else 0
            out.append((path, loss, module.in_features))
        elif isinstance(module, nn.Linear) and dim == 1:  # row-wise: the partial outputs summed
            out.append((path, module.out_features, 0))
        elif isinstance(module, nn.Embedding) and dim == 0:  # vocabulary-parallel lookup, summed
            out.append((path, module.embedding_dim, 0))
        elif getattr(module, "expert_group", None) is not None:  # a mixture's experts over the ranks
            width = module.router.in_features
            out.append((path, width, width))
    return out


def _localize(model: nn.Module, hooks: dict[int, tuple[set[int], set[int]]]) -> None:
    """Every ``DTensor`` weight as its local shard (ties kept), the styles' hooks removed, no process group kept."""
    from torch import nn

    memo: dict[int, Any] = {}
    for module in model.modules():
        for table in (module._parameters, module._buffers):
            for name, value in list(table.items()):
                if value is None or not hasattr(value, "to_local"):
                    continue
                if id(value) not in memo:
                    local = value.to_local().detach()
                    memo[id(value)] = (
                        nn.Parameter(local, requires_grad=value.requires_grad) if table is module._parameters else local
                    )
                table[name] = memo[id(value)]
        pre, post = hooks.get(id(module), (set(), set()))
        for key in [k for k in module._forward_pre_hooks if k not in pre]:
            del module._forward_pre_hooks[key]
            module._forward_pre_hooks_with_kwargs.pop(key, None)
        for key in [k for k in module._forward_hooks if k not in post]:
            del module._forward_hooks[key]
            module._forward_hooks_with_kwargs.pop(key, None)
            module._forward_hooks_always_called.pop(key, None)
        if getattr(module, "expert_group", None) is not None:
            module.expert_group = None  # this rank's experts, their outputs not summed over ranks (nothing sends)


def collectives(found: list[tuple[str, int, int]], recomputed: Any) -> Collectives:
    """The all-reduces per token of a micro-step; ``recomputed(path)``: whether checkpointing runs it again."""
    forward = backward = count = 0
    for path, fwd, bwd in found:
        again = 2 if fwd and recomputed(path) else 1
        forward += fwd * again
        backward += bwd
        count += (again if fwd else 0) + (1 if bwd else 0)
    return Collectives(forward, backward, count)
