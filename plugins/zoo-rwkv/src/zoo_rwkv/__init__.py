"""zoo-rwkv: RWKV-4's time mixing and channel mixing for zoo, parallel for training and recurrent for decoding.

Installing this package registers the attention type ``rwkv_time_mix``, the FFN type ``rwkv_channel_mix``, the
Hugging Face family ``rwkv`` (``RwkvForCausalLM`` checkpoints import and export) and the recipes
``rwkv-4-169m`` and ``rwkv-tiny``. An RWKV-4 model is zoo's pre-norm decoder with these two mixers, no
positional encoding and a LayerNorm on the embeddings::

    attention: {type: rwkv_time_mix}
    ffn: {type: rwkv_channel_mix}
    positional: {type: none}
    embed_norm: true
"""

from __future__ import annotations

from pathlib import Path

import zoo

from .rwkv import ChannelMix, ChannelMixConfig, ShiftState, TimeMix, TimeMixConfig, TimeMixState, wkv

__all__ = ["ChannelMix", "ChannelMixConfig", "ShiftState", "TimeMix", "TimeMixConfig", "TimeMixState", "wkv"]
__version__ = "0.1.0"

ZOO_PLUGIN_API = 1
RECIPES = Path(__file__).parent / "recipes"


@zoo.hookimpl
def register_components(register):
    register("attention", "rwkv_time_mix", TimeMix, TimeMixConfig)
    register("ffn", "rwkv_channel_mix", ChannelMix, ChannelMixConfig)


@zoo.hookimpl
def register_recipes():
    return [RECIPES]


@zoo.hookimpl
def register_hf_families():
    from .hf import RWKV

    return [RWKV]
