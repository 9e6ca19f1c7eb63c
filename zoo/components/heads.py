"""Output heads: what a model turns its final hidden states (N, L, E) into.

Every head has ``forward(h, *, mask=None)`` (``mask``: (N, L) bool, True on real tokens) and
``loss(logits, labels)``; the model decides which positions the labels align with.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from zoo.components.ffn import activation_module
from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.hookspecs import hookimpl
from zoo.label import Label
from zoo.limits import MAX_WIDTH


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over all positions whose label is not -100."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=-100)


def pool(h: torch.Tensor, mask: torch.Tensor | None, how: str) -> torch.Tensor:
    """(N, L, E) -> (N, E): the first ([CLS]) vector, or the mean over real (unpadded) positions."""
    if how == "cls":
        return h[:, 0]
    if mask is None:
        return h.mean(dim=1)
    weights = mask.to(h.dtype).unsqueeze(-1)  # (N, L, 1)
    return (h * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)


class LMHead(nn.Module):
    """Language-model head: hidden states to vocabulary logits, optionally tied to the token embedding.

    With ``proj_dim`` a bias-free ``project_out`` (E -> proj_dim) comes first and the output matrix is
    ``proj_dim`` wide: the way back of a token embedding with that ``proj_dim`` (OPT-350m: 1024 -> 512).

    With ``logits_bias`` a fixed bias (V,) is added to the logits: a persistent buffer, zeros until a checkpoint
    fills it, never trained (BART's ``final_logits_bias``, which a tied head keeps beside the token table).
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
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    loss = staticmethod(cross_entropy)


Activation = Literal["gelu", "gelu_tanh", "relu", "silu", "tanh"]
"""What a head's dense transform may apply (``tanh``: BERT's pooler; the rest as the FFNs name them)."""


class Transform(nn.Module):
    """Dense, activation, then optionally a LayerNorm: BERT's pooler (tanh), DistilBERT's pre-classifier (ReLU),
    ModernBERT's prediction head (GELU, then a norm). Shapes: (..., E) -> (..., E)."""

    def __init__(
        self,
        d_model: int,
        *,
        activation: Activation = "tanh",
        bias: bool = True,
        norm: bool = False,
        eps: float = 1e-5,
        norm_bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.dense = nn.Linear(d_model, d_model, bias=bias, **factory)
        self.activation = nn.Tanh() if activation == "tanh" else activation_module(activation)
        self.norm = nn.LayerNorm(d_model, eps=eps, bias=norm_bias, **factory) if norm else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.activation(self.dense(x))
        return y if self.norm is None else self.norm(y)


def _tying(tied: bool) -> str:
    """A head's output matrix in a box's words."""
    return "tied to the token embedding" if tied else "untied"


def transform_params(E: int, *, bias: bool, norm: bool, norm_bias: bool) -> int:
    """Parameters of a :class:`Transform` of width ``E``."""
    return E * E + E * bias + (E + E * norm_bias) * norm


class MaskedLMHead(nn.Module):
    """BERT's masked-LM head: dense + GELU + LayerNorm transform, then a (tied) decoder with a bias.

    ModernBERT's switches off the biases of the transform, its norm or the decoder (``transform_bias``,
    ``norm_bias``, ``bias``). With ``spare_bias`` the head also holds ``bias``, a second output bias that
    ``forward`` never adds: transformers 5's untied ``BertForMaskedLM`` stores ``cls.predictions.bias`` beside
    the decoder's own bias and applies only the decoder's, so a checkpoint keeps both, bit for bit.
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
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.tie_embeddings = tie_embeddings
        self.transform = nn.Linear(d_model, d_model, bias=transform_bias, **factory)
        self.activation = nn.Tanh() if activation == "tanh" else activation_module(activation)
        self.norm = nn.LayerNorm(d_model, eps=eps, bias=norm_bias, **factory)
        self.proj = nn.Linear(d_model, vocab_size, bias=bias, **factory)
        self.bias = nn.Parameter(torch.zeros(vocab_size, **factory)) if spare_bias else None
        self.spare_pooler = nn.Linear(d_model, d_model, **factory) if spare_pooler else None  # never applied
        self.spare_nsp = nn.Linear(d_model, 2, **factory) if spare_nsp else None  # never applied

    def forward(self, h: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.proj(self.norm(self.activation(self.transform(h))))  # (N, L, V)

    loss = staticmethod(cross_entropy)


class ClassificationHead(nn.Module):
    """Sequence (or image) classification: pool ([CLS] or masked mean), optional pooler, then a linear.

    The pooler is a :class:`Transform` (``pooler_activation``, ``pooler_bias``, ``pooler_norm``: ModernBERT's
    prediction head on the pooled vector)."""

    def __init__(
        self,
        d_model: int,
        *,
        num_classes: int,
        pool: Literal["cls", "mean"] = "cls",
        pooler: bool = False,
        pooler_activation: Activation = "tanh",
        pooler_bias: bool = True,
        pooler_norm: bool = False,
        eps: float = 1e-5,
        norm_bias: bool = True,
        dropout: float = 0.0,
        distillation: bool = False,
        spare_pooler: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.pool = pool
        self.tie_embeddings = False
        # DeiT: a second classifier on the distillation token (position 1); the logits average the two.
        self.distill_proj = nn.Linear(d_model, num_classes, **factory) if distillation else None
        options = dict(activation=pooler_activation, bias=pooler_bias, norm=pooler_norm, eps=eps, norm_bias=norm_bias)
        self.pooler = Pooler(d_model, pool=pool, **options, **factory) if pooler else None
        self.dropout = nn.Dropout(dropout)
        self.proj = nn.Linear(d_model, num_classes, **factory)
        self.spare_pooler = nn.Linear(d_model, d_model, **factory) if spare_pooler else None  # never applied

    def forward(self, h: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.pooler(h, mask=mask) if self.pooler is not None else pool(h, mask, self.pool)  # (N, E)
        if self.distill_proj is not None:  # [CLS] and distillation token classified apart, averaged
            return (self.proj(self.dropout(x)) + self.distill_proj(self.dropout(h[:, 1]))) / 2
        return self.proj(self.dropout(x))  # (N, num_classes)

    loss = staticmethod(cross_entropy)


class Pooler(Transform):
    """BERT's pooler: the pooled vector through dense + tanh (a :class:`Transform`); its output is the model's
    ``logits``."""

    def __init__(
        self,
        d_model: int,
        *,
        pool: Literal["cls", "mean"] = "cls",
        activation: Activation = "tanh",
        bias: bool = True,
        norm: bool = False,
        eps: float = 1e-5,
        norm_bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        options = dict(activation=activation, bias=bias, norm=norm, eps=eps, norm_bias=norm_bias)
        super().__init__(d_model, **options, device=device, dtype=dtype)
        self.pool = pool
        self.tie_embeddings = False

    def forward(self, h: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        return super().forward(pool(h, mask, self.pool))  # (N, E)

    @staticmethod
    def loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        raise ValueError("the pooler head produces features, not predictions: it has no loss; use labels=None")


class TokenClassificationHead(nn.Module):
    """A class for every token (named entities, part-of-speech tags): optionally a :class:`Transform` with a norm
    (ModernBERT's prediction head), dropout, then a linear (N, L, C)."""

    def __init__(
        self,
        d_model: int,
        *,
        num_classes: int,
        dropout: float = 0.0,
        transform: bool = False,
        activation: Activation = "gelu",
        transform_bias: bool = True,
        eps: float = 1e-5,
        norm_bias: bool = True,
        spare_pooler: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.tie_embeddings = False
        options = dict(activation=activation, bias=transform_bias, norm=True, eps=eps, norm_bias=norm_bias)
        self.transform = Transform(d_model, **options, **factory) if transform else None
        self.dropout = nn.Dropout(dropout)
        self.proj = nn.Linear(d_model, num_classes, **factory)
        self.spare_pooler = nn.Linear(d_model, d_model, **factory) if spare_pooler else None  # never applied

    def forward(self, h: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.transform is not None:
            h = self.transform(h)
        return self.proj(self.dropout(h))  # (N, L, C)

    loss = staticmethod(cross_entropy)


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

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"tie_embeddings": False, "bias": True, "rescale": True},
        {"softcap": 30.0},
        {"tie_embeddings": False, "proj_dim": 8},
        {"logits_bias": True},
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
        output = "next-token logits" if ctx.causal else "token logits"
        return Label("head", f"LM head · {self.type}", lines, output=output)


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

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"tie_embeddings": False},
        {"tie_embeddings": False, "spare_bias": True},
        {"activation": "gelu_tanh", "transform_bias": False, "norm_bias": False, "bias": False},
        {"spare_pooler": True, "spare_nsp": True},
    )

    def check(self, ctx: BuildContext) -> list[str]:
        return [] if ctx.vocab_size >= 1 else ["an mlm head predicts tokens: the recipe needs vocab_size"]

    def cost(self, ctx: BuildContext) -> Cost:
        # dense E·E (+ E), LayerNorm E (+ E), decoder V·E (tied or not) with its own V bias, a spare V bias.
        E, V = ctx.d_model, ctx.vocab_size
        params = transform_params(E, bias=self.transform_bias, norm=True, norm_bias=self.norm_bias)
        params += (0 if self.tie_embeddings else V * E) + V * self.bias + (V if self.spare_bias else 0)
        params += (E * E + E) * self.spare_pooler + (2 * E + 2) * self.spare_nsp
        return Cost(params=params, matmul=E * E + V * E, acts=3 * E + V)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        lines = ["dense + GELU + LayerNorm", f"linear {ctx.d_model} → {ctx.vocab_size}", _tying(self.tie_embeddings)]
        return Label("head", f"Masked-LM head · {self.type}", lines, output="token logits (masked LM)")


class ClassificationHeadConfig(ComponentConfig):
    type: Literal["classification"] = "classification"
    pool: Literal["cls", "mean"] = Field("cls", description="[CLS] vector or mask-aware mean of the sequence.")
    pooler: bool = Field(False, description="Dense + tanh on the pooled vector first (BERT).")
    pooler_activation: Activation = Field(
        "tanh",
        description="The pooler's activation (BERT, RoBERTa: tanh; DistilBERT's pre_classifier: relu; ModernBERT: "
        "gelu).",
    )
    pooler_bias: bool = Field(True, description="Bias of the pooler's dense layer (ModernBERT: classifier_bias).")
    pooler_norm: bool = Field(False, description="A LayerNorm after the pooler's activation (ModernBERT).")
    eps: float = Field(1e-5, gt=0, description="The pooler norm's epsilon.")
    norm_bias: bool = Field(True, description="Shift of the pooler's LayerNorm (ModernBERT: norm_bias).")
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout before the classifier.")
    distillation: bool = Field(
        False,
        description="A second classifier on the distillation token (position 1, DeiT), averaged with the [CLS] "
        "token's; needs pool: cls, no pooler, and embedding.distillation_token.",
    )
    spare_pooler: bool = Field(
        False,
        description="Keep a dense E x E pooler that is never applied (transformers' BigBird heads keep "
        "BigBirdModel's pooler beside them).",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"distillation": True},
        {"pool": "mean", "pooler": True, "spare_pooler": True},
        {"pooler": True, "pooler_activation": "relu"},
        {"pool": "mean", "pooler": True, "pooler_activation": "gelu", "pooler_bias": False, "pooler_norm": True},
    )

    def check(self, ctx: BuildContext) -> list[str]:
        problems = [] if ctx.num_classes >= 1 else ["a classification head needs num_classes in the recipe"]
        if self.distillation and (self.pool != "cls" or self.pooler):
            problems.append("distillation classifies the [CLS] and distillation tokens: set pool: cls, pooler: false")
        return problems

    def cost(self, ctx: BuildContext) -> Cost:
        E, C = ctx.d_model, ctx.num_classes
        pooler = transform_params(E, bias=self.pooler_bias, norm=self.pooler_norm, norm_bias=self.norm_bias)
        pooler = pooler * self.pooler + (E * E + E) * self.spare_pooler
        heads = 1 + int(self.distillation)  # DeiT's second classifier
        return Cost(
            params=pooler + heads * (E * C + C), matmul=(E * E if self.pooler else 0) + heads * E * C, per_sequence=True
        )

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        lines = [
            f"pool: {self.pool}" + (", dense + tanh" if self.pooler else ""),
            f"linear {ctx.d_model} → {ctx.num_classes}",
        ]
        return Label("head", "Classification head", lines, output=f"{ctx.num_classes} class logits")


class TokenClassificationHeadConfig(ComponentConfig):
    type: Literal["token_classification"] = "token_classification"
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout before the classifier.")
    transform: bool = Field(
        False, description="Dense + activation + LayerNorm on every token first (ModernBERT's prediction head)."
    )
    activation: Activation = Field("gelu", description="The transform's activation.")
    transform_bias: bool = Field(True, description="Bias of the transform's dense layer (ModernBERT: false).")
    eps: float = Field(1e-5, gt=0, description="The transform norm's epsilon.")
    norm_bias: bool = Field(True, description="Shift of the transform's LayerNorm (ModernBERT: false).")
    spare_pooler: bool = Field(
        False,
        description="Keep a dense E x E pooler that is never applied (transformers' BigBird heads keep "
        "BigBirdModel's pooler beside them).",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"dropout": 0.1, "spare_pooler": True},
        {"transform": True, "transform_bias": False, "norm_bias": False},
    )

    def check(self, ctx: BuildContext) -> list[str]:
        return [] if ctx.num_classes >= 1 else ["a token_classification head needs num_classes in the recipe"]

    def cost(self, ctx: BuildContext) -> Cost:
        E, C = ctx.d_model, ctx.num_classes
        transform = transform_params(E, bias=self.transform_bias, norm=True, norm_bias=self.norm_bias)
        transform = transform * self.transform + (E * E + E) * self.spare_pooler
        return Cost(params=transform + E * C + C, matmul=E * C + E * E * self.transform, acts=E + C)


class PoolerConfig(ComponentConfig):
    type: Literal["pooler"] = "pooler"
    pool: Literal["cls", "mean"] = Field("cls", description="[CLS] vector or mask-aware mean of the sequence.")

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"pool": "mean"})

    def cost(self, ctx: BuildContext) -> Cost:
        E = ctx.d_model
        return Cost(params=E * E + E, matmul=E * E, per_sequence=True)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        E = ctx.d_model
        return Label(
            "head", f"Pooler · {self.type}", [f"pool: {self.pool}", f"dense {E} → {E}, tanh"], output="pooled features"
        )


@hookimpl
def register_components(register):
    register("head", "lm", LMHead, LMHeadConfig)
    register("head", "mlm", MaskedLMHead, MaskedLMHeadConfig)
    register("head", "classification", ClassificationHead, ClassificationHeadConfig)
    register("head", "pooler", Pooler, PoolerConfig)
    register("head", "token_classification", TokenClassificationHead, TokenClassificationHeadConfig)
