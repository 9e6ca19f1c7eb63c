"""Attention kernels: every registered kernel under the kernel contract, the reference math against an
independent one, and the choice of a kernel at build time and for a call."""

from __future__ import annotations

import math

import pytest
import torch

import zoo
from zoo.components.kernels import causal_mask, eager, sdpa
from zoo.testing import KernelContract


class TestBuiltinKernels(KernelContract):
    plugin = "zoo.components.kernels"


def independent_reference(q, k, v, *, mask=None, bias=None, scale=None, softcap=None):
    """softmax(cap(q k^T * scale) + bias, masked) v, K/V heads repeated for the query groups."""
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1) * (scale if scale is not None else 1 / math.sqrt(q.size(-1)))
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)
    if bias is not None:
        scores = scores + bias
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return (scores.softmax(-1) @ v).nan_to_num(0.0)


def test_eager_is_the_reference_math():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, 3, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    mask = torch.rand(2, 1, 3, 5) > 0.4
    mask[0, 0, 1] = False  # a row with nothing to attend
    bias = torch.randn(1, 4, 3, 5)
    for kw in ({}, {"mask": mask}, {"bias": bias}, {"mask": mask, "bias": bias}, {"scale": 0.7}, {"softcap": 2.0}):
        torch.testing.assert_close(eager(q, k, v, **kw), independent_reference(q, k, v, **kw))


def test_causal_is_bottom_right_aligned():
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, 3, 8), torch.randn(1, 1, 5, 8), torch.randn(1, 1, 5, 8)
    bias = torch.randn(1, 2, 3, 5)
    # 3 new queries after 2 cached keys: the last query sees every key.
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(causal_mask(3, 5), mask)
    for kernel in (eager, sdpa):
        torch.testing.assert_close(
            kernel(q, k, v, causal=True, bias=bias), independent_reference(q, k, v, mask=mask, bias=bias)
        )
        torch.testing.assert_close(kernel(q, k, v, causal=True), independent_reference(q, k, v, mask=mask))


@torch.no_grad()
def test_a_kernel_chosen_at_build_or_for_a_call_gives_the_same_logits():
    x = torch.randint(0, 256, (2, 9))
    torch.manual_seed(0)
    model = zoo.build("llama-tiny").eval()
    reference = model(x).logits
    torch.manual_seed(0)
    built = zoo.build("llama-tiny", kernel="eager").eval()
    assert all(b.attention.kernel is eager for b in built.blocks)
    torch.testing.assert_close(built(x).logits, reference, rtol=0, atol=1e-5)
    with zoo.use_kernel(model, eager):
        assert all(b.attention.kernel is eager for b in model.blocks)
        torch.testing.assert_close(model(x).logits, reference, rtol=0, atol=1e-5)
    assert all(b.attention.kernel is sdpa for b in model.blocks), "use_kernel puts the built kernel back"


def test_an_unknown_kernel_is_refused_with_the_registered_ones():
    with pytest.raises(zoo.RecipeError) as err:
        zoo.build("llama-tiny", kernel="eagr", device="meta")
    message = str(err.value)
    assert "kernel.type: unknown kernel type 'eagr' (did you mean 'eager'?)" in message
    assert "registered: " in message and "sdpa" in message


@pytest.mark.parametrize("recipe", ["llama-tiny", "gpt-tiny", "bert-tiny", "t5-tiny"])
def test_a_model_reaches_its_kernel_in_at_most_four_frames_of_zoo(recipe):
    import inspect
    from pathlib import Path

    package = str(Path(zoo.__file__).parent)
    seen: list[list[str]] = []

    def spy(q, k, v, **options):
        frames = [f for f in inspect.stack()[1:] if f.filename.startswith(package)]
        seen.append([f"{Path(f.filename).name}:{f.function}" for f in frames])
        return sdpa(q, k, v, **options)

    model = zoo.build(recipe, kernel=spy).eval()
    inputs = {"input_ids": torch.randint(1, 100, (2, 6))}
    if recipe == "t5-tiny":
        inputs["decoder_input_ids"] = torch.randint(1, 100, (2, 3))
    with torch.no_grad():
        model(**inputs)
    assert seen, "the kernel was never called"
    for frames in seen:
        assert len(frames) <= 4, f"{len(frames)} frames of zoo from the model's forward to the kernel: {frames}"
