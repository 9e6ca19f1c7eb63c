"""Tensors of shapes and dtypes only, that run as CPU tensors: what the plan traces a training step on.

torch's ``FakeTensorMode`` does this too, but making one imports ``torch._dynamo`` (seconds of start-up,
more than the trace itself) and its dispatch does much the plan does not need. A ``MetaTensor`` is what a
``FakeTensor`` is underneath: a meta tensor (sizes, strides, dtype, a storage of no memory) that says its
device is the CPU and carries the CPU dispatch keys, so CPU autocast and CPU autograd treat it as a CPU
tensor (a plain meta tensor gets no autocast). Its storage is the meta one, so views share it and
``LiveBytes`` counts it as on real tensors.

Inside ``MetaMode`` every operator runs on the meta kernels: on the plain meta tensor each ``MetaTensor``
argument keeps (see ``MetaMode``), a real tensor argument replaced by a meta one of its shape, and operators
that make tensors on the CPU (``empty``, ``zeros``, ``arange``, ``rand``...) on the meta device; what they
return comes back as ``MetaTensor``. Nothing is computed: an operator that needs values (``.item()``,
``nonzero``) fails.

torch also wraps every dispatch mode's ``__torch_dispatch__`` and its meta kernels written in Python in
``torch._disable_dynamo``, which imports ``torch._dynamo`` at the first call. ``dynamo_disabled`` is that
wrapper applied only once ``torch._dynamo`` is loaded (by a ``torch.compile``: before, nothing compiles);
``MetaMode`` gives it to those meta kernels, ``MetaMode`` and ``LiveBytes`` use it themselves.

    with MetaMode():
        x = torch.zeros(8, 64)  # a MetaTensor, no memory
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.nn.functional.linear(x, torch.ones(32, 64))  # bf16
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

from zoo.compat import (
    TorchDispatchMode,
    defer_dynamo_imports,
    disabled_torch_function_impl,
    dynamo_disabled,
    meta_kernels,
    tree_flatten,
    tree_unflatten,
)

__all__ = ["MetaMode", "MetaTensor", "dynamo_disabled"]

CPU = torch.device("cpu")
META = torch.device("meta")
_in_kernel = [False]  # while a meta kernel runs, a MetaTensor's device is meta (what it makes is meta)


class MetaTensor(torch.Tensor):
    """A meta tensor that reports device cpu and dispatches as a CPU tensor (see the module docstring)."""

    _plain: torch.Tensor | None  # a plain meta tensor of the same storage and metadata: what kernels run on

    @staticmethod
    def __new__(cls, elem: torch.Tensor, requires_grad: bool = False) -> MetaTensor:
        r = torch.Tensor._make_subclass(  # shares elem's storage, as torch's FakeTensor does
            cls, elem, requires_grad, dispatch_device=True, device_for_backend_keys=CPU
        )
        r._plain = elem if type(elem) is torch.Tensor and not elem.requires_grad else None
        return r

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return META if _in_kernel[0] else CPU

    __torch_function__ = disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.prim.device.default:
            return META if _in_kernel[0] else CPU
        with MetaMode():  # an operator on MetaTensors outside the mode
            return func(*args, **(kwargs or {}))

    def __repr__(self, **_: Any) -> str:
        return f"MetaTensor({tuple(self.shape)}, dtype={self.dtype})"


def _to_meta(x: Any) -> Any:
    """A meta tensor of a real tensor's sizes, strides and dtype (values are not used)."""
    if isinstance(x, torch.Tensor) and not isinstance(x, MetaTensor) and not x.is_meta:
        return torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device=META)
    return x


def _to_plain(x: Any) -> Any:
    """What a kernel runs on: a ``MetaTensor``'s plain meta tensor (same storage and metadata), a real tensor's
    meta one, anything else as it is."""
    if isinstance(x, MetaTensor):
        plain = x._plain
        if plain is None:
            plain = torch.empty(0, dtype=x.dtype, device=META)
            plain.set_(x.untyped_storage(), x.storage_offset(), x.size(), x.stride())
            x._plain = plain
        return plain
    return _to_meta(x)


