"""Llama 4's text model (``Llama4ForCausalLM``): Llama with RoPE, NoPE and chunked layers, MoE among dense layers."""

from . import _moe as moe
from .layer_kinds import CHUNKED, FULL, chunked_types, layer_kinds, masked_types, no_rope_layers
from .llama import COMMON, LLAMA
from .rows import rope
from .rows_kinds import NOPE_LAYER, TEMPERATURE, WEIGHTLESS_QK_NORM

ALIKE = "Llama 4's RoPE layers share one qk norm, its NoPE layers one temperature, its chunks one size"
FIELDS = ("qk_norm", "qk_norm_position", "chunk_size", "rotary", "temperature_floor_scale", "temperature_scale")

LLAMA4_TEXT = LLAMA.derive(
    "llama4_text",
    classes=("Llama4ForCausalLM",),
    rules=(*COMMON, *moe.moe_rules(f"{moe.LAYER}.feed_forward", router="router", dense=True, shared="shared_expert")),
    **moe.fused_layouts("feed_forward"),  # experts fused on disk: gate then up
    recipes=("llama-4-scout-17b-16e",),
    drop=("mlp_bias", "pretraining_tp", "sliding_window", "gated ffn", "layers"),
    rows=(
        rope(interleaved=True),
        layer_kinds(  # as Llama4TextConfig.__post_init__ fills the lists a config omits
            no_rope_layers=no_rope_layers(WEIGHTLESS_QK_NORM, (NOPE_LAYER, TEMPERATURE)),
            layer_types=chunked_types("attention_chunk_size", 8192),
            keys={"no_rope_layers": None, "no_rope_layer_interval": 4, "layer_types": None},
            fields=FIELDS,
            legacy=("no_rope_layer_interval",),  # no_rope_layers, written, says it per layer (moe_layers: the steps)
            unreadable="no_rope_layers and layer_types need an entry per layer, chunks an attention_chunk_size",
            ffn=moe.listed_moe_layers("Llama 4", 16384),
            fit=("Llama 4", ALIKE, (NOPE_LAYER, WEIGHTLESS_QK_NORM, TEMPERATURE)),
        ),
        *moe.router_rows("num_local_experts", 16, 1, fixed=moe.WEIGHTED_INPUT),
        moe.twin_shared_expert("intermediate_size", 8192, "Llama 4"),
        *moe.TRAINING_ONLY,
        masked_types("Llama4TextModel", FULL, CHUNKED),
    ),
    defaults={"vocab_size": 202048, "hidden_size": 5120, "num_hidden_layers": 48, "num_attention_heads": 40}
    | {"num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5}
    | {"rope_theta": 500000.0},
)
