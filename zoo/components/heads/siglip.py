"""A dual-encoder's joint head (``siglip``): SigLIP's text head and the image tower's attention pooling, and the
biased, scaled cosine similarities of every image with every text, trained with the sigmoid loss.

    text  (N_t, L, E_t) --final position--> (N_t, E_t) --text_head (biased)--> (N_t, V) --L2--\\
                                                                                              logits (N_i, N_t) =
    image (N_i, T, V)   --attention pooling: a learned probe queries the tokens--> (N_i, V) --L2--/  img @ txt^T
                                                                                               * exp(s) + b

The text vector is read at the ``final`` position, ``h[:, -1]``, whether that token is real or padding (SigLIP's
text tower attends both ways and its tokenizer pads every text to max_length, so the final position has seen the
whole text; Hugging Face's ``SiglipTextModel`` reads ``last_hidden_state[:, -1]``); ``last`` reads the last real
token instead (padding invisible, but not what Hugging Face computes on a padded batch). The image vector is the
multihead attention pooling (MAP) of all the image tower's tokens: one learned query (``probe``) attends to them,
then a LayerNorm and an MLP add a residual. There are no projections into a joint space: the text head maps the
text width to the image width. ``logit_scale`` s (log space) and ``logit_bias`` b are learned; SigLIP starts them
at log 10 and -10.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from zoo.components.ffn import Activation, activation_module
from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.label import Label

TextPool = Literal["final", "last"]

SIGLIP_LOGIT_SCALE = math.log(10.0)
SIGLIP_LOGIT_BIAS = -10.0


class AttentionPool(nn.Module):
    """Multihead attention pooling (SigLIP's ``vision_model.head``): a learned probe attends to the tokens with
    ``nn.MultiheadAttention``'s weight layout (a fused ``in_proj``, an ``out_proj``), then LayerNorm, MLP, residual."""

    def __init__(self, width: int, heads: int, hidden: int, activation: str, eps: float, factory: dict) -> None:
        super().__init__()
        self.heads = heads
        self.probe = nn.Parameter(torch.empty(1, 1, width, **factory))
        self.in_proj_weight = nn.Parameter(torch.empty(3 * width, width, **factory))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * width, **factory))
        self.out_proj = nn.Linear(width, width, **factory)
        self.layernorm = nn.LayerNorm(width, eps=eps, **factory)
        self.up_proj = nn.Linear(width, hidden, **factory)
        self.act = activation_module(activation, **factory)
        self.down_proj = nn.Linear(hidden, width, **factory)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """(N, T, V) tokens -> (N, V) pooled vectors."""
        N, T, V = h.shape
        wq, wk, wv = self.in_proj_weight.chunk(3)
        bq, bk, bv = self.in_proj_bias.chunk(3)
        q = F.linear(self.probe, wq, bq).expand(N, 1, V)
        k, v = F.linear(h, wk, bk), F.linear(h, wv, bv)
        q, k, v = (x.view(N, x.shape[1], self.heads, V // self.heads).transpose(1, 2) for x in (q, k, v))
        x = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(N, 1, V)
        x = self.out_proj(x)
        x = x + self.down_proj(self.act(self.up_proj(self.layernorm(x))))
        return x[:, 0]


class SiglipHead(nn.Module):
    """SigLIP's text head and image attention pooling, and the similarity logits ``cos · exp(s) + b``."""

    independent_matches = True
    """Each image-text pair is a match or not on its own (the sigmoid loss): a caption's probability is the sigmoid
    of its logit, not a softmax over the captions (as transformers' zero-shot pipeline gives SigLIP's)."""

    def __init__(
        self,
        d_model: int,
        *,
        vision_width: int,
        pool_heads: int,
        pool_hidden: int | None = None,
        pool_activation: Activation = "gelu_tanh",
        pool_eps: float = 1e-6,
        text_pool: TextPool = "final",
        logit_scale: float = SIGLIP_LOGIT_SCALE,
        logit_bias: float = SIGLIP_LOGIT_BIAS,
        causal_text: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.text_pool = text_pool
        self.starts = (logit_scale, logit_bias)
        self.tie_embeddings = False
        self.text_head = nn.Linear(d_model, vision_width, **factory)
        hidden = pool_hidden if pool_hidden is not None else 4 * vision_width
        self.image_pool = AttentionPool(vision_width, pool_heads, hidden, pool_activation, pool_eps, factory)
        self.logit_scale = nn.Parameter(torch.empty(1, **factory))
        self.logit_bias = nn.Parameter(torch.empty(1, **factory))

    def reset_parameters(self) -> None:
        # SigLIP's init: LeCun-normal linears with zero biases, Xavier-uniform probe, fused attention input and
        # MLP (its biases N(0, 1e-6)), the temperature and bias at their starting values.
        pool = self.image_pool
        for linear in (self.text_head, pool.out_proj):
            nn.init.trunc_normal_(linear.weight, std=linear.in_features**-0.5 / 0.87962566103423978)
            nn.init.zeros_(linear.bias)
        for weight in (pool.probe, pool.in_proj_weight, pool.up_proj.weight, pool.down_proj.weight):
            nn.init.xavier_uniform_(weight)
        nn.init.zeros_(pool.in_proj_bias)
        for bias in (pool.up_proj.bias, pool.down_proj.bias):
            nn.init.normal_(bias, std=1e-6)
        pool.layernorm.reset_parameters()
        if hasattr(pool.act, "reset_parameters"):
            pool.act.reset_parameters()
        nn.init.constant_(self.logit_scale, self.starts[0])
        nn.init.constant_(self.logit_bias, self.starts[1])

    def text_embeds(self, h: torch.Tensor, input_ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """The text tower's final hidden states (N, L, E_t) -> text vectors (N, V)."""
        if self.text_pool == "last" and mask is not None:
            index = (mask.long() * torch.arange(1, h.shape[1] + 1, device=h.device)).argmax(dim=1)
            return self.text_head(h[torch.arange(h.shape[0], device=h.device), index])
        return self.text_head(h[:, -1])

    def image_embeds(self, h: torch.Tensor) -> torch.Tensor:
        """The image tower's final hidden states (N, T, V) -> image vectors (N, V): their attention pooling."""
        return self.image_pool(h)

    def forward(self, image: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """Image (N_i, V) and text (N_t, V) vectors -> similarity logits (N_i, N_t)."""
        image = F.normalize(image, dim=-1)
        text = F.normalize(text, dim=-1)
        return image @ text.T * self.logit_scale.exp() + self.logit_bias

    @staticmethod
    def loss(logits: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        """SigLIP's sigmoid loss over a batch of pairs, image ``i`` with text ``i``: every image-text pair is a
        binary decision, ``-log σ(z · logit)`` with z = +1 for a match and -1 otherwise, summed over the texts and
        averaged over the images (Hugging Face's ``SiglipModel``). ``labels`` (N,): the class of each pair, when
        pairs of one class are alike: every pair of the image's class is then a match."""
        if logits.shape[0] != logits.shape[1]:
            raise ValueError(f"the sigmoid loss needs as many texts as images (pairs), got {tuple(logits.shape)}")
        if labels is None:
            match = torch.eye(logits.shape[0], device=logits.device, dtype=torch.bool)
        else:
            match = labels[:, None] == labels[None, :]
        signs = match.to(logits.dtype) * 2 - 1
        return -F.logsigmoid(signs * logits).sum(dim=-1).mean()


class SiglipHeadConfig(ComponentConfig):
    type: Literal["siglip"] = "siglip"
    vision_width: int | None = Field(
        None, ge=1, description="The image tower's width; a dual-encoder fills it in from vision.d_model."
    )
    pool_heads: int | None = Field(
        None, ge=1, description="Heads of the image attention pooling; a dual-encoder fills it in from the image tower."
    )
    pool_hidden: int | None = Field(
        None, ge=1, description="The pooling MLP's width (None: 4 * vision_width); a dual-encoder fills it in."
    )
    pool_activation: Activation = Field("gelu_tanh", description="The pooling MLP's activation (the image tower's).")
    pool_eps: float = Field(1e-6, gt=0, description="The pooling LayerNorm's epsilon (the image tower's).")
    text_pool: TextPool = Field(
        "final",
        description="Which text token is the sequence's vector: final (the last position, padding or not: SigLIP) "
        "or last (the last real token).",
    )
    causal_text: bool = Field(False, description="The text tower attends causally (SigLIP's attends both ways).")
    logit_scale: float = Field(SIGLIP_LOGIT_SCALE, description="The log temperature's starting value.")
    logit_bias: float = Field(SIGLIP_LOGIT_BIAS, description="The logit bias's starting value.")

    joins_towers: ClassVar[bool] = True
    reads_cls: ClassVar[bool] = False
    from_vision: ClassVar[dict[str, str]] = {
        "pool_heads": "attention.num_heads",
        "pool_hidden": "ffn.hidden",
        "pool_activation": "ffn.activation",
        "pool_eps": "norm.eps",
    }
    """Head fields a dual-encoder fills in from its image tower's recipe (and checks against it)."""

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"vision_width": 16, "pool_heads": 2, "pool_eps": 1e-5, "pool_activation": "gelu", "text_pool": "last"},
        {"pool_activation": "gelu", "text_pool": "last", "logit_scale": 0.0, "logit_bias": 0.0},
    )

    def check(self, ctx: BuildContext) -> list[str]:
        if self.vision_width is None:
            return ["a siglip head joins the two towers of a dual-encoder (architecture: dual-encoder)"]
        if self.pool_heads is None:
            return ["head.pool_heads is unset: a dual-encoder fills it in from vision.attention.num_heads"]
        if self.vision_width % self.pool_heads:
            return [f"head.pool_heads ({self.pool_heads}) must divide the image width ({self.vision_width})"]
        return []

    def cost(self, ctx: BuildContext) -> Cost:
        # Per text: the text head. Per image: the probe's query and output projections and the MLP on one vector;
        # the keys and values of the image's T tokens (2·T·V² more) are the image tower's length, not the text's.
        E, V = ctx.d_model, self.vision_width or 0
        F_ = self.pool_hidden if self.pool_hidden is not None else 4 * V
        text = E * V + V
        pool = V + (3 * V * V + 3 * V) + (V * V + V) + 2 * V + (V * F_ + F_) + (F_ * V + V)
        return Cost(params=text + pool + 2, matmul=E * V + 2 * V * V + 2 * V * F_, per_sequence=True)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        V = self.vision_width
        hidden = self.pool_hidden if self.pool_hidden is not None else 4 * (V or 0)
        text = "final position" if self.text_pool == "final" else "last real token"
        lines = [
            f"text: {text}, linear {ctx.d_model} → {V}",
            f"image: attention pooling, {self.pool_heads} heads, MLP {hidden}",
            "cosine × exp(logit_scale) + logit_bias",
        ]
        return Label("head", "SigLIP head", lines, output="image-text logits")
