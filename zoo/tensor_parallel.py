"""What a component needs to declare its tensor-parallel plan in its own file.

A component module that can split over the ranks of a tensor-parallel group defines ``shard_tensor(self, mesh)``
(``mesh``: the 1-D ``DeviceMesh`` of the group). It checks that its sizes divide (``check_divides``), splits its
projections with torch's ``parallelize_module`` styles (``ColwiseParallel``: output features split; a
``RowwiseParallel`` after it: input features split, the partial outputs summed over the ranks), and divides the
counts its ``forward`` reads (its heads). ``zoo.train.tensor`` calls it on every component of a built model and
refuses, by name, a module with weights that no component's plan covers. A plugin's component declares its plan
the same way: the method on its module class is the hook.

The two autograd functions below are Megatron's ``f`` and ``g`` for code that splits by hand (the experts of a
mixture, one rank's experts each): ``copy_to_ranks`` where a replicated input enters the split part (its gradient
is summed over the ranks), ``sum_over_ranks`` where the partial outputs leave it.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


class TensorPlanError(ValueError):
    """A component cannot split over this many ranks (its sizes do not divide, or an option has no plan)."""


def check_divides(where: str, size: int, **counts: int) -> None:
    """Raise ``TensorPlanError`` naming each count of ``where`` that ``size`` ranks cannot split evenly."""
    bad = [f"{name} ({count})" for name, count in counts.items() if count % size]
    if bad:
        raise TensorPlanError(
            f"{where}: tensor parallelism over {size} ranks splits {' and '.join(bad)}, which must be divisible by "
            f"{size}: choose a tensor size that divides {', '.join(str(c) for c in counts.values())}"
        )


def refuse(where: str, option: str, size: int) -> None:
    """Raise ``TensorPlanError``: ``option`` of ``where`` has no tensor-parallel plan."""
    raise TensorPlanError(
        f"{where}: {option} has no tensor-parallel plan; train it with tensor: 1 (data parallelism: shard or "
        f"replicate), not tensor: {size}"
    )


class _CopyToRanks(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)  # each rank's part of the split computation adds its gradient
        return grad, None


class _SumOverRanks(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        x = x.contiguous().clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None  # every rank computes the same (replicated) loss from the sum: its gradient as it is


def copy_to_ranks(x: torch.Tensor, group: Any) -> torch.Tensor:
    """``x`` unchanged; in the backward, its gradient summed over ``group`` (a replicated input of split work)."""
    return _CopyToRanks.apply(x, group)


def sum_over_ranks(x: torch.Tensor, group: Any) -> torch.Tensor:
    """``x`` summed over ``group`` (the partial outputs of split work); the gradient passes unchanged."""
    return _SumOverRanks.apply(x, group)
