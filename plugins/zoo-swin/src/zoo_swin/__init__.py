"""zoo-swin: the Swin Transformer for zoo, a hierarchical vision architecture, with Hugging Face import.

Installing this package registers the architecture ``swin``, the attention type ``swin_window`` (attention
within shifted windows, with a relative position bias per layer; it holds the stage layout), the embedding types
``swin_patch`` (patch embedding) and ``swin_merge`` (patch merging between stages), the Hugging Face family
``swin`` (``SwinForImageClassification``) and the recipes ``swin-tiny`` and ``swin-nano``::

    architecture: swin
    d_model: 96
    image_size: 224
    patch_size: 4
    num_classes: 1000
    attention: {type: swin_window, window_size: 7, depths: [2, 2, 6, 2], heads: [3, 6, 12, 24]}
"""

from __future__ import annotations

from pathlib import Path

import zoo

from .attention import (
    SwinWindowAttention,
    SwinWindowConfig,
    relative_position_index,
    shift_mask,
    window_partition,
    window_reverse,
)
from .model import SwinArchitectureConfig, SwinModel, build_swin, stage_grids
from .patches import PatchMerging, SwinMergeConfig, SwinPatchConfig, SwinPatchEmbedding

__all__ = [
    "PatchMerging",
    "SwinArchitectureConfig",
    "SwinMergeConfig",
    "SwinModel",
    "SwinPatchConfig",
    "SwinPatchEmbedding",
    "SwinWindowAttention",
    "SwinWindowConfig",
    "build_swin",
    "relative_position_index",
    "shift_mask",
    "stage_grids",
    "window_partition",
    "window_reverse",
]
__version__ = "0.1.0"

ZOO_PLUGIN_API = 1
RECIPES = Path(__file__).parent / "recipes"


@zoo.hookimpl
def register_components(register):
    register("architecture", "swin", build_swin, SwinArchitectureConfig)
    register("attention", "swin_window", SwinWindowAttention, SwinWindowConfig)
    register("embedding", "swin_patch", SwinPatchEmbedding, SwinPatchConfig)
    register("embedding", "swin_merge", PatchMerging, SwinMergeConfig)


@zoo.hookimpl
def register_recipes():
    return [RECIPES]


@zoo.hookimpl
def register_hf_families():
    from .hf import SWIN

    return [SWIN]
