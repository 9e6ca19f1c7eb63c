"""EXAONE 4.0 (``Exaone4ForCausalLM``, LG AI Research): OLMo 2's blocks with QK-norm over each head, and a hybrid
attention: ``sliding_attention`` layers slide over ``sliding_window`` keys with RoPE, ``full_attention`` layers see
every key without any position encoding (NoPE). With no ``sliding_window`` every layer is a full one with RoPE."""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from .layer_kinds import FULL, SLIDING, layer_kinds, nope, same, slides, sliding_types, windowed
from .olmo2 import OLMO2
from .qwen3 import QK_NORM
from .rows import layer_attentions, uses_rope
from .table import Fixed


def fill_types(config: dict[str, Any], lists: dict[str, list[Any]]) -> list[str]:
    """As Exaone4Config: every ``sliding_window_pattern``-th layer full, the others sliding (with a window)."""
    pattern = config["sliding_window_pattern"] if config["sliding_window"] is not None else 0
    if config["layer_types"] is None and not isinstance(pattern, int):
        raise HFImportError(
            f"sliding_window_pattern={pattern!r} without layer_types: Exaone4Config derives layer types from an "
            "integer pattern only (transformers cannot build this config either); give layer_types"
        )
    return [SLIDING if pattern and (i + 1) % pattern != 0 else FULL for i in range(config["num_hidden_layers"])]


def hybrid(recipe: Any) -> str | None:
    """A requirement: layers slide over one window with RoPE, or see every key (NoPE beside sliding layers)."""
    attentions = layer_attentions(recipe)
    windows = {a.window for a in attentions} - {None}
    if len(windows) > 1:
        return f"the layers' windows {sorted(windows)} differ; a sliding_window is one value"
    for i, a in enumerate(attentions):
        if a.window is not None and not uses_rope(a):
            return f"layer {i} slides without RoPE; EXAONE 4's sliding layers rotate"
        if a.window is None and windows and uses_rope(a):
            return f"layer {i} sees every key with RoPE beside sliding layers; EXAONE 4's full layers are NoPE"
        if not windows and not uses_rope(a):
            return f"layer {i} is NoPE without sliding layers; EXAONE 4 then rotates every layer"
    return None


EXAONE4 = OLMO2.derive(
    "exaone4",
    classes=("Exaone4ForCausalLM",),
    recipes=("exaone-4.0-32b",),
    drop=("biases", "embedding.padding_idx", "layers"),
    rows=(
        Fixed("attention.bias", False),
        QK_NORM,  # Qwen3's: over each head
        layer_kinds(  # with no sliding_window, Exaone4Attention rotates every layer and slides none
            layer_types=sliding_types({SLIDING: windowed(slides, same), FULL: windowed(nope, same)}, fill=fill_types),
            keys={"sliding_window": 4096, "sliding_window_pattern": 4, "layer_types": None},
            requires={"attention.rotary": hybrid},
            legacy=("sliding_window_pattern",),  # layer_types, written, says it per layer
        ),
    ),
    defaults={"vocab_size": 102400, "intermediate_size": 16384, "num_key_value_heads": 32}
    | {"max_position_embeddings": 2048, "pad_token_id": None},
)
