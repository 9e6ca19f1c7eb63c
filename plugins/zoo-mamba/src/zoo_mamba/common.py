"""What the Mamba and Mamba-2 mixers share: the decoding state, the causal depthwise convolution, padding.

Shapes: N batch, L sequence (chunk) length, C convolution channels, K kernel width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["SSMState", "causal_conv", "real_tokens"]


class SSMState:
    """The decoding cache of one Mamba layer: the last ``K - 1`` convolution inputs and the SSM state.

    Both are allocated once, on the first chunk, and updated in place: the memory is the same after 16 tokens
    and after 16,000 (``nbytes`` does not depend on ``length``).
    """

    def __init__(self) -> None:
        self.conv: torch.Tensor | None = None
        """``(N, K - 1, C)``: the convolution's inputs of the last K - 1 tokens (zeros before the first)."""
        self.ssm: torch.Tensor | None = None
        """The recurrent state: ``(N, I, S)`` for Mamba, ``(N, H, P, S)`` for Mamba-2 (float32)."""
        self.length = 0
        """Tokens folded into the state so far (a Python int)."""

    def update(self, conv: torch.Tensor, ssm: torch.Tensor, tokens: int) -> None:
        """Replace both states (in place once allocated) after ``tokens`` more tokens."""
        if self.conv is None or self.ssm is None:
            self.conv, self.ssm = conv.clone(), ssm.clone()
        else:
            self.conv.copy_(conv)
            self.ssm.copy_(ssm)
        self.length += tokens

    def reset(self) -> None:
        """Back to the empty state; the buffers are kept for the next sequence."""
        self.length = 0
        for t in (self.conv, self.ssm):
            if t is not None:
                t.zero_()

    def select(self, rows: torch.Tensor) -> None:
        """Keep only these batch rows (sequences that stopped leave the batch)."""
        if self.conv is not None and self.ssm is not None:
            self.conv, self.ssm = self.conv.index_select(0, rows), self.ssm.index_select(0, rows)

    @property
    def nbytes(self) -> int:
        """Bytes held by the two states (0 before the first token); independent of ``length``."""
        return sum(t.nbytes for t in (self.conv, self.ssm) if t is not None)


def causal_conv(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, before: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Depthwise causal convolution of ``x`` (N, L, C) after ``before`` (N, K - 1, C), the inputs of the tokens
    before the chunk (None: zeros, the start of a sequence). ``weight`` is ``nn.Conv1d``'s (C, 1, K).

    Returns the (N, L, C) output and the last K - 1 inputs (the convolution state after the chunk).
    """
    K = weight.size(-1)
    if before is None:
        before = x.new_zeros(x.size(0), K - 1, x.size(2))
    seq = torch.cat([before.to(x.dtype), x], dim=1)  # (N, K - 1 + L, C)
    y = F.conv1d(seq.transpose(1, 2), weight, bias, groups=x.size(2)).transpose(1, 2)  # (N, L, C)
    return y, seq[:, seq.size(1) - (K - 1) :]


def real_tokens(mask: torch.Tensor | None, length: int) -> torch.Tensor | None:
    """``(N, L, 1)`` 1.0 on the chunk's real tokens, 0.0 on padding, from zoo's (N|1, 1, L, S) attention mask
    (the keys its last query may see); None when nothing is padded."""
    if mask is None:
        return None
    return mask[:, 0, -1, -length:, None].to(torch.float32)
