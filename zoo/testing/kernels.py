"""The attention-kernel contract: every registered kernel (kind ``kernel``) equals the reference math.

A plugin checks its kernels with ``class TestKernels(KernelContract): plugin = "<entry-point name>"``.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

__all__ = ["KERNEL_CASES", "KernelContract"]


def _kernel_inputs(query_len: int = 3, key_len: int = 5, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 4, query_len, 8, generator=g)
    k, v = (torch.randn(2, 2, key_len, 8, generator=g) for _ in range(2))
    mask = torch.rand(2, 1, query_len, key_len, generator=g) > 0.4
    mask[0, 0, 0] = False  # a row with nothing to attend
    bias = torch.randn(1, 4, query_len, key_len, generator=g)
    # Llama 4's chunks of 2 positions, the queries the last of the keys, a left-padded row's chunks shifted by one:
    # a mask per row, (N, 1, L, S), as a chunked attention gives the kernel.
    from zoo.components.attention.masks import chunked_mask
    from zoo.components.kernels import causal_mask

    key_pos = torch.arange(key_len)[None] - torch.tensor([[0], [1]])  # (2, S)
    chunks = chunked_mask(key_pos[:, key_len - query_len :], key_pos, 2)[:, None] & causal_mask(query_len, key_len)
    return {"q": q, "k": k, "v": v, "mask": mask, "bias": bias, "chunks": chunks}


KERNEL_CASES: dict[str, tuple[tuple[int, int], tuple[str, ...], dict[str, Any]]] = {
    # "mask=chunks": the input named chunks given as the mask
    "plain": ((3, 5), (), {}),
    "mask": ((3, 5), ("mask",), {}),
    "bias": ((3, 5), ("bias",), {}),
    "mask+bias": ((3, 5), ("mask", "bias"), {}),
    "scale": ((3, 5), ("mask",), {"scale": 0.7}),
    "softcap": ((3, 5), ("mask", "bias"), {"softcap": 2.0}),
    "causal": ((5, 5), (), {"causal": True}),
    "causal+bias": ((5, 5), ("bias",), {"causal": True}),
    "causal-after-cache": ((3, 5), (), {"causal": True}),
    "one-query": ((1, 5), (), {"causal": True}),
    "one-masked-query": ((1, 5), ("mask",), {"causal": True}),
    "chunked": ((5, 5), ("mask=chunks",), {"causal": True}),
    "chunked-after-cache+bias": ((3, 5), ("mask=chunks", "bias"), {"causal": True}),
}
"""Kernel contract cases: (query and key lengths, the inputs given, the options)."""


class KernelContract:
    """Subclass as ``TestSomething`` and set ``plugin`` or ``names`` to choose the attention kernels to check."""

    plugin: str | None = None
    names: tuple[str, ...] | None = None

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "kernel_name" not in metafunc.fixturenames:
            return
        from zoo.plugins import get_registry

        names = [
            c.name
            for c in get_registry()
            if c.kind == "kernel"
            and (self.plugin is None or c.plugin == self.plugin)
            and (self.names is None or c.name in self.names)
        ]
        if not names:
            raise ValueError(f"zoo.testing: no kernel registered matches plugin={self.plugin!r}, names={self.names!r}")
        metafunc.parametrize("kernel_name", names)

    @staticmethod
    def _kernel(name: str) -> Any:
        from zoo.builder import resolve_kernel

        return resolve_kernel(name)

    @pytest.mark.parametrize("case", list(KERNEL_CASES))
    def test_equals_the_reference(self, kernel_name: str, case: str) -> None:
        from zoo.components.kernels import eager

        (query_len, key_len), given, options = KERNEL_CASES[case]
        inputs = _kernel_inputs(query_len, key_len)
        kwargs = {name.partition("=")[0]: inputs[name.rpartition("=")[2]] for name in given} | options
        q, k, v = inputs["q"], inputs["k"], inputs["v"]
        with torch.no_grad():
            out = self._kernel(kernel_name)(q, k, v, **kwargs)
            expected = eager(q, k, v, **kwargs)
        assert out.shape == expected.shape, f"{kernel_name}: shape {tuple(out.shape)}, expected {tuple(expected.shape)}"
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5, msg=lambda m: f"{kernel_name}, {case}: {m}")

    def test_a_row_that_sees_nothing_gives_zeros(self, kernel_name: str) -> None:
        inputs = _kernel_inputs()
        with torch.no_grad():
            for bias in (None, inputs["bias"]):
                out = self._kernel(kernel_name)(inputs["q"], inputs["k"], inputs["v"], mask=inputs["mask"], bias=bias)
                assert torch.equal(out[0, :, 0], torch.zeros_like(out[0, :, 0])), f"{kernel_name}: not zeros"

    def test_gradients_are_finite(self, kernel_name: str) -> None:
        from zoo.plugins import get_registry

        config = get_registry().get("kernel", kernel_name).config
        if not getattr(config, "differentiable_on_cpu", True):
            pytest.skip(f"kernel {kernel_name} computes no gradients on the CPU (its config says so)")
        inputs = _kernel_inputs()
        q, k, v = (inputs[n].requires_grad_() for n in "qkv")
        out = self._kernel(kernel_name)(q, k, v, mask=inputs["mask"], bias=inputs["bias"])
        out.square().sum().backward()
        for name, t in zip("qkv", (q, k, v), strict=True):
            assert t.grad is not None and torch.isfinite(t.grad).all(), f"{kernel_name}: {name} gradient not finite"
