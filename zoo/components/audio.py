"""An audio front end as an input embedding (Whisper's): log-mel frames to a sequence of vectors.

Two 1-D convolutions over time, each followed by GELU: the first (kernel 3) maps the ``num_mel_bins`` mel
channels of each frame to d_model, the second (kernel 3, stride 2) halves the frame rate. Fixed sinusoidal
positions are then added, one row per output frame, so the encoder fed by it needs no positional encoding of
its own (an encoder-decoder's ``encoder_embedding``: its encoder stack gets ``positional: none``)::

    features (N, M, T) -> conv 3, GELU -> conv 3 / 2, GELU -> (N, T/2, E) + sinusoids[:T/2]

The sinusoids are Whisper's: ``[sin(t·w_0) .. sin(t·w_{E/2-1}), cos(t·w_0) .. cos(t·w_{E/2-1})]`` with
``w_i = 10000^(-i / (E/2 - 1))``. They are a frozen parameter (``requires_grad`` False), as in transformers and in
every checkpoint, so the table is counted and saved with the model but never trained.

Shapes: features (N, M, T) with T <= 2 · frames -> (N, ceil(T / 2), E).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import nn
from torch.nn import functional as F

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.hookspecs import hookimpl
from zoo.label import Label
from zoo.limits import MAX_POSITIONS, MAX_WIDTH


def sinusoids(length: int, channels: int, max_timescale: float = 10000.0) -> torch.Tensor:
    """Whisper's position table (length, channels): the sines of every frequency, then their cosines."""
    increment = math.log(max_timescale) / (channels // 2 - 1)
    inv_timescales = torch.exp(-increment * torch.arange(channels // 2))
    scaled_time = torch.arange(length).view(-1, 1) * inv_timescales.view(1, -1)
    return torch.cat([scaled_time.sin(), scaled_time.cos()], dim=1)


class AudioEmbedding(nn.Module):
    """Log-mel features (N, M, T) -> frame vectors (N, ceil(T/2), E) with their sinusoidal positions added."""

    token_input = False  # what the model feeds it: features, not token ids

    def __init__(
        self,
        d_model: int,
        *,
        num_mel_bins: int = 80,
        frames: int = 1500,
        init_std: float = 0.02,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.conv1 = nn.Conv1d(num_mel_bins, d_model, kernel_size=3, padding=1, **factory)
        self.conv2 = nn.Conv1d(d_model, d_model, kernel_size=3, stride=2, padding=1, **factory)
        self.position = nn.Parameter(torch.empty(frames, d_model, **factory), requires_grad=False)
        self.frames = frames
        self.init_std = init_std
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The convolutions N(0, init_std) with zero biases; the position table its sinusoids."""
        for conv in (self.conv1, self.conv2):
            if not conv.weight.is_meta:
                nn.init.normal_(conv.weight, std=self.init_std)
                nn.init.zeros_(conv.bias)
        if not self.position.is_meta:
            with torch.no_grad():
                self.position.copy_(sinusoids(*self.position.shape))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        x = F.gelu(self.conv1(features))  # (N, E, T)
        x = F.gelu(self.conv2(x))  # (N, E, T/2)
        x = x.transpose(1, 2)  # (N, T/2, E)
        if x.shape[1] > self.frames:
            raise ValueError(
                f"{features.shape[-1]} mel frames make {x.shape[1]} positions, beyond the {self.frames} of the audio "
                f"embedding: give at most {2 * self.frames} frames"
            )
        return x + self.position[: x.shape[1]].to(x.dtype)


class AudioEmbeddingConfig(ComponentConfig):
    type: Literal["audio"] = "audio"
    token_input: ClassVar[bool] = False
    """It embeds audio features, not token ids."""
    recipe_field: ClassVar[str] = "encoder_embedding"
    """Where a recipe puts it: an encoder-decoder's encoder input (the decoder's stays the token embedding)."""
    own_positions: ClassVar[bool] = True
    """It adds the positions of its frames itself: the stack it feeds has no positional encoding."""
    num_mel_bins: int = Field(80, ge=1, le=MAX_WIDTH, description="Mel channels of each input frame (Whisper: 80).")
    frames: int = Field(
        1500,
        ge=1,
        le=MAX_POSITIONS,
        description="Rows of the position table: the most output frames (Whisper's max_source_positions: 1500, "
        "30 s of audio at 100 mel frames a second, halved by the strided convolution).",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({"num_mel_bins": 8, "frames": 8},)
    """In the encoder-decoder's tiny recipe, as its ``encoder_embedding``: the contract feeds 16 mel frames."""

    def check(self, ctx: BuildContext) -> list[str]:
        if ctx.d_model % 2 or ctx.d_model < 4:
            return [f"the sinusoidal positions need an even d_model of at least 4, got {ctx.d_model}"]
        return []

    def cost(self, ctx: BuildContext) -> Cost:
        # Per output frame: conv1 at two input frames (3·M·E each), conv2 once (3·E·E); the biases and the frozen
        # position table are parameters too.
        M, E = self.num_mel_bins, ctx.d_model
        params = 3 * M * E + E + 3 * E * E + E + self.frames * E
        return Cost(params=params, matmul=2 * 3 * M * E + 3 * E * E, acts=2 * M + 2 * E)

    def input_text(self, ctx: BuildContext) -> str:
        """What it takes, as ``zoo draw`` writes under it."""
        return f"log-mel frames {self.num_mel_bins} × {2 * self.frames}"

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        M, E = self.num_mel_bins, ctx.d_model
        lines = [f"{M} mel → conv 3 → {E}, GELU", f"conv 3 / 2 → {E}, GELU", f"+ sinusoidal positions ({self.frames})"]
        return Label("embedding", "Audio front end (log-mel)", lines)


@hookimpl
def register_components(register):
    register("embedding", "audio", AudioEmbedding, AudioEmbeddingConfig)
