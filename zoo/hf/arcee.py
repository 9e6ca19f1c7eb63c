"""Arcee (``ArceeForCausalLM``, Arcee's AFM): Llama's network with a two-layer MLP in place of the gated one,
``down(relu(up(x))²)`` (``hidden_act: relu2``, zoo's MLP with ``activation: relu2``).
"""

from __future__ import annotations

from .llama import LLAMA
from .rows import PLAIN_ACTIVATION, plain_mlp

ARCEE = LLAMA.derive(
    "arcee",
    classes=("ArceeForCausalLM",),
    recipes=("afm-4.5b",),
    drop=("pretraining_tp", "sliding_window"),
    rows=(plain_mlp(), PLAIN_ACTIVATION),
    defaults={"hidden_size": 2560, "intermediate_size": 18432, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5},
)
