"""Tensor parallelism: a built model split over the ranks of the mesh's ``tensor`` dimension, component by
component, as each declares in its own file (``shard_tensor``; see ``zoo.tensor_parallel``).

    parallelize(model, mesh["tensor"])   # before FSDP2, which then shards over the data dimensions

Attention splits its heads, FFNs their hidden width, a mixture its experts, the token embedding and the LM head
the vocabulary; norms and positional tables stay whole. The LM head's logits stay split over the vocabulary, and
``loss_context`` computes the cross-entropy from them without gathering them (``loss_parallel``). A module with
weights that no component's plan covers is refused by name before anything is split; weights tied before (the
embedding and a tied head) are tied again after.

Every rank of a tensor-parallel group reads the same batch, so the model computes what one process computes, up
to the order of floating-point sums.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import nn

from zoo.errors import TrainError
from zoo.tensor_parallel import TensorPlanError


def place(model: nn.Module, env: Any, layout: Any, mesh: Any) -> None:
    """``model`` where ``layout`` (``zoo.train.distributed.Layout``) puts it: on the device (FSDP2 alone moves
    what it shards itself), split over the mesh's tensor dimension, and each mixture of experts told its
    data-parallel peers, over whose whole batch it balances its experts."""
    from .distributed import data_group

    if layout.strategy != "fsdp" or layout.tensor > 1:
        model.to(env.device)
    if layout.tensor > 1:  # FSDP2 then shards the data dimensions of the split weights
        parallelize(model, mesh["tensor"])
        if layout.sequence:
            split_sequence(model, mesh["tensor"])
    peers = data_group(mesh, layout)
    for module in model.modules():
        if hasattr(module, "balance_group"):
            module.balance_group = peers


def uncovered(model: nn.Module) -> list[str]:
    """Modules with weights of their own that no component's ``shard_tensor`` covers: ``name (Class)``."""
    out: list[str] = []

    def visit(name: str, module: nn.Module) -> None:
        if hasattr(module, "shard_tensor"):
            return
        if any(True for _ in module.parameters(recurse=False)):
            out.append(f"{name or 'the model'} ({type(module).__name__})")
            return
        for child, sub in module.named_children():
            visit(f"{name}.{child}" if name else child, sub)

    visit("", model)
    return out


def parallelize(model: nn.Module, mesh: Any) -> None:
    """Split ``model`` in place over the ranks of the 1-D ``mesh`` (the tensor dimension).

    Raises:
        TrainError: a module with weights and no plan, or a component whose sizes or options cannot split
            (its text says which and what to change).
    """
    size = mesh.size()
    missing = uncovered(model)
    if missing:
        raise TrainError(
            f"train.parallel tensor {size}: {', '.join(missing)} declares no tensor-parallel plan (a `shard_tensor` "
            "method on its module, see zoo.tensor_parallel); train this model with tensor: 1"
        )
    tied = _tied(model)
    done: set[int] = set()

    def visit(name: str, module: nn.Module) -> None:
        shard = getattr(module, "shard_tensor", None)
        if shard is not None:
            if id(module) not in done:  # a module shared by two owners (a stack's positions) splits once
                done.add(id(module))
                try:
                    shard(mesh)
                except TensorPlanError as exc:
                    raise TrainError(f"train.parallel tensor {size}: {name or 'the model'}: {exc}") from None
            return
        for child, sub in module.named_children():
            visit(f"{name}.{child}" if name else child, sub)

    visit("", model)
    for group in tied:  # one parameter again, as the first owner now holds it
        (owner, attr), *others = group
        kept = getattr(owner, attr)
        for module, name in others:
            if getattr(getattr(module, name), "placements", None) != getattr(kept, "placements", None):
                raise TrainError(
                    f"train.parallel tensor {size}: tied weights ({type(owner).__name__}.{attr} and "
                    f"{type(module).__name__}.{name}) split differently; untie them (head.tie_embeddings: false)"
                )
            setattr(module, name, kept)


