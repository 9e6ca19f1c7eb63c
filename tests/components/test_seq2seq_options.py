"""Component options of the encoder-decoder and vision families: UMT5's per-layer position bias, M2M-100's fairseq
sinusoids numbered past the padding, BART's fixed logits bias, DeiT's distillation token and averaged heads, and
the decoder start token of a recipe."""

from __future__ import annotations

import importlib

import pytest
import torch

import zoo
from zoo.components.attention import GroupedQueryAttention, LayerPositions
from zoo.components.embedding import PatchEmbedding
from zoo.components.heads import ClassificationHead, LMHead
from zoo.components.positional import SinusoidalEncoding, T5RelativeBias, fairseq_sinusoid_table
from zoo.components.positional.sinusoidal import marian_sinusoid_table
from zoo.errors import RecipeError

T5_TINY = {"extends": "t5-tiny", "vocab_size": 61, "d_model": 32, "max_len": 16, "num_layers": 2}


def test_a_layer_position_bias_replaces_the_stack_bias_and_cross_attention_has_none():
    own = lambda: T5RelativeBias(16, num_heads=2, num_buckets=8, max_distance=16)  # noqa: E731
    attention = GroupedQueryAttention(16, num_heads=2, bias=False, positions=LayerPositions(score_bias=own))
    cross = GroupedQueryAttention(16, num_heads=2, bias=False, positions=LayerPositions(score_bias=own), cross=True)
    assert isinstance(attention.position_bias, T5RelativeBias) and cross.position_bias is None
    stack_bias = T5RelativeBias(16, num_heads=2, num_buckets=8, max_distance=16)
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        with_stack = attention(x, pos=stack_bias)
        alone = attention(x)
        attention.position_bias = stack_bias
        as_stack = attention(x)
    assert torch.equal(with_stack, alone)  # the layer's own table wins over the stack's
    assert not torch.allclose(alone, as_stack)


def test_per_layer_tables_are_counted_and_refused_when_not_a_bias():
    recipe = {
        **T5_TINY,
        "positional": {"type": "none"},
        "attention": {"type": "mha", "num_heads": 4, "bias": False, "scale": 1.0, "position_bias": "t5_relative"},
    }
    model = zoo.build(recipe, device="meta")
    shared = zoo.build(T5_TINY, device="meta")
    blocks = 2 + 2  # encoder and decoder self-attentions, each with 32 buckets x 4 heads
    assert zoo.count_parameters(model) - zoo.count_parameters(shared) == blocks * 32 * 4 - 2 * 32 * 4
    with pytest.raises(RecipeError, match="position_bias"):
        zoo.build({**recipe, "attention": {**recipe["attention"], "position_bias": "rope"}}, device="meta")


def test_fairseq_sinusoids_are_sines_then_cosines_at_fairseq_speeds():
    table = fairseq_sinusoid_table(5, 8)
    speeds = torch.exp(torch.arange(4).float() * -(torch.log(torch.tensor(10000.0)) / 3))
    assert torch.allclose(table[3, :4], torch.sin(3 * speeds)) and torch.allclose(table[3, 4:], torch.cos(3 * speeds))
    transformers = pytest.importorskip("transformers")
    reference = transformers.models.m2m_100.modeling_m2m_100.M2M100SinusoidalPositionalEmbedding.get_embedding
    encoding = SinusoidalEncoding(8, max_len=10, offset=2, padding_idx=1, layout="fairseq")
    assert torch.equal(encoding.table, reference(12, 8, 1))


