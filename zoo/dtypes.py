"""The one table of floating-point dtypes: their names and aliases, bytes per element, torch dtype.

    parse_dtype("bf16")              # torch.bfloat16
    dtype_name(torch.float16)        # "float16"
    bytes_per_element("fp32")        # 4
    DTYPE_CHOICES                    # ("float32", "bfloat16", "float16", "float64"): what a model is built in

A dtype has a canonical name (torch's: ``bfloat16``), a short name (``bf16``, as recipes' ``precision`` and
the memory table write it), and its safetensors code (``BF16``). Importing this module does not load torch:
the CLI builds its ``--dtype`` choices from it at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = [
    "DTYPES",
    "DTYPE_CHOICES",
    "DType",
    "UnknownDtypeError",
    "bytes_per_element",
    "dtype_info",
    "dtype_name",
    "from_safetensors",
    "parse_dtype",
]


@dataclass(frozen=True)
class DType:
    """One floating-point dtype."""

    name: str
    """Canonical: torch's attribute name (``torch.bfloat16``) and Hugging Face's ``dtype`` string."""
    short: str
    """``fp32``, ``bf16``: as ``train.precision`` and the memory estimate write it."""
    itemsize: int
    """Bytes per element."""
    safetensors: str
    """The dtype code in a safetensors header (``F32``, ``BF16``)."""
    aliases: tuple[str, ...] = ()
    parameters: bool = True
    """A model can be built with its parameters in this dtype (False: storage formats such as fp8)."""

    @property
    def names(self) -> tuple[str, ...]:
        """Every name that means this dtype."""
        return (self.name, self.short, *self.aliases)

    @property
    def torch_dtype(self) -> torch.dtype:
        import torch

        return getattr(torch, self.name)


DTYPES: tuple[DType, ...] = (
    DType("float32", "fp32", 4, "F32", aliases=("float",)),
    DType("bfloat16", "bf16", 2, "BF16"),
    DType("float16", "fp16", 2, "F16", aliases=("half",)),
    DType("float64", "fp64", 8, "F64", aliases=("double",)),
    DType("float8_e4m3fn", "fp8", 1, "F8_E4M3", parameters=False),
)

DTYPE_CHOICES: tuple[str, ...] = tuple(d.name for d in DTYPES if d.parameters)
"""The canonical names of the dtypes a model can be built in, in the order error messages list them."""

_BY_NAME = {name: d for d in DTYPES for name in d.names}
_BY_SAFETENSORS = {d.safetensors: d for d in DTYPES}


class UnknownDtypeError(ValueError):
    """A dtype name that is not in the table (or not one a model can be built in)."""


def dtype_info(dtype: str | torch.dtype, *, parameters: bool = False) -> DType:
    """The table's row for a name, an alias or a torch dtype; ``parameters``: only dtypes a model is built in.

    Raises:
        UnknownDtypeError: not in the table; the message lists ``DTYPE_CHOICES``.
    """
    key = dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
    found = _BY_NAME.get(key)
    if found is None or (parameters and not found.parameters):
        raise UnknownDtypeError(f"unknown dtype {dtype!r}; choose one of: {', '.join(DTYPE_CHOICES)}")
    return found


def parse_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """The torch dtype a model is built in, from a name or alias (``float32``, ``bf16``, ``half``).

    Raises:
        UnknownDtypeError: ``unknown dtype 'x'; choose one of: float32, bfloat16, float16, float64``.
    """
    return dtype_info(dtype, parameters=True).torch_dtype


def dtype_name(dtype: str | torch.dtype) -> str:
    """The canonical name of a dtype: ``float32`` for ``torch.float32``, ``fp32`` or ``float``."""
    return dtype_info(dtype).name


def bytes_per_element(dtype: str | torch.dtype) -> int:
    return dtype_info(dtype).itemsize


def from_safetensors(code: str | None) -> torch.dtype | None:
    """The dtype to build a model in for weights stored as safetensors code ``code`` (``BF16``).

    None for codes of no dtype a model is built in (fp8, integers): the caller's default applies.
    """
    found = _BY_SAFETENSORS.get(code) if code is not None else None
    return found.torch_dtype if found is not None and found.parameters else None
