"""The model a step trace runs: one block of each kind kept per stack, weights and buffers made fake, the
units the step is divided by, a stand-in for fused AdamW, and which components checkpointing recomputes.

Used by ``zoo.analysis.steptrace``; ``BLOCK`` matches the path of a block (``blocks.3``, ``decoder.blocks.0``).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch import nn

BLOCK = re.compile(r"^(?P<stack>(?:.*\.)?)blocks\.(?P<index>\d+)$")


def _units(model: nn.Module) -> dict[str, nn.Module]:
    """The parts a step is divided by: every block, and the model's own children that are not stacks."""
    from torch import nn

    from zoo.architectures.blocks import stacks

    holders = {id(m) for m in stacks(model)}
    units: dict[str, nn.Module] = {}
    for name, child in model.named_children():
        if id(child) not in holders and not isinstance(child, nn.ModuleList):
            units[name] = child
        elif id(child) in holders:  # a stack of its own (a dual-encoder's tower): its embedding, norms, ...
            for part, grandchild in child.named_children():
                if not isinstance(grandchild, nn.ModuleList):
                    units[f"{name}.{part}"] = grandchild
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

        from zoo.compat import foreach_add_, fused_adamw_

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
                    foreach_add_(steps, 1)
                    fused_adamw_(
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