def test_marian_sinusoids_are_sines_then_cosines_at_vaswani_speeds_in_a_frozen_parameter():
    table = marian_sinusoid_table(5, 8)
    speeds = 10000.0 ** (-torch.arange(4, dtype=torch.float64) * 2 / 8)
    assert torch.allclose(table[3, :4], torch.sin(3 * speeds)) and torch.allclose(table[3, 4:], torch.cos(3 * speeds))
    encoding = SinusoidalEncoding(8, max_len=10, layout="marian", parameter=True)
    assert [n for n, p in encoding.named_parameters() if not p.requires_grad] == ["table"]
    assert "table" in encoding.state_dict() and "table" not in SinusoidalEncoding(8, max_len=10).state_dict()
    encoding.table.requires_grad_(True)  # as LoRA's merge sets every parameter: still no gradient reaches it
    encoding.embed(torch.randn(1, 3, 8, requires_grad=True), torch.arange(3)[None]).sum().backward()
    assert encoding.table.grad is None
    pytest.importorskip("transformers")
    for family in ("marian", "pegasus"):
        module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
        reference = getattr(module, f"{family.title()}SinusoidalPositionalEmbedding")(10, 8).create_weight()
        assert torch.equal(encoding.table, reference)
    stored = {"positional.layout": "marian", "positional.parameter": True}
    computed = zoo.count_parameters(zoo.build("m2m100-tiny", device="meta"))
    counted = zoo.count_parameters(zoo.build("m2m100-tiny", device="meta", **stored))
    assert counted - computed == 2 * (128 + 1) * 64  # a table per stack: max_len + offset rows of d_model


def test_padding_aware_sinusoids_skip_the_pad_id_and_give_it_the_zero_row():
    encoding = SinusoidalEncoding(8, max_len=10, offset=2, padding_idx=1, layout="fairseq")
    ids = torch.tensor([[5, 1, 6, 7], [1, 1, 5, 6]])
    positions = encoding.positions_from_ids(ids)
    assert positions.tolist() == [[0, -1, 1, 2], [-1, -1, 0, 1]]
    out = encoding.embed(torch.zeros(2, 4, 8), positions)
    assert not out[0, 1].any() and torch.equal(out[1, 2], encoding.table[2])
    assert SinusoidalEncoding(8, max_len=10).positions_from_ids(ids) is None
    with pytest.raises(ValueError, match="offset"):
        SinusoidalEncoding(8, max_len=10, padding_idx=1)


def test_logits_bias_is_a_buffer_added_to_every_logit():
    head = LMHead(8, vocab_size=5, logits_bias=True)
    assert "logits_bias" in head.state_dict() and not any("logits_bias" in n for n, _ in head.named_parameters())
    h = torch.randn(2, 3, 8)
    plain = head(h)
    with torch.no_grad():
        head.logits_bias.copy_(torch.arange(5.0))
    assert torch.equal(head(h), plain + torch.arange(5.0))
    assert LMHead(8, vocab_size=5).logits_bias is None


def test_distillation_token_follows_cls_and_the_heads_are_averaged():
    embedding = PatchEmbedding(8, image_size=4, patch_size=2, num_channels=1, distillation_token=True)
    with torch.no_grad():
        embedding.distillation_token.fill_(3.0)
    x = embedding(torch.randn(2, 1, 4, 4))
    assert x.shape == (2, 6, 8) and embedding.num_positions == 6 and torch.all(x[:, 1] == 3.0)
    head = ClassificationHead(8, num_classes=3, distillation=True)
    h = torch.randn(2, 6, 8)
    assert torch.equal(head(h), (head.proj(h[:, 0]) + head.distill_proj(h[:, 1])) / 2)
    model = zoo.build("deit-tiny", device="meta")
    assert model.recipe.max_len == 16 + 2 and model.positional.embedding.weight.shape[0] == 18


def test_decoder_start_token_is_the_recipes_else_the_pad_id():
    assert zoo.build(T5_TINY, device="meta").decoder_start_token_id == 0
    model = zoo.build({**T5_TINY, "pad_token_id": 1, "decoder_start_token_id": 2}, device="meta")
    assert model.decoder_start_token_id == 2
    labels = torch.tensor([[5, -100, 6, -100]])
    assert model.shift_right(labels).tolist() == [[2, 5, 1, 6]]  # an ignored label is seen as padding
    with pytest.raises(RecipeError, match="decoder_start_token_id"):
        zoo.build({**T5_TINY, "decoder_start_token_id": 61}, device="meta")
