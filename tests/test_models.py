"""Whole-model properties: causality, padding invariance, cached decoding equals recomputation."""

from __future__ import annotations

import pytest
import torch

import zoo

DECODERS = {
    "gpt-tiny": {},
    "llama-tiny": {},
    "moe-tiny": {},
    "gpt-mqa-alibi": {
        "base": "gpt-tiny",
        "attention": {"type": "mqa", "num_heads": 4},
        "positional": {"type": "alibi"},
    },
    "gpt-sinusoidal": {"base": "gpt-tiny", "positional": {"type": "sinusoidal"}},
    "llama-moa": {"base": "llama-tiny", "attention": {"type": "moa", "num_experts": 4, "top_k": 2}},
    "llama-post-norm": {"base": "llama-tiny", "norm_position": "post"},
}


def build(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    spec = dict(DECODERS.get(name, {}))
    base = spec.pop("base", name)
    return zoo.build(base, **spec).eval()


def ids(batch: int, length: int, vocab: int = 256, seed: int = 0) -> torch.Tensor:
    return torch.randint(1, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", DECODERS)
@torch.no_grad()
def test_decoder_is_causal(name):
    model = build(name)
    x = ids(2, 10)
    y = x.clone()
    y[:, 6:] = ids(2, 4, seed=1)
    a, b = model(x).logits, model(y).logits
    torch.testing.assert_close(a[:, :6], b[:, :6], rtol=0, atol=1e-5)
    assert not torch.allclose(a[:, 6:], b[:, 6:])


@pytest.mark.parametrize("name", DECODERS)
@torch.no_grad()
def test_right_padding_changes_no_real_position(name):
    model = build(name)
    x = ids(2, 7)
    padded = torch.cat([x, torch.zeros(2, 5, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(2, 7), torch.zeros(2, 5)], dim=1).bool()
    a = model(x).logits
    b = model(padded, attention_mask=mask).logits
    torch.testing.assert_close(a, b[:, :7], rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", DECODERS)
@torch.no_grad()
def test_cached_decoding_equals_recomputation(name):
    model = build(name)
    x = ids(2, 12)
    full = model(x).logits
    cache = model.new_cache(batch_size=2, max_len=16)
    steps = [model(x[:, :5], cache=cache).logits]
    for t in range(5, 12):
        steps.append(model(x[:, t : t + 1], cache=cache).logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-5)
    assert cache.length == 12


@torch.no_grad()
def test_left_padded_batch_gives_no_nan_and_matches_unpadded():
    model = build("llama-tiny")
    x = ids(1, 6)
    padded = torch.cat([torch.zeros(1, 3, dtype=torch.long), x], dim=1)
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1, 1]]).bool()
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
    out = model(padded, attention_mask=mask, positions=positions).logits
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[:, 3:], model(x).logits, rtol=0, atol=1e-5)


@torch.no_grad()
def test_encoder_is_bidirectional_and_padding_invariant():
    torch.manual_seed(0)
    model = zoo.build("bert-tiny").eval()
    x = ids(2, 8)
    y = x.clone()
    y[:, -1] = (y[:, -1] % 200) + 1
    assert not torch.allclose(model(x).logits[:, 0], model(y).logits[:, 0])
    padded = torch.cat([x, torch.zeros(2, 4, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(2, 8), torch.zeros(2, 4)], dim=1).bool()
    torch.testing.assert_close(model(padded, attention_mask=mask).logits[:, :8], model(x).logits, rtol=0, atol=1e-5)


@torch.no_grad()
def test_classification_mean_pool_ignores_padding():
    torch.manual_seed(0)
    model = zoo.build("bert-tiny", head={"type": "classification", "pool": "mean"}, num_classes=3).eval()
    x = ids(2, 8)
    padded = torch.cat([x, torch.zeros(2, 4, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(2, 8), torch.zeros(2, 4)], dim=1).bool()
    torch.testing.assert_close(model(padded, attention_mask=mask).logits, model(x).logits, rtol=0, atol=1e-5)


@torch.no_grad()
def test_encoder_decoder_source_padding_and_cached_decoding():
    torch.manual_seed(0)
    model = zoo.build("t5-tiny").eval()
    src, tgt = ids(2, 9), ids(2, 6, seed=3)
    full = model(src, tgt).logits
    padded = torch.cat([src, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(2, 9), torch.zeros(2, 3)], dim=1).bool()
    torch.testing.assert_close(model(padded, tgt, attention_mask=mask).logits, full, rtol=0, atol=1e-5)
    # Decode one token at a time, the encoder output and its cross-attention K/V computed once.
    encoder_hidden = model.encode(src)
    cache = model.new_cache(batch_size=2, max_len=8)
    steps = [
        model(decoder_input_ids=tgt[:, t : t + 1], encoder_hidden=encoder_hidden, cache=cache).logits for t in range(6)
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-5)


def test_teacher_forcing_shifts_labels_right():
    model = zoo.build("t5-tiny")
    labels = torch.tensor([[5, 6, -100]])
    assert model.shift_right(labels).tolist() == [[0, 5, 6]]


@torch.no_grad()
def test_vit_is_permutation_sensitive_through_positions():
    torch.manual_seed(0)
    model = zoo.build("vit-tiny").eval()
    images = torch.randn(2, 1, 8, 8)
    out = model(images)
    assert out.logits.shape == (2, 10)
    flipped = model(images.flip(-1)).logits
    assert not torch.allclose(out.logits, flipped)
