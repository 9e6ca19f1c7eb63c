"""A dual-encoder's joint head (``contrastive``): CLIP's projections of the text and image towers into one space,
and the scaled cosine similarities of every image with every text, trained with the symmetric contrastive loss.

    text  (N_t, L, E_t) --pool--> (N_t, E_t) --text_projection-->   (N_t, P) --L2--\\
                                                                                    logits (N_i, N_t)
    image (N_i, T, E_v) --pool--> (N_i, E_v) --visual_projection--> (N_i, P) --L2--/  = img @ txt^T * exp(s)

The text vector is the hidden state of the end-of-text token: ``eos`` finds the first ``eos_token_id``, ``argmax``
the largest id (CLIP's first checkpoints, whose end-of-text token is the vocabulary's last), ``last`` the last real
token. The image vector is the [CLS] token's. ``logit_scale`` s is learned in log space (CLIP starts at log(1/0.07)).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.label import Label

from .base import pool

TextPool = Literal["eos", "argmax", "last"]

CLIP_LOGIT_SCALE = 2.6592
"""log(1 / 0.07): the temperature CLIP starts from."""


class ContrastiveHead(nn.Module):
    """Projections of both towers' pooled vectors into ``proj_dim``, and their scaled cosine similarities."""

    def __init__(
        self,
        d_model: int,
        *,
        vision_width: int,
        proj_dim: int,
        text_pool: TextPool = "eos",
        eos_token_id: int | None = None,
        bias: bool = False,
        logit_scale: float = CLIP_LOGIT_SCALE,
        causal_text: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.text_pool = text_pool
        self.eos_token_id = eos_token_id
        self.logit_scale_init = logit_scale
        self.tie_embeddings = False
        self.text_projection = nn.Linear(d_model, proj_dim, bias=bias, **factory)
        self.visual_projection = nn.Linear(vision_width, proj_dim, bias=bias, **factory)
        self.logit_scale = nn.Parameter(torch.empty((), **factory))

    def reset_parameters(self) -> None:
        # CLIP's init: both projections N(0, width^-0.5), the temperature at its starting value.
        for proj in (self.text_projection, self.visual_projection):
            nn.init.normal_(proj.weight, std=proj.in_features**-0.5)
            if proj.bias is not None:
                nn.init.zeros_(proj.bias)
        nn.init.constant_(self.logit_scale, self.logit_scale_init)

    def text_embeds(self, h: torch.Tensor, input_ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """The text tower's final hidden states (N, L, E_t) -> projected text vectors (N, P)."""
        if self.text_pool == "argmax":
            index = input_ids.argmax(dim=-1)
        elif self.text_pool == "eos":
            index = (input_ids == self.eos_token_id).int().argmax(dim=-1)  # the first end-of-text token
        else:  # the last real token, as every head pools it
            return self.text_projection(pool(h, mask, "last"))
        return self.text_projection(h[torch.arange(h.shape[0], device=h.device), index])

    def image_embeds(self, h: torch.Tensor) -> torch.Tensor:
        """The image tower's final hidden states (N, T, E_v) -> projected image vectors (N, P): its [CLS] token."""
        return self.visual_projection(h[:, 0])

    def forward(self, image: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """Projected image (N_i, P) and text (N_t, P) vectors -> similarity logits (N_i, N_t)."""
        image = F.normalize(image, dim=-1)
        text = F.normalize(text, dim=-1)
        return image @ text.T * self.logit_scale.exp()

    @staticmethod
    def loss(logits: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        """CLIP's symmetric loss over a batch of pairs, image ``i`` with text ``i``: cross-entropy of each image over
        the texts and of each text over the images, averaged. ``labels`` (N,): the class of each pair, when pairs of
        one class are alike (captions of a label): every pair of the image's class is then a match, equally."""
        if logits.shape[0] != logits.shape[1]:
            raise ValueError(f"the contrastive loss needs as many texts as images (pairs), got {tuple(logits.shape)}")
        if labels is None:
            target = torch.arange(logits.shape[0], device=logits.device)
            return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2
        same = (labels[:, None] == labels[None, :]).to(logits.dtype)
        target = same / same.sum(dim=1, keepdim=True)  # symmetric: the same target both ways
        return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2


class ContrastiveHeadConfig(ComponentConfig):
    type: Literal["contrastive"] = "contrastive"
    proj_dim: int = Field(512, ge=1, description="The width of the joint space both towers project to.")
    vision_width: int | None = Field(
        None, ge=1, description="The image tower's width; a dual-encoder fills it in from vision.d_model."
    )
    text_pool: TextPool = Field(
        "eos",
        description="Which text token is the sequence's vector: eos (the first eos_token_id), argmax (the largest "
        "id: CLIP's first checkpoints) or last (the last real token).",
    )
    eos_token_id: int | None = Field(None, ge=0, description="The end-of-text token (text_pool: eos).")
    bias: bool = Field(False, description="Biases on the two projections (CLIP has none).")
    causal_text: bool = Field(
        True, description="The text tower attends causally, each token to those before it (CLIP); false: to all."
    )
    logit_scale: float = Field(CLIP_LOGIT_SCALE, description="The log temperature's starting value.")

    joins_towers: ClassVar[bool] = True
    """The head joins a dual-encoder's two towers (the architecture checks that it has them)."""
    reads_cls: ClassVar[bool] = True
    """The head reads the image tower's [CLS] token."""

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"proj_dim": 8, "vision_width": 16, "text_pool": "argmax"},
        {"proj_dim": 8, "vision_width": 16, "text_pool": "last", "bias": True},
    )

    @model_validator(mode="after")
    def _eos_needs_its_token(self) -> ContrastiveHeadConfig:
        if self.text_pool == "eos" and self.eos_token_id is None:
            raise ValueError("text_pool eos pools the first eos_token_id: set head.eos_token_id, or text_pool: last")
        return self

    def check(self, ctx: BuildContext) -> list[str]:
        if self.vision_width is None:
            return ["a contrastive head joins the two towers of a dual-encoder (architecture: dual-encoder)"]
        return []

    def cost(self, ctx: BuildContext) -> Cost:
        E, V, P = ctx.d_model, self.vision_width or 0, self.proj_dim
        projections = (E + V) * P + 2 * P * self.bias
        return Cost(params=projections + 1, matmul=(E + V) * P, per_sequence=True)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        lines = [
            f"text: {self.text_pool} token, linear {ctx.d_model} → {self.proj_dim}",
            f"image: [CLS], linear {self.vision_width} → {self.proj_dim}",
            "cosine similarity × exp(logit_scale)",
        ]
        return Label("head", "Contrastive head", lines, output="image-text logits")
