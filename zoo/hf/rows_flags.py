"""Rows of recipe fields that no config key states (``zoo/hf/table.py``): read from the HF class or the checkpoint's
tensor names on import, written as nothing on export (a recipe naming its family, DeiT's distillation head, BART's
logits bias, Pegasus's stored sinusoid tables)."""

from collections.abc import Callable, Mapping
from typing import Any

from .mapping import Requirement
from .table import Computed


def unwritten(
    name: str,
    path: str,
    value: Callable[[str, frozenset[str] | None], Any],
    requires: Mapping[str, Requirement] | None = None,
) -> Computed:
    """The recipe field ``path``, ``value(hf_class, names)`` on import (the HF class; the checkpoint's tensor names,
    None where unknown), which the export writes as nothing: the class or the tensors say it."""
    return Computed(
        name,
        keys={},
        paths=(path,),
        read=lambda config, recipe, hf_class, names: {path: value(hf_class, names)},
        write=lambda recipe, weights: {},
        requires=requires or {},
        checkpoint=True,
    )


def holds(name: str, path: str, tensor: str) -> Computed:
    """``unwritten``: whether the checkpoint holds ``tensor`` (True for a config alone)."""
    return unwritten(name, path, lambda hf_class, names: names is None or tensor in names)
