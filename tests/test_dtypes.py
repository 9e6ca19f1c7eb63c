"""``zoo.dtypes``: the one table of dtype names that the builder, the CLI, training and the memory estimate use."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from zoo.dtypes import (
    DTYPE_CHOICES,
    DTYPES,
    UnknownDtypeError,
    bytes_per_element,
    dtype_info,
    dtype_name,
    from_safetensors,
    parse_dtype,
)
from zoo.errors import RecipeError


@pytest.mark.parametrize(
    "name, dtype",
    [
        ("float32", torch.float32),
        ("fp32", torch.float32),
        ("float", torch.float32),
        ("bfloat16", torch.bfloat16),
        ("bf16", torch.bfloat16),
        ("float16", torch.float16),
        ("fp16", torch.float16),
        ("half", torch.float16),
        ("float64", torch.float64),
        ("fp64", torch.float64),
        (torch.bfloat16, torch.bfloat16),
    ],
)
def test_names_and_aliases(name, dtype):
    assert parse_dtype(name) is dtype


def test_unknown_names_list_the_choices():
    with pytest.raises(
        UnknownDtypeError, match=r"unknown dtype 'fp4'; choose one of: float32, bfloat16, float16, float64$"
    ):
        parse_dtype("fp4")
    with pytest.raises(UnknownDtypeError, match="unknown dtype 'fp8'"):  # a storage format, not one to build in
        parse_dtype("fp8")


def test_canonical_names_and_sizes():
    assert DTYPE_CHOICES == ("float32", "bfloat16", "float16", "float64")
    assert [dtype_name(n) for n in ("fp32", "bf16", "half", torch.float64)] == list(DTYPE_CHOICES)
    assert {n: bytes_per_element(n) for n in ("fp32", "bf16", "fp16", "fp64", "fp8")} == {
        "fp32": 4,
        "bf16": 2,
        "fp16": 2,
        "fp64": 8,
        "fp8": 1,
    }
    for row in DTYPES:
        assert row.torch_dtype.itemsize == row.itemsize and dtype_info(row.torch_dtype) is row


def test_safetensors_codes():
    assert [from_safetensors(c) for c in ("F32", "BF16", "F16", "F64")] == [
        torch.float32,
        torch.bfloat16,
        torch.float16,
        torch.float64,
    ]
    assert from_safetensors("F8_E4M3") is None and from_safetensors("I64") is None and from_safetensors(None) is None


def test_the_builder_keeps_its_error():
    from zoo.builder import parse_dtype as builder_parse_dtype

    assert builder_parse_dtype("bf16") is torch.bfloat16 and builder_parse_dtype(None) is None
    assert builder_parse_dtype(torch.float16) is torch.float16
    with pytest.raises(RecipeError) as info:
        builder_parse_dtype("float8")
    assert str(info.value) == "unknown dtype 'float8'; choose one of: float32, bfloat16, float16, float64"


def test_training_precision_and_memory_read_the_table():
    from zoo.analysis.memory import WEIGHT_BYTES
    from zoo.train.loop import autocast_dtype

    cpu = torch.device("cpu")
    assert [autocast_dtype(p, cpu) for p in ("fp32", "bf16", "fp16", "auto")] == [
        None,
        torch.bfloat16,
        torch.float16,
        None,
    ]
    assert WEIGHT_BYTES == {"fp32": 4, "bf16": 2, "fp8": 1}


def test_the_cli_choices_are_the_table():
    from zoo.cli.build import Dtype
    from zoo.cli.hf import Dtype as ImportDtype

    assert ImportDtype is Dtype and tuple(d.value for d in Dtype) == DTYPE_CHOICES
    assert Dtype("bfloat16") is Dtype.bfloat16 and isinstance(Dtype.float32, str)


def test_importing_the_table_does_not_load_torch():
    code = "import sys, zoo.dtypes; print('torch' in sys.modules, zoo.dtypes.dtype_name('bf16'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "bfloat16"]
