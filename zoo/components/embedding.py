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

    With ``positions`` the embedding adds absolute positions itself, from a learned table ``position`` of
    (1, CLS + patches, E) rows (DINOv2's and BEiT's ``position_embeddings``): when an image's patch grid is not the
    table's square grid, the patch rows are resized to it (bicubic, in float32, as transformers'
    ``interpolate_pos_encoding``; ``antialias`` as DINOv2 with registers), so one table serves every image size.
    ``register_tokens`` learned tokens then follow the CLS token, without positions (DINOv2 with registers).
    ``mask_token`` keeps a (1, E) vector that masked image modeling puts in place of hidden patches: zoo's
    models never mask, so it is carried for checkpoints and not applied.

    Shapes: images (N, C, H, W) -> (N, extra + (H/P)*(W/P), E): the CLS token first, then the distillation
    token or the registers, then the patches.
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
        positions: bool = False,
        antialias: bool = False,
        register_tokens: int = 0,
        mask_token: bool = False,
        init_std: float = 0.02,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.proj = nn.Conv2d(num_channels, d_model, kernel_size=patch_size, stride=patch_size, bias=bias, **factory)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model, **factory)) if cls_token else None
        self.distillation_token = nn.Parameter(torch.zeros(1, 1, d_model, **factory)) if distillation_token else None
        self.num_patches = (image_size // patch_size) ** 2
        self.num_positions = self.num_patches + int(cls_token) + int(distillation_token) + register_tokens
        rows = self.num_patches + int(cls_token)
        self.position = nn.Parameter(torch.zeros(1, rows, d_model, **factory)) if positions else None
        self.register_tokens = (
            nn.Parameter(torch.zeros(1, register_tokens, d_model, **factory)) if register_tokens else None
        )
        self.mask_token = nn.Parameter(torch.zeros(1, d_model, **factory)) if mask_token else None
        self.antialias = antialias
        self.init_std = init_std

    def reset_parameters(self) -> None:
        """The projection N(0, init_std) with a zero bias (as every linear); the position table and the registers
        N(0, init_std); the CLS, distillation and mask tokens zero."""
        std = self.init_std
        for p in (self.proj.weight, self.position, self.register_tokens):
            if p is not None and not p.is_meta:
                nn.init.normal_(p, std=std)
        if self.proj.bias is not None and not self.proj.bias.is_meta:
            nn.init.zeros_(self.proj.bias)

    def positions_for(self, rows: int, cols: int) -> torch.Tensor:
        """The position table for a grid of ``rows`` x ``cols`` patches: (1, CLS + rows * cols, E); the table
        itself on its own square grid, else its patch rows resized bicubically to the grid."""
        table = self.position
        first = int(self.cls_token is not None)
        grid = table[:, first:]  # (1, side * side, E)
        if rows == cols and rows * cols == grid.shape[1]:
            return table
        side, width = math.isqrt(grid.shape[1]), table.shape[-1]
        grid = grid.reshape(1, side, side, width).permute(0, 3, 1, 2)  # (1, E, side, side)
        grid = nn.functional.interpolate(
            grid.float(), size=(rows, cols), mode="bicubic", align_corners=False, antialias=self.antialias
        ).to(table.dtype)
        grid = grid.permute(0, 2, 3, 1).reshape(1, rows * cols, width)
        return torch.cat([table[:, :first], grid], dim=1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.proj(images)  # (N, E, H/P, W/P)
        rows, cols = x.shape[2:]
        x = x.flatten(2).transpose(1, 2)  # (N, num_patches, E)
        tokens = [t.expand(x.shape[0], -1, -1) for t in (self.cls_token, self.distillation_token) if t is not None]
        if tokens:
            x = torch.cat([*tokens, x], dim=1)  # (N, tokens + num_patches, E)
        if self.position is not None:
            x = x + self.positions_for(rows, cols)
        if self.register_tokens is not None:  # after the CLS token, without positions
            first = int(self.cls_token is not None)
            registers = self.register_tokens.expand(x.shape[0], -1, -1)
            x = torch.cat([x[:, :first], registers, x[:, first:]], dim=1)
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
    positions: bool = Field(
        False,
        description="The embedding adds absolute positions from its own learned table (CLS and patches), resized "
        "bicubically to an image's patch grid where it differs (DINOv2, BEiT); beside it, positional: none or a score "
        "bias such as relative_2d (an absolute positional would add a second set of positions).",
    )
    antialias: bool = Field(False, description="Resize the position table with antialiasing (DINOv2 with registers).")
    register_tokens: int = Field(
        0, ge=0, le=1024, description="Learned register tokens after the [CLS] token, without positions (DINOv2)."
    )
    mask_token: bool = Field(
        False,
        description="Keep masked image modeling's (1, E) mask token (DINOv2, BEiT checkpoints carry it); never "
        "applied by zoo's models.",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"cls_token": False},
        {"distillation_token": True},
        {"bias": False},
        {"positions": True, "register_tokens": 2, "mask_token": True},
        {"positions": True, "antialias": True},
    )

    @property
    def extra_tokens(self) -> int:
        """Tokens before the patches: the CLS and the distillation token, those there are, and the registers."""
        return int(self.cls_token) + int(self.distillation_token) + self.register_tokens

    def cost(self, ctx: BuildContext) -> Cost:
        # A Conv2d with kernel = stride = P is one (C·P·P -> E) matmul per patch, plus its bias and the extra tokens,
        # the position table (CLS and patches) and the mask token.
        patch, E = ctx.num_channels * ctx.patch_size**2, ctx.d_model
        table = ((ctx.image_size // ctx.patch_size) ** 2 + int(self.cls_token)) * self.positions
        tokens = self.extra_tokens + int(self.mask_token) + table
        return Cost(params=patch * E + E * self.bias + E * tokens, matmul=patch * E, acts=patch)

    def check(self, ctx: BuildContext) -> list[str]:
        if not ctx.image_size or not ctx.patch_size:
            return ["patch embedding needs image_size and patch_size in the recipe"]
        if ctx.image_size % ctx.patch_size:
            return [f"image_size ({ctx.image_size}) must be divisible by patch_size ({ctx.patch_size})"]
        if self.distillation_token and not self.cls_token:
            return ["distillation_token follows the [CLS] token (DeiT): set cls_token: true"]
        if self.positions and self.distillation_token:
            return [
                "positions: the embedding's own table has rows for [CLS] and the patches only: "
                "set distillation_token: false"
            ]
        if self.antialias and not self.positions:
            return ["antialias resizes the embedding's own position table: set positions: true"]
        return []

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        P, E = ctx.patch_size, ctx.d_model
        patches = f"{module.num_patches} patches" + (" + [CLS]" if self.cls_token else "")
        lines = [f"{P} × {P} patches → {E}", patches]
        if self.register_tokens:
            lines.append(f"+ {self.register_tokens} register tokens")
        if self.positions:
            lines.append("+ learned positions, resized to the image (bicubic)")
        return Label("embedding", "Patch embedding", lines)


@hookimpl
def register_components(register):
    register("embedding", "token", TokenEmbedding, TokenEmbeddingConfig)
    register("embedding", "patch", PatchEmbedding, PatchEmbeddingConfig)
