"""The language-model head (``lm``): hidden states to vocabulary logits, optionally tied to the token
embedding, with its config."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
from pydantic import Field, model_validator
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.label import Label, number
from zoo.limits import MAX_WIDTH
from zoo.tensor_parallel import check_divides, refuse

from .base import _tying, cross_entropy


class LMHead(nn.Module):
    """Language-model head: hidden states to vocabulary logits, optionally tied to the token embedding.

    With ``proj_dim`` a bias-free ``project_out`` (E -> proj_dim) comes first and the output matrix is
    ``proj_dim`` wide: the way back of a token embedding with that ``proj_dim`` (OPT-350m: 1024 -> 512).

    With ``logits_bias`` a fixed bias (V,) is added to the logits: a persistent buffer, zeros until a checkpoint
    fills it, never trained (BART's ``final_logits_bias``, which a tied head keeps beside the token table).

    ``logit_divisor`` divides the logits by a constant (Granite's ``logits_scaling``), after any bias and before
    any soft-cap.
    """

    def __init__(
        self,
        d_model: int,
        *,
        vocab_size: int,
        tie_embeddings: bool = True,
        bias: bool = False,
        rescale: bool = False,
        softcap: float | None = None,
        proj_dim: int | None = None,
        logits_bias: bool = False,
        logit_divisor: float = 1.0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.tie_embeddings = tie_embeddings
        width = d_model if proj_dim is None else proj_dim
        self.project_out = (
            nn.Linear(d_model, width, bias=False, device=device, dtype=dtype) if proj_dim is not None else None
        )
        self.proj = nn.Linear(width, vocab_size, bias=bias, device=device, dtype=dtype)
        # T5 scales by d_model**-0.5 before a tied projection, since its embeddings are not scaled down.
        self.scale = d_model**-0.5 if rescale else 1.0
        self.logit_divisor = logit_divisor  # Granite: logits / 8
        self.softcap = softcap  # Gemma 2: logits become softcap * tanh(logits / softcap)
        bias_buffer = torch.zeros(vocab_size, device=device, dtype=dtype) if logits_bias else None
        self.register_buffer("logits_bias", bias_buffer)  # None: no buffer, no addition

    def forward(self, h: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.scale != 1.0:
            h = h * self.scale
        if self.project_out is not None:
            h = self.project_out(h)  # (N, L, proj_dim)
        logits = self.proj(h)  # (N, L, V)
        if self.logits_bias is not None:
            logits = logits + self.logits_bias
        if self.logit_divisor != 1.0:  # a constructor constant: no division at the default
            logits = logits / self.logit_divisor
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    loss = staticmethod(cross_entropy)

    def shard_tensor(self, mesh: Any) -> None:
        """Tensor parallelism (``zoo.tensor_parallel``): the vocabulary splits over the ranks, and the logits stay
        split (a ``DTensor`` sharded on its last dimension) for a loss computed without gathering them
        (``torch.distributed.tensor.parallel.loss_parallel``); ``project_out`` stays whole."""
        from torch.distributed.tensor import Shard
        from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

        check_divides("lm head", mesh.size(), vocab_size=self.proj.out_features)
        if self.logits_bias is not None:
            refuse("lm head", "logits_bias (a fixed bias over the whole vocabulary)", mesh.size())
        parallelize_module(self, mesh, {"proj": ColwiseParallel(output_layouts=Shard(-1), use_local_output=False)})


class LMHeadConfig(ComponentConfig):
    type: Literal["lm"] = "lm"
    tie_embeddings: bool = Field(True, description="Share the token embedding matrix as the output weight.")
    bias: bool = Field(False, description="Learn an output bias (not with tied embeddings).")
    rescale: bool = Field(False, description="Multiply hidden states by d_model**-0.5 first (T5).")
    softcap: float | None = Field(
        None, gt=0, description="Cap logits at ±softcap: softcap * tanh(logits / softcap) (Gemma 2: 30)."
    )
    proj_dim: int | None = Field(
        None,
        ge=1,
        le=MAX_WIDTH,
        description="Project hidden states to this width (bias-free linear) before the output matrix (OPT-350m: "
        "512); tied, it must equal embedding.proj_dim (filled in from it when left out). Default: no projection.",
    )
    logits_bias: bool = Field(
        False,
        description="Add a fixed, untrained bias to the logits, a buffer beside a tied table (BART's "
        "final_logits_bias); zeros until a checkpoint sets it.",
    )
    logit_divisor: float = Field(
        1.0,
        gt=0,
        description="Divide the logits by this constant, after any logits_bias and before any softcap (Granite's "
        "logits_scaling: 8.0); default 1.0, no division.",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"tie_embeddings": False, "bias": True, "rescale": True},
        {"softcap": 30.0},
        {"tie_embeddings": False, "proj_dim": 8},
        {"logits_bias": True},
        {"logit_divisor": 8.0},
        {"tie_embeddings": False, "logit_divisor": 0.5, "softcap": 30.0},
    )

    @model_validator(mode="after")
    def _tied_has_no_bias(self):
        if self.tie_embeddings and self.bias:
            raise ValueError("a tied LM head has no bias: set bias: false or tie_embeddings: false")
        return self

    def check(self, ctx: BuildContext) -> list[str]:
        return [] if ctx.vocab_size >= 1 else ["an lm head predicts tokens: the recipe needs vocab_size"]

    def cost(self, ctx: BuildContext) -> Cost:
        # A tied head reuses the token table (counted with the embedding) but still multiplies by it.
        # With proj_dim P: the E·P projection first, then a V·P output matrix.
        E, V = ctx.d_model, ctx.vocab_size
        P = E if self.proj_dim is None else self.proj_dim
        project = 0 if self.proj_dim is None else E * P
        params = project + (0 if self.tie_embeddings else V * P) + (V if self.bias else 0)
        capped = V if self.softcap is not None else 0  # the capped logits are kept as well as the raw ones
        acts = E + V + capped + (0 if self.proj_dim is None else P)
        return Cost(params=params, matmul=project + V * P, acts=acts)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        E, V = ctx.d_model, ctx.vocab_size
        width = f"linear {E} → {V}" if self.proj_dim is None else f"linear {E} → {self.proj_dim} → {V}"
        lines = [width, _tying(self.tie_embeddings)] + (["input scaled by 1/√d_model"] if self.rescale else [])
        if self.logit_divisor != 1.0:
            lines.append(f"logits divided by {self.logit_divisor:g}")
        if self.softcap is not None:
            lines.append(f"logits soft-capped at ±{number(self.softcap)}")
        output = "next-token logits" if ctx.causal else "token logits"
        return Label("head", f"LM head · {self.type}", lines, output=output)
