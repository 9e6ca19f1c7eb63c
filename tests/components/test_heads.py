"""The LM head's logits: the transposed product it takes for a few rows on the CPU equals the plain one."""

import pytest
import torch
from torch import nn

from zoo.components.heads import LMHead, vocabulary_logits


def _transposed(t: torch.Tensor) -> bool:
    return t.stride(-1) != 1  # (W @ h.T).T: the vocabulary is the slow dimension


@pytest.mark.parametrize("shape", [(3, 1, 32), (32, 1, 32), (1, 7, 32), (2, 32, 32)])
@pytest.mark.parametrize("bias", [False, True])
def test_few_rows_take_the_transposed_product_with_the_same_logits(shape, bias):
    torch.manual_seed(0)
    proj = nn.Linear(32, 512, bias=bias)
    h = torch.randn(shape)
    with torch.no_grad():
        got, want = vocabulary_logits(proj, h), proj(h)
    assert _transposed(got) and got.shape == want.shape == (*shape[:-1], 512)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_the_plain_product_everywhere_else():
    torch.manual_seed(0)
    wide, narrow = nn.Linear(32, 512), nn.Linear(32, 128)  # 128 < 8 x 32: not a vocabulary
    h = torch.randn(4, 1, 32)
    with torch.no_grad():
        assert not _transposed(vocabulary_logits(wide, torch.randn(2, 1, 32)))  # 2 rows: a GEMV
        assert not _transposed(vocabulary_logits(wide, torch.randn(65, 32)))  # many rows: MKL is fast
        assert not _transposed(vocabulary_logits(narrow, h))
        assert not _transposed(vocabulary_logits(wide.double(), h.double()))
    assert not _transposed(vocabulary_logits(nn.Linear(32, 512), h))  # autograd on: training keeps its layout
    seen = []
    hooked = nn.Linear(32, 512)
    hooked.register_forward_hook(lambda module, args, out: seen.append(out.shape))
    with torch.no_grad():
        assert not _transposed(vocabulary_logits(hooked, h))
    assert seen == [(4, 1, 512)]  # a hook still sees the call (torchinfo's summary)


def test_lm_head_decodes_a_batch_with_the_transposed_product():
    torch.manual_seed(0)
    head = LMHead(32, vocab_size=512, softcap=30.0)
    h = torch.randn(8, 1, 32)
    with torch.no_grad():
        got = head(h)
    want = torch.tanh(nn.functional.linear(h, head.proj.weight) / 30.0) * 30.0
    assert _transposed(got)  # the softcap keeps the product's layout
    torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-5)
