"""Qwen2 (``Qwen2ForCausalLM``, Qwen1.5 / Qwen2 / Qwen2.5): Llama's network with biases on the query, key and
value projections but not on the output one, and optional sliding-window layers.

Which layers slide is ``layer_types`` (``sliding_attention`` / ``full_attention``); a config without it gets
Qwen2Config's rule: with ``use_sliding_window``, the layers from ``max_window_layers`` on slide over the
``sliding_window`` most recent keys, the others attend to every key; without it no layer slides (whatever
``sliding_window`` says). zoo writes the sliding layers as ``layers:`` overrides that set the attention's
``window`` (every layer, when all slide: the recipe's attention), and exports ``layer_types`` explicitly.

Qwen3 (``zoo/hf/qwen3.py``) derives from this table; the window rows are in ``zoo/hf/windows.py``.
"""

from __future__ import annotations

from .llama import LLAMA
from .rows import biases
from .table import Fixed
from .windows import WINDOW_OPTIONS, WINDOWS

QWEN2 = LLAMA.derive(
    "qwen2",
    classes=("Qwen2ForCausalLM",),
    recipes=("qwen2.5-0.5b",),
    drop=("attention_bias", "mlp_bias", "pretraining_tp", "sliding_window", "layers"),
    rows=(biases(True, False), Fixed("ffn.bias", False), WINDOWS, *WINDOW_OPTIONS),
    defaults={
        "vocab_size": 151936,
        "intermediate_size": 22016,
        "num_key_value_heads": 32,
        "max_position_embeddings": 32768,
    },
)
"""Qwen2Config's defaults. It has no head_dim attribute, but Qwen2Attention reads one a config.json gives."""
