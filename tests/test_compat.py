"""zoo.compat: each wrapper of a private torch API works on the installed torch, checked per version range."""

from __future__ import annotations

import pytest
import torch

from zoo import compat

VERSION = compat.torch_version()


def test_the_version_is_read_from_torch():
    assert VERSION >= (2, 5), "zoo needs torch >= 2.5 (pyproject.toml)"


@pytest.mark.skipif(VERSION < (2, 7), reason="dynamo's recompile_limit has this name from torch 2.7")
def test_recompile_limit_reads_recompile_limit_from_2_7():
    assert compat.recompile_limit() == torch._dynamo.config.recompile_limit


@pytest.mark.skipif(VERSION >= (2, 7), reason="before torch 2.7 the limit is cache_size_limit")
def test_recompile_limit_reads_cache_size_limit_before_2_7():
    assert compat.recompile_limit() == torch._dynamo.config.cache_size_limit


def test_guards_can_be_skipped_from_2_6_only():
    assert compat.can_skip_guards() == (VERSION >= (2, 6))


def test_compiled_graphs_are_counted_per_function():
    torch._dynamo.reset()

    def double(x):
        return x * 2

    assert compat.compiled_graph_count(double) == 0
    compiled = torch.compile(double, backend="eager", dynamic=False)
    compiled(torch.ones(2))
    assert compat.compiled_graph_count(double) == 1
    compiled(torch.ones(3))  # a new static shape: a graph of its own
    assert compat.compiled_graph_count(double) == 2


def test_a_static_address_is_marked():
    t = torch.zeros(3)
    compat.mark_static_address(t)
    assert getattr(t, "_dynamo_static_input_type", None) is not None
