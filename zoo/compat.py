"""The private torch APIs zoo's decoding relies on, in one place, each with the torch versions it was written for.

torch renames and moves its private functions between releases; everything outside this module calls these
wrappers instead, and ``tests/test_compat.py`` checks each against the torch that is installed, per version range.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["can_skip_guards", "compiled_graph_count", "mark_static_address", "recompile_limit"]


def torch_version() -> tuple[int, int]:
    """The installed torch's (major, minor)."""
    major, minor = torch.__version__.split(".")[:2]
    return int(major), int(minor)


def mark_static_address(t: torch.Tensor) -> None:
    """Tell dynamo that ``t``'s storage never moves, so a CUDA graph may write it in place (torch >= 2.2)."""
    torch._dynamo.mark_static_address(t)


def compiled_graph_count(fn: Callable[..., Any]) -> int:
    """How many graphs dynamo holds for the code of ``fn`` (torch >= 2.1: ``_debug_get_cache_entry_list``)."""
    return len(torch._dynamo.eval_frame._debug_get_cache_entry_list(fn.__code__))


def recompile_limit() -> int:
    """dynamo's limit of graphs per code object: ``recompile_limit`` from torch 2.7, ``cache_size_limit`` before."""
    config = torch._dynamo.config
    return getattr(config, "recompile_limit", getattr(config, "cache_size_limit", 8))


def can_skip_guards() -> bool:
    """Whether ``torch.compiler.set_stance`` takes ``skip_guard_eval_unsafe`` (torch >= 2.6)."""
    stance = getattr(torch.compiler, "set_stance", None)
    return stance is not None and "skip_guard_eval_unsafe" in inspect.signature(stance).parameters
