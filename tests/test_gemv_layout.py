"""generate's decode layout on the CPU: wide fp32 linear weights are stored column-major for a call that decodes
1-2 rows for 64+ steps, and put back after; the tokens are those of recomputation."""

from __future__ import annotations

import torch
from torch import nn

import zoo
from zoo.generate import GEMV_LAYOUT_MAX_ROWS, GEMV_LAYOUT_MIN_STEPS, gemv_layout, generate


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
