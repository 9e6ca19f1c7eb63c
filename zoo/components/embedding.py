"""Input embeddings: token ids to vectors, and images to a sequence of patch vectors."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.hookspecs import hookimpl
from zoo.label import Label
from zoo.limits import MAX_WIDTH
from zoo.tensor_parallel import check_divides, refuse


class TokenEmbedding(nn.Module):
    """Token ids to vectors, with optional segment (token-type) embeddings, sqrt(d_model) scaling and a constant
    ``multiplier`` (Granite's ``embedding_multiplier``), applied after the scaling.

    With ``proj_dim`` the token table is ``proj_dim`` wide and a bias-free ``project_in`` (proj_dim -> E)
    brings its vectors to the model's width (OPT-350m: 512 -> 1024); scaling and segments come after it.
    With ``task_types`` a task-type table (ERNIE's) adds task 0's vector to every token, as transformers does
    when no task ids are given.

    With ``width`` the embedding is factorized (ALBERT, ELECTRA): its tables are ``width`` wide, and so are the
    positions and the embedding norm that the stack adds next; ``project``, a biased linear (width -> E), then
    brings them to the blocks' width (the stack calls it, after the norm and dropout).

    Shapes: ids (N, L) -> (N, L, E), or (N, L, width).
    """

    def __init__(
        self,
        d_model: int,
        *,
        vocab_size: int,
        padding_idx: int | None = None,
        scale: bool = False,
        round_scale: bool = False,
        multiplier: float = 1.0,
        proj_dim: int | None = None,
        type_vocab_size: int = 0,
        task_types: int = 0,
        width: int | None = None,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        table = width or proj_dim or d_model
        out = width or d_model  # what the types add to, and what this returns
        self.token = nn.Embedding(vocab_size, table, padding_idx=padding_idx, **factory)
        self.project_in = nn.Linear(table, d_model, bias=False, **factory) if proj_dim is not None else None
        # BERT adds a learned segment vector; sentence A (type 0) is the default.
        self.token_type = nn.Embedding(type_vocab_size, out, **factory) if type_vocab_size else None
        self.task_type = nn.Embedding(task_types, out, **factory) if task_types else None
        self.project = nn.Linear(width, d_model, **factory) if width is not None else None
        # The original Transformer multiplies by sqrt(d_model) so the embeddings are not drowned
        # by the positional signal, whose entries are of order 1.
        self.scale = math.sqrt(d_model) if scale else 1.0
        # Gemma multiplies by sqrt(d_model) rounded to the weights' dtype (bf16: sqrt(2048) = 45.25).
        self.round_scale = round_scale
        self.multiplier = multiplier  # Granite: the embeddings times 12

    @property
    def weight(self) -> nn.Parameter:
        """The token table: the parameter a tied output head shares."""
        return self.token.weight

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        x = self.token(input_ids)  # (N, L, E), or (N, L, proj_dim or width) ...
        if self.project_in is not None:
            x = self.project_in(x)  # ... brought to (N, L, E)
        if self.scale != 1.0:  # a constructor constant: no multiply at all when unscaled
            x = x * (torch.tensor(self.scale, dtype=x.dtype) if self.round_scale else self.scale)
        if self.multiplier != 1.0:  # likewise: no multiply at the default
            x = x * self.multiplier
        if self.token_type is not None:
            x = x + (self.token_type.weight[0] if token_type_ids is None else self.token_type(token_type_ids))
        if self.task_type is not None:
            x = x + self.task_type.weight[0]  # task 0, transformers' default
        return x

    def shard_tensor(self, mesh: Any) -> None:
        """Tensor parallelism (``zoo.tensor_parallel``): the vocabulary splits over the ranks (each looks up the ids
        of its rows, zeros for the rest, and the ranks' lookups are summed); token and task types and ``project_in``
        stay whole."""
        from torch.distributed.tensor import Replicate
        from torch.distributed.tensor.parallel import RowwiseParallel, parallelize_module

        check_divides("token embedding", mesh.size(), vocab_size=self.token.num_embeddings)
        if self.token.padding_idx is not None:
            refuse("token embedding", f"padding_idx ({self.token.padding_idx}, a row kept at zero)", mesh.size())
        parallelize_module(self, mesh, {"token": RowwiseParallel(input_layouts=Replicate())})


class PatchEmbedding(nn.Module):
    """Images to patch vectors with a Conv2d whose kernel and stride are the patch size; optional CLS.

    With ``distillation_token`` a second learned token follows the CLS token (DeiT), for a head that classifies
    from both (``head: {type: classification, distillation: true}``).

    Shapes: images (N, C, H, W) -> (N, 1 + (H/P)*(W/P), E) with the CLS token first (then the distillation token).
    """

    def __init__(
        self,
        d_model: int,
        *,
        image_size: int,
        patch_size: int,
        num_channels: int = 3,
        cls_token: bool = True,
        distillation_token: bool = False,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.proj = nn.Conv2d(num_channels, d_model, kernel_size=patch_size, stride=patch_size, bias=bias, **factory)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model, **factory)) if cls_token else None
        self.distillation_token = nn.Parameter(torch.zeros(1, 1, d_model, **factory)) if distillation_token else None
        self.num_patches = (image_size // patch_size) ** 2
        self.num_positions = self.num_patches + int(cls_token) + int(distillation_token)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.proj(images)  # (N, E, H/P, W/P)
        x = x.flatten(2).transpose(1, 2)  # (N, num_patches, E)
        tokens = [t.expand(x.shape[0], -1, -1) for t in (self.cls_token, self.distillation_token) if t is not None]
        if tokens:
            x = torch.cat([*tokens, x], dim=1)  # (N, tokens + num_patches, E)
        return x


class TokenEmbeddingConfig(ComponentConfig):
    type: Literal["token"] = "token"
    token_input: ClassVar[bool] = True
    """It embeds token ids (an architecture that feeds images refuses it)."""
    padding_idx: int | None = Field(None, ge=0, description="Token id whose vector stays zero.")
    scale: bool = Field(False, description="Multiply embeddings by sqrt(d_model).")
    round_scale: bool = Field(
        False, description="Round sqrt(d_model) to the weights' dtype before multiplying (Gemma; bf16: 45.25 for 2048)."
    )
    multiplier: float = Field(
        1.0,
        gt=0,
        description="Multiply embeddings by this constant, after any sqrt(d_model) scale (Granite's "
        "embedding_multiplier: 12.0); default 1.0, no multiply.",
    )
    proj_dim: int | None = Field(
        None,
        ge=1,
        le=MAX_WIDTH,
        description="Width of the token table, projected to d_model by a bias-free linear (OPT-350m: 512); "
        "default d_model, no projection. A tied lm head projects back to it (head.proj_dim).",
    )
    task_types: int = Field(
        0,
        ge=0,
        le=MAX_WIDTH,
        description="Rows of a task-type table whose first row is added to every token (ERNIE's use_task_id, "
        "task_type_vocab_size: 3); default 0, no table.",
    )
    width: int | None = Field(
        None,
        ge=1,
        le=MAX_WIDTH,
        description="A factorized embedding (ALBERT's and ELECTRA's embedding_size): token tables, positions and "
        "the embedding norm this wide, then a biased linear to d_model; default none (all at d_model).",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"padding_idx": 0, "scale": True},
        {"scale": True, "round_scale": True},
        {"multiplier": 12.0},
        {"scale": True, "multiplier": 0.5},
        {"proj_dim": 8},
        {"task_types": 3},
        {"width": 8, "task_types": 2},
    )

    def check(self, ctx: BuildContext) -> list[str]:
        problems = []
        if self.padding_idx is not None and self.padding_idx >= ctx.vocab_size:
            problems.append(f"padding_idx ({self.padding_idx}) must be < vocab_size ({ctx.vocab_size})")
        if self.round_scale and not self.scale:
            problems.append("round_scale rounds the sqrt(d_model) scale: set scale: true, or round_scale: false")
        if self.width is not None and self.proj_dim is not None:
            problems.append("width (a factorized embedding) and proj_dim (OPT's narrower table) exclude each other")
        return problems

    def cost(self, ctx: BuildContext) -> Cost:
        # V·E token table plus a segment table; a lookup multiplies nothing. With proj_dim P: a V·P table
        # and the P·E projection, which multiplies.
        E, tables = ctx.d_model, ctx.type_vocab_size + self.task_types
        if self.width is not None:  # the tables at width W, then the biased W·E projection
            W = self.width
            return Cost(params=(ctx.vocab_size + tables) * W + W * E + E, matmul=W * E, acts=W)
        if self.proj_dim is None:
            return Cost(params=(ctx.vocab_size + tables) * E)
        P = self.proj_dim
        return Cost(params=ctx.vocab_size * P + P * E + tables * E, matmul=P * E, acts=P)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        E, proj, W = ctx.d_model, self.proj_dim, self.width or ctx.d_model
        lines = [f"{ctx.vocab_size} × {W}" if proj is None else f"{ctx.vocab_size} × {proj}, linear {proj} → {E}"]
        if ctx.type_vocab_size:
            lines.append(f"+ segment embedding {ctx.type_vocab_size} × {W}")
        if self.task_types:
            lines.append(f"+ task embedding {self.task_types} × {W} (task 0)")
        if self.width is not None:
            lines.append(f"factorized: positions and norm at {W}, then linear {W} → {E}")
        if self.scale:
            lines.append("scaled by √d_model")
        if self.multiplier != 1.0:
            lines.append(f"times {self.multiplier:g}")
        return Label("embedding", "Token embedding", lines)


class PatchEmbeddingConfig(ComponentConfig):
    type: Literal["patch"] = "patch"
    token_input: ClassVar[bool] = False
    cls_token: bool = Field(True, description="Prepend a learned [CLS] token.")
    distillation_token: bool = Field(False, description="A second learned token after the [CLS] token (DeiT).")
    bias: bool = Field(True, description="A bias on the patch projection (CLIP's has none).")

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"cls_token": False},
        {"distillation_token": True},
        {"bias": False},
    )

    @property
    def extra_tokens(self) -> int:
        """Tokens before the patches: the CLS and the distillation token, those there are."""
        return int(self.cls_token) + int(self.distillation_token)

    def cost(self, ctx: BuildContext) -> Cost:
        # A Conv2d with kernel = stride = P is one (C·P·P -> E) matmul per patch, plus its bias and the extra tokens.
        patch, E = ctx.num_channels * ctx.patch_size**2, ctx.d_model
        return Cost(params=patch * E + E * self.bias + E * self.extra_tokens, matmul=patch * E, acts=patch)

    def check(self, ctx: BuildContext) -> list[str]:
        if not ctx.image_size or not ctx.patch_size:
            return ["patch embedding needs image_size and patch_size in the recipe"]
        if ctx.image_size % ctx.patch_size:
            return [f"image_size ({ctx.image_size}) must be divisible by patch_size ({ctx.patch_size})"]
        if self.distillation_token and not self.cls_token:
            return ["distillation_token follows the [CLS] token (DeiT): set cls_token: true"]
        return []

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        P, E = ctx.patch_size, ctx.d_model
        patches = f"{module.num_patches} patches" + (" + [CLS]" if self.cls_token else "")
        return Label("embedding", "Patch embedding", [f"{P} × {P} patches → {E}", patches])


@hookimpl
def register_components(register):
    register("embedding", "token", TokenEmbedding, TokenEmbeddingConfig)
    register("embedding", "patch", PatchEmbedding, PatchEmbeddingConfig)
