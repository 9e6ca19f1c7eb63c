"""The CPU decoding backend (``zoo.generate.cpu``) changes how a model computes, never what: the decode layout
(wide fp32 weights stored column-major for a call that decodes 1-2 rows for 64+ steps, put back after), the
few-row wide products (``(W @ h.T).T`` for 3-64 rows) and the ``cpu_decode`` kernel give the tokens and logits of
the model as built, and everything is as it was after the call."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import zoo
from zoo.components.heads import LMHead
from zoo.components.kernels import cpu_decode, sdpa
from zoo.generate import (
    GEMV_LAYOUT_MAX_ROWS,
    GEMV_LAYOUT_MIN_STEPS,
    cpu_decoding,
    few_row_products,
    gemv_layout,
    generate,
)


def randomised(recipe: str) -> nn.Module:
    torch.manual_seed(0)
    model = zoo.build(recipe).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


def wide(model: nn.Module) -> list[nn.Linear]:
    return [m for m in model.modules() if isinstance(m, nn.Linear) and m.out_features > m.in_features]


def test_wide_weights_are_column_major_inside_and_row_major_after():
    model = randomised("gpt-tiny")
    before = {name: (p, p.detach().clone()) for name, p in model.named_parameters()}
    head = model.head.proj.weight
    assert head is model.embedding.weight and head.shape[0] > head.shape[1]  # tied, and wide: moved once
    with torch.inference_mode(), gemv_layout(model, rows=1, steps=GEMV_LAYOUT_MIN_STEPS):
        for m in wide(model):
            assert m.weight.stride() == (1, m.out_features), m  # (out, in) stored as (in, out)
        for m in model.modules():
            if isinstance(m, nn.Linear) and m.out_features <= m.in_features:
                assert m.weight.is_contiguous(), m
    for name, p in model.named_parameters():
        same, values = before[name]
        assert p is same and p.is_contiguous() and not p.is_inference() and torch.equal(p, values), name
    assert model.head.proj.weight is head


def test_short_or_wide_batches_keep_the_layout():
    model = randomised("gpt-tiny")
    for rows, steps in ((GEMV_LAYOUT_MAX_ROWS + 1, 256), (1, GEMV_LAYOUT_MIN_STEPS - 1)):
        with gemv_layout(model, rows=rows, steps=steps):
            assert all(p.is_contiguous() for p in model.parameters())


def test_a_long_decode_gives_the_tokens_of_recomputation():
    for recipe in ("gpt-tiny", "llama-tiny"):
        model = randomised(recipe)
        new = GEMV_LAYOUT_MIN_STEPS
        prompt = [[5, 17, 3, 8]]
        assert (
            generate(model, prompt, max_new_tokens=new).tokens
            == generate(model, prompt, max_new_tokens=new, use_cache=False).tokens
        ), recipe
        assert all(p.is_contiguous() for p in model.parameters())


def test_training_after_a_decode_sees_plain_parameters():
    model = randomised("gpt-tiny")
    generate(model, [[1, 2, 3]], max_new_tokens=GEMV_LAYOUT_MIN_STEPS)
    ids = torch.randint(1, 100, (2, 9))
    out = model(ids[:, :-1], labels=ids[:, 1:])
    out.loss.backward()
    assert all(p.grad is not None and p.grad.is_contiguous() for p in model.parameters() if p.requires_grad)


def _transposed(t: torch.Tensor) -> bool:
    return t.stride(-1) != 1  # (W @ h.T).T: the vocabulary is the slow dimension


@pytest.mark.parametrize("shape", [(3, 1, 32), (32, 1, 32), (1, 7, 32), (2, 32, 32)])
@pytest.mark.parametrize("bias", [False, True])
def test_few_rows_take_the_transposed_product_with_the_same_logits(shape, bias):
    torch.manual_seed(0)
    proj = nn.Linear(32, 512, bias=bias)
    h = torch.randn(shape)
    with torch.no_grad():
        want = proj(h)
        with few_row_products(proj):
            got = proj(h)
    assert _transposed(got) and got.shape == want.shape == (*shape[:-1], 512)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert "forward" not in proj.__dict__, "the module's own forward is back after the call"


def test_the_plain_product_everywhere_else():
    torch.manual_seed(0)
    wide, narrow = nn.Linear(32, 512), nn.Linear(32, 128)  # 128 < 8 x 32: not a vocabulary
    h = torch.randn(4, 1, 32)
    double = nn.Linear(32, 512).double()
    with few_row_products(wide), few_row_products(narrow), few_row_products(double):
        with torch.no_grad():
            assert not _transposed(wide(torch.randn(2, 1, 32)))  # 2 rows: a GEMV
            assert not _transposed(wide(torch.randn(65, 32)))  # many rows: MKL is fast
            assert not _transposed(narrow(h))
            assert not _transposed(double(h.double()))
        assert not _transposed(wide(h))  # autograd on: training keeps its layout


def test_a_hook_still_sees_the_call():
    seen = []
    hooked = nn.Linear(32, 512)
    hooked.register_forward_hook(lambda module, args, out: seen.append(out.shape))
    with torch.no_grad(), few_row_products(hooked):
        assert _transposed(hooked(torch.randn(4, 1, 32)))
    assert seen == [(4, 1, 512)]  # torchinfo's summary sees it


def test_lm_head_decodes_a_batch_with_the_transposed_product():
    torch.manual_seed(0)
    head = LMHead(32, vocab_size=512, softcap=30.0)
    h = torch.randn(8, 1, 32)
    with torch.no_grad(), few_row_products(head):
        got = head(h)
    want = torch.tanh(nn.functional.linear(h, head.proj.weight) / 30.0) * 30.0
    assert _transposed(got)  # the softcap keeps the product's layout
    torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-5)


@torch.no_grad()
def test_the_backend_decodes_a_padded_batch_as_the_model_as_built():
    model = randomised("llama-tiny")
    x = torch.randint(1, 256, (8, 6))
    mask = torch.ones(8, 6, dtype=torch.bool)
    mask[:3, :2] = False  # left padding: the decoding steps are masked single queries
    reference = model(x, attention_mask=mask).logits
    with cpu_decoding(model, rows=8, steps=4):
        assert all(b.attention.kernel is cpu_decode for b in model.blocks)
        got = model(x, attention_mask=mask).logits
        cache = model.new_cache(8, 6)
        steps = [model(x[:, :3], attention_mask=mask[:, :3], cache=cache).logits]
        steps += [model(x[:, t : t + 1], attention_mask=mask[:, : t + 1], cache=cache).logits for t in range(3, 6)]
    torch.testing.assert_close(got, reference, rtol=0, atol=1e-5)
    torch.testing.assert_close(torch.cat(steps, 1), reference, rtol=0, atol=1e-5)
    assert all(b.attention.kernel is sdpa for b in model.blocks), "the model's own kernel is back after the call"
    prompts = [[5, 17, 3, 8], [9, 2]]
    assert (
        generate(model, prompts, max_new_tokens=6).tokens
        == generate(model, prompts, max_new_tokens=6, kernel="sdpa").tokens
    )
