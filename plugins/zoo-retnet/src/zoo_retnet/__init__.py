"""zoo-retnet: RetNet's multi-scale retention for zoo, parallel for training and recurrent for decoding.

Installing this package registers the attention type ``retention`` and the recipe ``retnet-tiny``::

    attention: {type: retention, num_heads: 4}
"""

from __future__ import annotations

from pathlib import Path

import zoo

from .retention import MultiScaleRetention, RetentionConfig, RetentionState, retention, retention_decays

__all__ = ["MultiScaleRetention", "RetentionConfig", "RetentionState", "retention", "retention_decays"]
__version__ = "0.1.0"

ZOO_PLUGIN_API = 1
RECIPES = Path(__file__).parent / "recipes"


@zoo.hookimpl
def register_components(register):
    register("attention", "retention", MultiScaleRetention, RetentionConfig)


@zoo.hookimpl
def register_recipes():
    return [RECIPES]
