"""The experts of a mixture of experts: zoo's MLP and gated FFNs held stacked, one tensor per projection for
all experts (``GroupedExperts``), and the builder of any other expert module."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from zoo.components.ffn import MLP, GatedMLP, glu


def _local(t: torch.Tensor | None) -> torch.Tensor | None:
    """This rank's part of a weight split over ranks (a ``DTensor``), as a plain tensor; others as they are."""
    return t.to_local() if hasattr(t, "to_local") else t


def _build_expert(
    expert: Callable[[], nn.Module], device: torch.device | str | None, dtype: torch.dtype | None
) -> nn.Module:
    if isinstance(expert, nn.Module):
        raise TypeError(
            "expert must be a zero-argument callable that builds a fresh module "
            "(e.g. `lambda: GatedMLP(64)`), not a module: each expert needs its own weights"
        )
    # Building under the target device puts parameters straight where they belong (the meta device
    # included) instead of allocating them on the default device and moving them afterwards.
    with torch.device(device) if device is not None else contextlib.nullcontext():
        module = expert()
    return module if dtype is None else module.to(dtype=dtype)


class GroupedExperts(nn.Module):
    """``num_experts`` FFNs of one shape, each projection's weights stacked into one tensor.

    Gated experts (``down(act(gate(x)) * up(x))``) hold ``gate_up_proj`` (X, 2H, E), each expert's gate rows
    then its up rows, and ``down_proj`` (X, E, H); plain MLP experts (``down(act(up(x)))``) hold ``up_proj``
    (X, H, E) and ``down_proj`` (X, E, H). With biases: ``gate_up_bias`` (X, 2H) or ``up_bias`` (X, H), and
    ``down_bias`` (X, E). Each slice is the ``nn.Linear`` weight (out, in) of one expert, so expert ``e``
    computes exactly what its own module would.

    ``experts[e]`` is expert ``e`` as a function of ``(..., E)``; :meth:`per_expert` names each expert's
    weights as the module layout does (``3.gate_proj.weight``, a view), which is how checkpoint tables and
    zoo checkpoints written with one module per expert read and write this layout.

    Args:
        num_experts: X.
        d_model: E.
        hidden: H.
        activation: the activation module (applied to the gate, or to the up projection).
        gated: a gated FFN (three projections) rather than a two-layer MLP.
        bias: biases on the projections.
        limit: gated experts clamp the gate to at most ``limit`` and the up projection to ``[-limit, limit]``
            (gpt-oss; None: no clamp), as ``GatedMLP`` does.
        up_shift: gated experts add it to the up projection before it gates (gpt-oss: 1.0).
    """

    def __init__(
        self,
        num_experts: int,
        d_model: int,
        hidden: int,
        *,
        activation: nn.Module,
        gated: bool,
        bias: bool,
        limit: float | None = None,
        up_shift: float = 0.0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        X, E, H = num_experts, d_model, hidden
        self.num_experts, self.d_model, self.hidden, self.gated = X, E, H, gated
        # The first projection's parameter names: gated experts' gate and up rows together, or the MLP's up.
        self.first, self.first_bias = ("gate_up_proj", "gate_up_bias") if gated else ("up_proj", "up_bias")
        rows = 2 * H if gated else H
        self.register_parameter(self.first, nn.Parameter(torch.empty(X, rows, E, **factory)))
        self.down_proj = nn.Parameter(torch.empty(X, E, H, **factory))
        self.register_parameter(self.first_bias, nn.Parameter(torch.empty(X, rows, **factory)) if bias else None)
        self.down_bias = nn.Parameter(torch.empty(X, E, **factory)) if bias else None
        self.act = activation
        self.limit, self.up_shift = limit, up_shift
        if self.down_proj.device.type != "meta":
            self.reset_parameters()

    @classmethod
    def of(cls, expert: nn.Module, num_experts: int, **factory: Any) -> GroupedExperts | None:
        """``num_experts`` experts shaped like the module ``expert`` (a zoo ``MLP`` or ``GatedMLP`` without
        dropout), or None for any other module."""
        if type(expert) not in (MLP, GatedMLP) or not isinstance(expert.dropout, nn.Identity):
            return None
        up, is_gated = expert.up_proj, isinstance(expert, GatedMLP)
        return cls(
            num_experts,
            up.in_features,
            up.out_features,
            activation=expert.act,
            gated=is_gated,
            bias=up.bias is not None,
            limit=expert.limit if is_gated else None,
            up_shift=expert.up_shift if is_gated else 0.0,
            **factory,
        )

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """What each expert's ``nn.Linear`` layers would get: uniform within ``1 / sqrt(fan_in)``."""
        for weight, bias, fan_in in self._projections():
            bound = 1 / math.sqrt(fan_in)
            nn.init.uniform_(weight, -bound, bound)
            if bias is not None:
                nn.init.uniform_(bias, -bound, bound)

    @torch.no_grad()
    def fill_weights(self, std: float, residual_std: float) -> None:
        """zoo's init of experts' linear layers: N(0, std), the down projection N(0, residual_std), biases 0."""
        for weight, bias, _ in self._projections():
            nn.init.normal_(weight, 0.0, residual_std if weight is self.down_proj else std)
            if bias is not None:
                nn.init.zeros_(bias)

    def _projections(self) -> Iterator[tuple[torch.Tensor, torch.Tensor | None, int]]:
        """(weight, bias, fan_in) of the first and the down projection."""
        yield getattr(self, self.first), getattr(self, self.first_bias), self.d_model
        yield self.down_proj, self.down_bias, self.hidden

    def forward(self, x: torch.Tensor, e: int) -> torch.Tensor:
        """Expert ``e`` on ``x`` (..., E) -> (..., E); split over ranks (``shard_tensor``), ``e`` counts this
        rank's experts."""
        first, first_bias = _local(getattr(self, self.first)), _local(getattr(self, self.first_bias))
        down, down_bias = _local(self.down_proj), _local(self.down_bias)
        h = F.linear(x, first[e], None if first_bias is None else first_bias[e])  # (..., 2H) or (..., H)
        if self.gated:
            gate, up = h.chunk(2, dim=-1)
            h = glu(self.act, gate, up, self.limit, self.up_shift)  # (..., H)
        else:
            h = self.act(h)
        return F.linear(h, down[e], None if down_bias is None else down_bias[e])

    def shard_tensor(self, mesh: Any) -> None:
        """Tensor parallelism (``zoo.tensor_parallel``): the experts split over the ranks, whole, each rank holding
        ``num_experts / ranks`` of them (its weights ``DTensor``s sharded on the expert dimension). The MoE layer
        sends each rank the tokens routed to its experts and sums the ranks' outputs (``MoE.shard_tensor``)."""
        from torch.distributed.tensor import Shard, distribute_tensor

        for name, param in list(self.named_parameters(recurse=False)):
            split = distribute_tensor(param.data, mesh, [Shard(0)])
            self.register_parameter(name, nn.Parameter(split, requires_grad=param.requires_grad))

    def __getitem__(self, e: int) -> Callable[[torch.Tensor], torch.Tensor]:
        if not -self.num_experts <= e < self.num_experts:
            raise IndexError(f"expert {e} of {self.num_experts}")
        return lambda x: self(x, e % self.num_experts)

    def __len__(self) -> int:
        return self.num_experts

    def __iter__(self) -> Iterator[Callable[[torch.Tensor], torch.Tensor]]:
        return (self[e] for e in range(self.num_experts))

    def per_expert(self) -> dict[str, torch.Tensor]:
        """Each expert's weights under the names one module per expert has (``0.up_proj.weight``, ...), as
        views of the stacked tensors (writing into one writes the stacked tensor)."""
        H, out = self.hidden, {}
        first, first_bias = getattr(self, self.first), getattr(self, self.first_bias)
        for e in range(self.num_experts):
            if self.gated:
                out[f"{e}.gate_proj.weight"], out[f"{e}.up_proj.weight"] = first[e, :H], first[e, H:]
                if first_bias is not None:
                    out[f"{e}.gate_proj.bias"], out[f"{e}.up_proj.bias"] = first_bias[e, :H], first_bias[e, H:]
            else:
                out[f"{e}.up_proj.weight"] = first[e]
                if first_bias is not None:
                    out[f"{e}.up_proj.bias"] = first_bias[e]
            out[f"{e}.down_proj.weight"] = self.down_proj[e]
            if self.down_bias is not None:
                out[f"{e}.down_proj.bias"] = self.down_bias[e]
        return out

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        # A checkpoint written with one module per expert (zoo before the stacked layout): stack it.
        if f"{prefix}0.down_proj.weight" in state_dict and f"{prefix}down_proj" not in state_dict:
            names = self.per_expert()
            for name in names:
                if f"{prefix}{name}" not in state_dict:
                    missing.append(f"{prefix}{name}")
            with torch.no_grad():
                for name, view in names.items():
                    if f"{prefix}{name}" in state_dict:
                        view.copy_(state_dict.pop(f"{prefix}{name}"))
            return
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing, unexpected, errors)

    def extra_repr(self) -> str:
        kind = "gated" if self.gated else "mlp"
        extra = f", limit={self.limit}" if self.limit is not None else ""
        extra += f", up_shift={self.up_shift}" if self.up_shift else ""
        return f"num_experts={self.num_experts}, {kind} {self.d_model} -> {self.hidden} -> {self.d_model}{extra}"
