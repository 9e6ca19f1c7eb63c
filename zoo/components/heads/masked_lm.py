"""BERT's masked-LM head (``mlm``): a dense + activation + LayerNorm transform, then a (tied) decoder, with its
config."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import nn

from zoo.components.ffn import activation_module
from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.label import Label
from zoo.limits import MAX_WIDTH
from zoo.tensor_parallel import check_divides

from .base import Activation, _tying, cross_entropy


class MaskedLMHead(nn.Module):
    """BERT's masked-LM head: dense + GELU + LayerNorm transform, then a (tied) decoder with a bias.

    ModernBERT's switches off the biases of the transform, its norm or the decoder (``transform_bias``,
    ``norm_bias``, ``bias``). With ``spare_bias`` the head also holds ``bias``, a second output bias that
    ``forward`` never adds: transformers 5's untied ``BertForMaskedLM`` stores ``cls.predictions.bias`` beside
    the decoder's own bias and applies only the decoder's, so a checkpoint keeps both, bit for bit.
    With ``proj_dim`` the transform narrows to a factorized embedding's width (ALBERT's, ELECTRA's generator):
    dense E -> proj_dim, its norm and the decoder at that width, so that a tied decoder is the token table.
    """

    def __init__(
        self,
        d_model: int,
        *,
        vocab_size: int,
        tie_embeddings: bool = True,
        eps: float = 1e-12,
        spare_bias: bool = False,
        activation: Activation = "gelu",
        transform_bias: bool = True,
        norm_bias: bool = True,
        bias: bool = True,
        spare_pooler: bool = False,
        spare_nsp: bool = False,
        proj_dim: int | None = None,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        width = proj_dim or d_model
        self.tie_embeddings = tie_embeddings
        self.transform = nn.Linear(d_model, width, bias=transform_bias, **factory)
        self.activation = nn.Tanh() if activation == "tanh" else activation_module(activation)
        self.norm = nn.LayerNorm(width, eps=eps, bias=norm_bias, **factory)
        self.proj = nn.Linear(width, vocab_size, bias=bias, **factory)
        self.bias = nn.Parameter(torch.zeros(vocab_size, **factory)) if spare_bias else None
        self.spare_pooler = nn.Linear(d_model, d_model, **factory) if spare_pooler else None  # never applied
        self.spare_nsp = nn.Linear(d_model, 2, **factory) if spare_nsp else None  # never applied

    def forward(self, h: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.proj(self.norm(self.activation(self.transform(h))))  # (N, L, V)

    loss = staticmethod(cross_entropy)

    def shard_tensor(self, mesh: Any) -> None:
        """Tensor parallelism (``zoo.tensor_parallel``): the vocabulary splits over the ranks, and the logits stay
        split for a loss computed without gathering them (as ``LMHead``'s); the transform, its norm and the spare
        weights (never applied) stay whole."""
        from torch.distributed.tensor import Shard
        from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

        check_divides("masked LM head", mesh.size(), vocab_size=self.proj.out_features)
        parallelize_module(self, mesh, {"proj": ColwiseParallel(output_layouts=Shard(-1), use_local_output=False)})


class MaskedLMHeadConfig(ComponentConfig):
    type: Literal["mlm"] = "mlm"
    tie_embeddings: bool = Field(True, description="Share the token embedding matrix as the decoder weight.")
    eps: float = Field(1e-12, gt=0, description="LayerNorm epsilon of the transform.")
    spare_bias: bool = Field(
        False,
        description="Keep a second output bias that is never added (transformers 5's untied BertForMaskedLM "
        "stores cls.predictions.bias beside the decoder's bias).",
    )
    activation: Activation = Field("gelu", description="The transform's activation (BERT: gelu).")
    transform_bias: bool = Field(True, description="Bias of the transform's dense layer (ModernBERT: false).")
    norm_bias: bool = Field(True, description="Shift of the transform's LayerNorm (ModernBERT: false).")
    bias: bool = Field(True, description="The decoder's output bias (ModernBERT's decoder_bias).")
    spare_pooler: bool = Field(
        False,
        description="Keep a dense E x E pooler that is never applied (transformers' BigBird heads keep "
        "BigBirdModel's pooler beside them).",
    )
    spare_nsp: bool = Field(
        False,
        description="Keep a next-sentence classifier (E -> 2) that is never applied (BigBirdForPreTraining's "
        "cls.seq_relationship).",
    )
    proj_dim: int | None = Field(
        None,
        ge=1,
        le=MAX_WIDTH,
        description="The transform's output width, which the decoder reads: a factorized embedding's width "
        "(ALBERT, ELECTRA's generator; tied, filled in from embedding.width); default d_model.",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"tie_embeddings": False},
        {"tie_embeddings": False, "spare_bias": True},
        {"activation": "gelu_tanh", "transform_bias": False, "norm_bias": False, "bias": False},
        {"spare_pooler": True, "spare_nsp": True},
        {"tie_embeddings": False, "proj_dim": 8},
    )

    def check(self, ctx: BuildContext) -> list[str]:
        return [] if ctx.vocab_size >= 1 else ["an mlm head predicts tokens: the recipe needs vocab_size"]

    def cost(self, ctx: BuildContext) -> Cost:
        # dense E·E (+ E), LayerNorm E (+ E), decoder V·E (tied or not) with its own V bias, a spare V bias.
        # With proj_dim P the dense is E·P and the norm and decoder are P wide.
        E, V, P = ctx.d_model, ctx.vocab_size, self.proj_dim or ctx.d_model
        params = E * P + P * self.transform_bias + P + P * self.norm_bias
        params += (0 if self.tie_embeddings else V * P) + V * self.bias + (V if self.spare_bias else 0)
        params += (E * E + E) * self.spare_pooler + (2 * E + 2) * self.spare_nsp
        return Cost(params=params, matmul=E * P + V * P, acts=E + 2 * P + V)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        P = self.proj_dim or ctx.d_model
        dense = "dense + GELU + LayerNorm" + ("" if P == ctx.d_model else f" ({ctx.d_model} → {P})")
        lines = [dense, f"linear {P} → {ctx.vocab_size}", _tying(self.tie_embeddings)]
        return Label("head", f"Masked-LM head · {self.type}", lines, output="token logits (masked LM)")
