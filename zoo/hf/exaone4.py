"""EXAONE 4.0 (``Exaone4ForCausalLM``, LG AI Research): OLMo 2's blocks with QK-norm over each head, and a hybrid
attention: ``sliding_attention`` layers slide over ``sliding_window`` keys with RoPE, ``full_attention`` layers see
every key without any position encoding (NoPE). With no ``sliding_window`` every layer is a full one with RoPE."""

from .layer_kinds import FULL, SLIDING, layer_kinds, nope, same, slides, sliding_types, windowed
from .olmo2 import OLMO2
from .qwen3 import QK_NORM
from .rows_sliding import sliding_rope_full_nope, windowed_pattern
from .table import Fixed

EXAONE4 = OLMO2.derive(
    "exaone4",
    classes=("Exaone4ForCausalLM",),
    recipes=("exaone-4.0-32b",),
    drop=("biases", "embedding.padding_idx", "layers"),
    rows=(
        Fixed("attention.bias", False),
        QK_NORM,  # Qwen3's: over each head
        layer_kinds(  # with no sliding_window, Exaone4Attention rotates every layer and slides none
            layer_types=sliding_types(
                {SLIDING: windowed(slides, same), FULL: windowed(nope, same)}, fill=windowed_pattern("Exaone4Config")
            ),
            keys={"sliding_window": 4096, "sliding_window_pattern": 4, "layer_types": None},
            requires={"attention.rotary": sliding_rope_full_nope("EXAONE 4")},
            legacy=("sliding_window_pattern",),  # layer_types, written, says it per layer
        ),
    ),
    defaults={"vocab_size": 102400, "intermediate_size": 16384, "num_key_value_heads": 32}
    | {"max_position_embeddings": 2048, "pad_token_id": None},
)
