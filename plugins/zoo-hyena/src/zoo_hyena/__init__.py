"""zoo-hyena: the Hyena operator for zoo, FFT long convolutions for training, a direct one when decoding.

Installing this package registers the attention type ``hyena`` and the recipe ``hyena-tiny``::

    attention: {type: hyena, order: 2}
    positional: {type: none}
"""

from __future__ import annotations

from pathlib import Path

import zoo

from .hyena import HyenaCache, HyenaConfig, HyenaFilter, HyenaOperator, direct_conv, fft_conv

__all__ = ["HyenaCache", "HyenaConfig", "HyenaFilter", "HyenaOperator", "direct_conv", "fft_conv"]
__version__ = "0.1.0"

ZOO_PLUGIN_API = 1
RECIPES = Path(__file__).parent / "recipes"


@zoo.hookimpl
def register_components(register):
    register("attention", "hyena", HyenaOperator, HyenaConfig)


@zoo.hookimpl
def register_recipes():
    return [RECIPES]
