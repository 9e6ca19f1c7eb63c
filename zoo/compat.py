"""The private torch APIs zoo relies on, in one place, each with the torch versions it was written for.

torch renames and moves its private functions between releases; everything outside this module calls these
wrappers instead, and ``tests/test_compat.py`` checks each against the torch that is installed, per version range.
Decoding uses dynamo's (compiled steps, guards, static addresses); ``zoo plan``'s meta-tensor trace
(``zoo.analysis.metatensor``, ``live``, ``stepmodel``) uses the dispatcher's (modes, pytrees, meta kernels) and
the fused AdamW operators.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode  # torch >= 1.13
from torch.utils._pytree import tree_flatten, tree_unflatten  # torch >= 1.13

__all__ = [
    "TorchDispatchMode",
    "can_skip_guards",
    "compiled_graph_count",
    "dcp_read_keys",
    "dcp_set_element",
    "defer_dynamo_imports",
    "disabled_torch_function_impl",
    "dynamo_disabled",
    "fake_store",
    "foreach_add_",
    "flatten_mesh",
    "fused_adamw_",
    "import_dynamo",
    "in_backward",
    "is_fake_tensor",
    "mark_static_address",
    "meta_kernels",
    "recompile_limit",
    "reset_dynamo",
    "tree_flatten",
    "tree_unflatten",
]

_deferred: list[bool] = []


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


def reset_dynamo() -> None:
    """Forget every compiled graph (``torch._dynamo.reset``)."""
    torch._dynamo.reset()


def import_dynamo() -> None:
    """Import ``torch._dynamo`` now (``torch.utils.checkpoint`` reads its config on first use)."""
    importlib.import_module("torch._dynamo")


# ---------------------------------------------------------------------------------------------- the dispatcher

disabled_torch_function_impl = torch._C._disabled_torch_function_impl
"""A tensor subclass's ``__torch_function__`` that leaves ``__torch_function__`` handling off (torch >= 1.13)."""


def in_backward() -> bool:
    """Whether autograd's engine is running a backward pass on this thread (``_current_graph_task_id``)."""
    return torch._C._current_graph_task_id() != -1


def is_fake_tensor(t: Any) -> bool:
    """Whether ``t`` is one of torch's ``FakeTensor`` (``torch._subclasses``), without importing it before use."""
    module = sys.modules.get("torch._subclasses.fake_tensor")
    return module is not None and isinstance(t, module.FakeTensor)


@contextmanager
def meta_kernels() -> Iterator[None]:
    """Within the block, operators run their meta kernel whatever their tensors' dispatch keys say, and no
    ``TorchDispatchMode`` sees them."""
    with torch._C._DisableTorchDispatch(), torch._C._PreserveDispatchKeyGuard():
        torch._C._set_meta_in_tls_dispatch_include(True)
        yield


def foreach_add_(tensors: list[torch.Tensor], value: float) -> None:
    """``torch._foreach_add_``: add ``value`` to each tensor in place, one launch for the list."""
    torch._foreach_add_(tensors, value)


def fused_adamw_(*args: Any, **kwargs: Any) -> None:
    """``torch._fused_adamw_``: the fused AdamW step the optimizer runs (``AdamW(fused=True)``)."""
    torch._fused_adamw_(*args, **kwargs)


def dcp_read_keys(state: dict[str, Any], reader: Any, keys: set[str]) -> None:
    """Read the entries ``keys`` of a ``torch.distributed.checkpoint`` folder whole into ``state``, in this process
    and without a process group, as ``format_utils.dcp_to_torch_save`` does (torch >= 2.4: ``_load_state_dict`` with
    an ``_EmptyStateDictLoadPlanner``)."""
    from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

    _load_state_dict(state, storage_reader=reader, planner=_EmptyStateDictLoadPlanner(keys=keys), no_dist=True)


def dcp_set_element(state: dict[str, Any], path: tuple, value: Any) -> None:
    """Put ``value`` at the nested ``path`` of a DCP state dict (``torch.distributed.checkpoint._traverse``)."""
    from torch.distributed.checkpoint._traverse import set_element

    set_element(state, path, value)


def fake_store() -> Any:
    """The store of torch's ``fake`` process group backend, whose collectives send nothing
    (``torch.testing._internal.distributed.fake_pg.FakeStore``, torch >= 2.2): a mesh of several ranks in one
    process, on which the components' tensor-parallel plans split a model for ``zoo plan``."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    return FakeStore()


def flatten_mesh(mesh: Any, name: str) -> Any:
    """The dimensions of ``mesh`` as one 1-D mesh named ``name`` (``DeviceMesh._flatten``, torch >= 2.5)."""
    return mesh._flatten(name)


def dynamo_disabled(fn: Callable[..., Any], recursive: bool = True) -> Callable[..., Any]:
    """``torch._dynamo.disable(fn)``, applied once ``torch._dynamo`` is loaded: until then nothing compiles.

    torch keeps torch.compile out of every ``TorchDispatchMode``'s ``__torch_dispatch__`` and out of its
    meta kernels written in Python with ``torch._disable_dynamo``, which imports ``torch._dynamo`` at the
    first call: seconds. Modes here set ``_should_skip_dynamo`` False and use this instead.
    """
    disabled: list[Callable[..., Any]] = []

    @functools.wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        if not disabled:
            if "torch._dynamo" not in sys.modules:
                return fn(*args, **kwargs)
            disabled.append(sys.modules["torch._dynamo"].disable(fn, recursive, wrapping=False))
        return disabled[0](*args, **kwargs)

    return inner


def defer_dynamo_imports() -> None:
    """Give torch's Python meta kernels (``torch._refs``, ``torch._decomp``...) wrapped in
    ``torch._disable_dynamo`` the function that wrapper caches on its first call, as ``dynamo_disabled``:
    the same once ``torch._dynamo`` is loaded, no import before. Where torch's wrapper is not what this
    expects, nothing is changed (the first call imports ``torch._dynamo``, as without this)."""
    if _deferred:
        return
    _deferred.append(True)

    from torch._compile import _disable_dynamo
    from torch._decomp import global_decomposition_table

    code = _disable_dynamo(lambda: None).__code__
    if not {"fn", "recursive"} <= set(code.co_freevars):
        return
    names = ["torch._refs", "torch._refs.nn.functional", "torch._refs.linalg", "torch._refs.special"]
    names += ["torch._decomp.decompositions", "torch._meta_registrations", "torch._prims"]
    found: list[Any] = [f for table in global_decomposition_table.values() for f in table.values()]
    for name in names:
        found += vars(importlib.import_module(name)).values()
    seen: set[int] = set()
    while found:  # functions, and the functions their closures and functools.wraps hold
        obj = found.pop()
        if not callable(obj) or id(obj) in seen:
            continue
        seen.add(id(obj))
        if getattr(obj, "__code__", None) is code:
            cells = dict(zip(code.co_freevars, obj.__closure__ or (), strict=False))
            fn, recursive = cells["fn"].cell_contents, cells["recursive"].cell_contents
            if getattr(fn, "__dynamo_disable", None) is None:
                setattr(fn, "__dynamo_disable", dynamo_disabled(fn, recursive))
        found += [c.cell_contents for c in getattr(obj, "__closure__", None) or () if _is_full(c)]
        found.append(getattr(obj, "__wrapped__", None))


def _is_full(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:  # an empty cell
        return False
    return True