def _wrap(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and not isinstance(x, MetaTensor):
        return MetaTensor(x)
    return x


def _same_metadata(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.size() == b.size() and a.stride() == b.stride() and a.storage_offset() == b.storage_offset()


class MetaMode(TorchDispatchMode):
    """Run every operator on the meta kernels, ``MetaTensor`` in and out (see the module docstring).

    A kernel runs on plain meta tensors (``MetaTensor._plain``), not on the ``MetaTensor`` arguments: torch's
    kernels written in Python call tensor methods, and a method called on a tensor subclass makes torch's C++
    import ``torch.distributed.tensor`` (0.8 s) to check it for a DTensor. The outputs come back as the
    arguments they are (an in-place operator returns its ``MetaTensor``) or as new ``MetaTensor``. An
    operator that changes an argument's sizes or strides (``unsqueeze_``, ``resize_``, an ``out=`` it resizes)
    runs again on the ``MetaTensor`` itself, after that import.
    """

    def __enter__(self) -> MetaMode:
        defer_dynamo_imports()
        # What the meta kernels import at their first call, imported outside the mode: a tensor a module
        # makes when imported inside it would be a MetaTensor (and counted by a LiveBytes inside it).
        import torch.fx.experimental.symbolic_shapes  # noqa: F401  by the meta kernels written in Python

        return super().__enter__()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # see dynamo_disabled

    @dynamo_disabled
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.prim.device.default:
            return META if _in_kernel[0] else CPU
        if any(t is not MetaTensor and t is not torch.Tensor and t is not torch.nn.Parameter for t in types):
            return NotImplemented  # another subclass: it runs its own operators, which come back here
        kwargs = dict(kwargs) if kwargs else {}
        schema = _schemas.get(func)
        if schema is None:
            schema = _schemas[func] = _Schema(func)
        if schema.makes_tensors and (kwargs.get("device") is None or torch.device(kwargs["device"]).type == "cpu"):
            kwargs["device"] = META
        flat, spec = tree_flatten((args, kwargs))
        plain = [_to_plain(x) for x in flat]
        out = _kernel(func, *tree_unflatten(plain, spec))
        if schema.writes and not all(
            _same_metadata(p, x) for p, x in zip(plain, flat, strict=True) if isinstance(x, MetaTensor)
        ):
            # The kernel changed sizes or strides: run it on the MetaTensors themselves (see the class docstring).
            importlib.import_module("torch.distributed.tensor")  # here, where it makes no MetaTensor

            for x in flat:
                if isinstance(x, MetaTensor):
                    x._plain = None
            plain = [_to_meta(x) for x in flat]
            out = _kernel(func, *tree_unflatten(plain, spec))
        originals = {id(p): x for p, x in zip(plain, flat, strict=True) if p is not x}

        def back(o: Any) -> Any:
            if isinstance(o, torch.Tensor):
                x = originals.get(id(o))
                return x if x is not None else _wrap(o)
            return o

        if isinstance(out, torch.Tensor):
            return back(out)
        if type(out) in (tuple, list) and not any(isinstance(x, (tuple, list, dict)) for x in out):
            return type(out)(back(x) for x in out)
        flat, spec = tree_flatten(out)
        return tree_unflatten([back(x) for x in flat], spec)


class _Schema:
    """What ``MetaMode`` needs of an operator's schema: whether it makes tensors on a device of its own (a
    factory, ``_to_copy``...), whether it writes to an argument."""

    def __init__(self, func: Any) -> None:
        arguments = func._schema.arguments
        self.makes_tensors = any(a.name == "device" and a.kwarg_only for a in arguments)
        self.writes = any(a.alias_info is not None and a.alias_info.is_write for a in arguments)


_schemas: dict[Any, _Schema] = {}


def _kernel(func: Any, args: Any, kwargs: Any) -> Any:
    """``func`` on its meta kernel, with the device a ``MetaTensor`` reports set to meta while it runs."""
    before, _in_kernel[0] = _in_kernel[0], True
    try:
        with meta_kernels():  # the meta kernel, whatever the keys say
            return func(*args, **kwargs)
    finally:
        _in_kernel[0] = before
