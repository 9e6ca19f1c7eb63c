"""zoo-mamba: Mamba's selective-scan mixer and Mamba-2's SSD mixer for zoo, with Hugging Face import.

Installing this package registers the attention types ``mamba`` and ``mamba2`` (token mixers sit where
attention sits in a block), the FFN type ``none`` (Mamba blocks have no FFN), the Hugging Face families
``mamba`` (MambaForCausalLM), ``mamba2`` (Mamba2ForCausalLM), ``jamba``, ``falcon_mamba`` and ``bamba``, and the
recipes ``mamba-130m``, ``mamba2-130m``, ``jamba-v0.1``, ``falcon-mamba-7b``, ``bamba-9b``, ``mamba-tiny``,
``mamba2-tiny``, ``jamba-tiny`` and ``bamba-tiny``::

    attention: {type: mamba, state_size: 16, expand: 2}
    positional: {type: none}
    ffn: {type: none}
"""

from __future__ import annotations

from pathlib import Path

import zoo

from .common import SSMState
from .mamba import Mamba, MambaConfig, linear_scan, selective_scan
from .mamba2 import Mamba2, Mamba2Config, ssd, ssd_step
from .none import NoFFN, NoFFNConfig

__all__ = [
    "Mamba",
    "Mamba2",
    "Mamba2Config",
    "MambaConfig",
    "NoFFN",
    "NoFFNConfig",
    "SSMState",
    "linear_scan",
    "selective_scan",
    "ssd",
    "ssd_step",
]
__version__ = "0.1.0"

ZOO_PLUGIN_API = 1
RECIPES = Path(__file__).parent / "recipes"


@zoo.hookimpl
def register_components(register):
    register("attention", "mamba", Mamba, MambaConfig)
    register("attention", "mamba2", Mamba2, Mamba2Config)
    register("ffn", "none", NoFFN, NoFFNConfig)


@zoo.hookimpl
def register_recipes():
    return [RECIPES]


@zoo.hookimpl
def register_hf_families():
    from .bamba import BAMBA
    from .falcon_mamba import FALCON_MAMBA
    from .hf import MAMBA, MAMBA2
    from .jamba import JAMBA

    return [MAMBA, MAMBA2, JAMBA, FALCON_MAMBA, BAMBA]
