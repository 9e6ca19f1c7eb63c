"""SmolLM3 (``SmolLM3ForCausalLM``): Llama's network in which every ``no_rope_layer_interval``-th layer (every 4th)
has no rotary embedding at all (a NoPE layer: zoo's attention ``rotary: {type: none}``), as ``no_rope_layers``
lists (1: rope, 0: none); ``layer_types`` may make layers slide over ``sliding_window`` keys.
"""

from __future__ import annotations

from .layer_kinds import FULL, NO_ROPE_LAYERS, SLIDING, layer_kinds, same, sliding_types, used_window
from .llama import LLAMA
from .rows import heads

SMOLLM3 = LLAMA.derive(
    "smollm3",
    classes=("SmolLM3ForCausalLM",),
    recipes=("smollm3-3b",),
    drop=("pretraining_tp", "sliding_window", "layers"),
    rows=(
        heads(head_dim=False),
        layer_kinds(  # as SmolLM3Config.__post_init__ fills the lists a config omits: the NoPE layers slide
            no_rope_layers=NO_ROPE_LAYERS,
            layer_types=sliding_types(
                {SLIDING: lambda c: {"window": used_window(c)}, FULL: same},
                fill=lambda c, lists: [
                    SLIDING if used_window(c) is not None and not r else FULL for r in lists["no_rope_layers"]
                ],
            ),
            keys={"use_sliding_window": False, "sliding_window": None, "no_rope_layers": None}
            | {"no_rope_layer_interval": 4, "layer_types": None},
            more=lambda recipe, attentions: {"use_sliding_window": any(a.window is not None for a in attentions)},
            legacy=("no_rope_layer_interval",),  # no_rope_layers, written, says it per layer
        ),
    ),
    defaults={"vocab_size": 128256, "hidden_size": 2048, "num_hidden_layers": 36, "num_attention_heads": 16}
    | {"num_key_value_heads": 4, "max_position_embeddings": 32768, "pad_token_id": 128004}
    | {"tie_word_embeddings": True, "rope_theta": 2000000.0},
)
