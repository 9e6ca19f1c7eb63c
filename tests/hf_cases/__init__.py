"""Parity cases of the Hugging Face families added one file each.

A family's file, ``tests/hf_cases/<family>.py``, defines:

- ``CONFIGS``: ``{family: transformers config class name}`` (e.g. ``{"qwen2": "Qwen2Config"}``);
- ``CASES``: ``{case name: {"family", "hf_class", "config"}}``, random-weight tiny configs, at least two per
  family, one with the family's unusual options switched on; ``tests/test_hf.py`` runs every parity test on each
  (same parameter count, padded-batch logits within 1e-4, greedy 20 tokens, cached = recomputed, round trip
  bit for bit, transformers loading zoo's export);
- optionally ``ZOO_MODELS``: ``{name: (recipe, overrides)}``, zoo recipes whose export transformers must load
  with the same outputs;
- optionally ``PUBLISHED``: ``{named recipe: (config class name, published config dict)}``, checked by
  ``tests/test_hf_published.py``: the published config imports as the named recipe, and the named recipe has
  exactly the parameters transformers builds from the published config (on the meta device).
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def modules() -> list[ModuleType]:
    """Every case file of this package, by name."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return [importlib.import_module(f"{__name__}.{name}") for name in names]