def split_sequence(model: nn.Module, mesh: Any) -> None:
    """Sequence parallelism over the tensor-parallel ranks: between a block's attention and FFN, its norms, dropout
    and residual stream hold 1/ranks of the sequence (rank ``r`` the ``r``-th chunk), which divides the memory of
    those activations by the ranks. Each attention and FFN gathers the whole sequence in front of it and keeps its
    rank's chunk of its output (summed over the ranks by its row-wise projection); the first block takes its
    rank's chunk and the last one gathers the sequence again, for the stack's final norm and the head. A block's
    norms, seeing a part of the sequence, sum their weights' gradients over the ranks (``sum_gradients_over``).

    Raises:
        TrainError: a block with weights outside its attention and FFN that are not a norm, or a stateful FFN
            (a recurrent mixer, which reads the sequence in order).
    """
    from zoo.architectures.blocks import stacks

    size, group = mesh.size(), mesh.get_group()
    where = f"train.parallel tensor {size}, sequence: true"
    for stack in stacks(model):
        for i, block in enumerate(stack.blocks):
            if getattr(block, "stateful_ffn", False):
                raise TrainError(f"{where}: block {i}'s FFN is a recurrent mixer; it cannot split the sequence")
            for name, child in block.named_children():
                if name in ("attention", "cross_attention", "ffn"):
                    child.sequence_group = group
                    child.register_forward_pre_hook(_gather_input)
                    child.register_forward_hook(_own_chunk_of_output)
                elif any(True for _ in child.parameters()):
                    if not hasattr(child, "sum_gradients_over"):
                        raise TrainError(
                            f"{where}: block {i}'s {name} ({type(child).__name__}) holds weights and reads a part "
                            "of the sequence; only norms (sum_gradients_over) can: drop sequence: true"
                        )
                    child.sum_gradients_over(group)
        stack.blocks[0].register_forward_pre_hook(_own_chunk_of_input)
        stack.blocks[-1].register_forward_hook(_gather_output)
        stack.blocks[0].sequence_group = stack.blocks[-1].sequence_group = group


def _chunk(x: torch.Tensor, group: Any) -> torch.Tensor:
    """This rank's chunk of the sequence (dim 1) of ``x``, which must divide evenly."""
    size, rank = torch.distributed.get_world_size(group), torch.distributed.get_rank(group)
    if x.size(1) % size:
        raise TrainError(
            f"train.parallel sequence: true splits each sequence over {size} ranks, and this one has {x.size(1)} "
            f"positions: make train.seq_len divisible by {size}"
        )
    return x.chunk(size, dim=1)[rank]


class _Chunk(torch.autograd.Function):
    """Forward: this rank's chunk of a sequence every rank holds whole; backward: the chunks' gradients gathered."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        ctx.group = group
        return _chunk(x, group).contiguous()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _all_gather(grad, ctx.group), None


class _Gather(torch.autograd.Function):
    """Forward: the ranks' chunks gathered into the whole sequence; backward: this rank's chunk of the gradient
    (the whole-sequence work after it ends in a gradient that every rank holds alike)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        ctx.group = group
        return _all_gather(x, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _chunk(grad, ctx.group).contiguous(), None


def _all_gather(x: torch.Tensor, group: Any) -> torch.Tensor:
    parts = [torch.empty_like(x) for _ in range(torch.distributed.get_world_size(group))]
    torch.distributed.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim=1)


def _own_chunk_of_input(module: nn.Module, args: tuple) -> tuple:
    return (_Chunk.apply(args[0], module.sequence_group), *args[1:])


def _gather_input(module: nn.Module, args: tuple) -> tuple:
    return (_Gather.apply(args[0], module.sequence_group), *args[1:])


def _own_chunk_of_output(module: nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
    return _Chunk.apply(output, module.sequence_group)


def _gather_output(module: nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
    return _Gather.apply(output, module.sequence_group)


def _tied(model: nn.Module) -> list[list[tuple[nn.Module, str]]]:
    """Groups of (module, attribute) that hold one parameter, in module order."""
    owners: dict[int, list[tuple[nn.Module, str]]] = {}
    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            owners.setdefault(id(param), []).append((module, name))
    return [group for group in owners.values() if len(group) > 1]


def loss_context(tensor: int) -> contextlib.AbstractContextManager:
    """Where the training loss is computed: ``loss_parallel`` (cross-entropy of vocabulary-split logits, without
    gathering them) when the model is split, nothing otherwise."""
    if tensor == 1:
        return contextlib.nullcontext()
    from torch.distributed.tensor.parallel import loss_parallel

    return loss_parallel()


class WholeLogits(nn.Module):
    """A split model whose outputs carry whole logits (gathered from the vocabulary-split ``DTensor``), for the
    metrics of evaluation (accuracy, exact match) that read them. (Losses are plain tensors already: see
    ``zoo.components.heads.base.cross_entropy``.)"""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        out = self.model(*args, **kwargs)
        if hasattr(out.logits, "full_tensor"):
            out.logits = out.logits.full_tensor()
        return out


def clip_grad_norm(parameters: list[nn.Parameter], max_norm: float) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` for parameters that are ``DTensor``s on different meshes (a split
    model's 2-D weights beside its 1-D whole ones, after FSDP2): each gradient's norm whole, the total norm, the
    gradients scaled in place. Returns the total norm (a plain tensor, equal on every rank)."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.zeros(())
    norms = []
    for g in grads:
        n = torch.linalg.vector_norm(g, 2, dtype=torch.float32)
        norms.append(n.full_tensor() if hasattr(n, "full_tensor") else n)
    total = torch.linalg.vector_norm(torch.stack(norms), 2)
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for g in grads:
        local = g.to_local() if hasattr(g, "to_local") else g
        local.mul_(coef.to(local.dtype))
    return total
