"""Weight initialisation of a built model: every parameter has exactly one owner.

The contract, applied by ``zoo.build`` after the architecture built its modules (never on the meta device):

1. **A component's own init is authoritative.** A module built by a registered component that defines
   ``reset_parameters()`` initialises everything below it; the architecture calls it and touches nothing
   there (T5's relative bias keeps its ``d_model ** -0.5``). A component that wants the recipe's
   ``init_std`` names ``init_std`` in its factory's signature and uses it in ``reset_parameters``.
2. **The architecture fills in the rest**: weights of ``nn.Linear``, ``nn.Conv*`` and ``nn.Embedding`` get
   N(0, init_std), their biases zero, an embedding's padding row zero; norms keep their ones and zeros.
   A module that holds stacked weights (an MoE's ``GroupedExperts``: one tensor for all experts) defines
   ``fill_weights(std, residual_std)``, which this rule calls.
3. **Scaled residual outputs** (GPT-2): a projection that writes a sub-layer's output into the residual
   stream is marked by its component with :func:`residual_output`; under rule 2 its weight gets
   ``init_std / sqrt(2 * num_layers)``, so the residual stream's variance does not grow with depth.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["RESIDUAL_OUTPUT", "init_weights", "is_residual_output", "owns_init", "residual_output"]

RESIDUAL_OUTPUT = "zoo_residual_output"
"""The attribute :func:`residual_output` sets on a module."""

_FILLED = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Embedding)


def residual_output(module: nn.Module) -> nn.Module:
    """Mark ``module`` (a projection) as writing into the residual stream; returns it, for use inline::

    self.o_proj = residual_output(nn.Linear(H * D, E))
    """
    setattr(module, RESIDUAL_OUTPUT, True)
    return module


def is_residual_output(module: nn.Module) -> bool:
    return bool(getattr(module, RESIDUAL_OUTPUT, False))


def owns_init(module: nn.Module) -> bool:
    """True when a component module initialises itself (rule 1): it defines ``reset_parameters``."""
    return callable(getattr(module, "reset_parameters", None))


@torch.no_grad()
def init_weights(model: nn.Module, components: set[str], *, std: float, num_layers: int) -> None:
    """Initialise ``model`` by the contract above; ``components`` are the module paths components built."""
    residual_std = std / math.sqrt(2 * num_layers)
    owned: list[str] = []
    for path, module in model.named_modules():
        if any(path.startswith(f"{o}.") for o in owned):
            continue
        if path and path in components and owns_init(module):
            module.reset_parameters()
            owned.append(path)
            continue
        if isinstance(module, _FILLED):
            if module.weight.is_meta:
                continue
            nn.init.normal_(module.weight, 0.0, residual_std if is_residual_output(module) else std)
            if isinstance(module, nn.Embedding) and module.padding_idx is not None:
                module.weight[module.padding_idx].zero_()
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
        elif callable(getattr(module, "fill_weights", None)):
            module.fill_weights(std, residual_std)
