"""Disentangled attention (``attention: disentangled``) and DeBERTa's relative table (``positional:
deberta_relative``): the buckets are transformers', content alone is multi-head attention, the terms are those of the
formula, the declared parameters are the modules', and what cannot work is refused with the reason."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.components.attention import DisentangledAttention, MultiHeadAttention
from zoo.components.positional import DebertaRelativeEmbedding, deberta_bucket
from zoo.errors import RecipeError

ENCODER = {
    "name": "disentangled-test",
    "architecture": "encoder",
    "d_model": 32,
    "num_layers": 2,
    "vocab_size": 61,
    "max_len": 24,
    "norm_position": "post",
    "positional": {"type": "deberta_relative", "position_buckets": 4, "max_relative_positions": 12},
    "attention": {"type": "disentangled", "num_heads": 4},
    "norm": {"type": "layernorm", "eps": 1e-7},
    "ffn": {"type": "mlp", "hidden": 64},
    "head": "mlm",
}


@pytest.mark.parametrize(("buckets", "reach"), [(256, 512), (8, 64), (4, 12), (6, 7), (32, 100)])
def test_the_buckets_are_transformers(buckets, reach):
    modeling = pytest.importorskip("transformers.models.deberta_v2.modeling_deberta_v2")
    relative = torch.arange(-3 * reach, 3 * reach + 1)[None]  # (1, R): far past the reach on both sides
    expected = modeling.make_log_bucket_position(relative, buckets, reach).long()
    assert torch.equal(deberta_bucket(relative, buckets, reach), expected)


def test_the_table_rows_are_transformers_relative_positions():
    modeling = pytest.importorskip("transformers.models.deberta_v2.modeling_deberta_v2")
    table = DebertaRelativeEmbedding(8, max_len=64, position_buckets=8)
    x = torch.zeros(1, 1, 40, 2)
    hf = modeling.build_relative_position(x, x, bucket_size=8, max_position=64)  # (1, L, L)
    positions = torch.arange(40)[None]
    assert torch.equal(table.index(positions, positions), (hf + 8).clamp(0, 15))


def test_content_alone_is_multi_head_attention_with_the_same_weights():
    torch.manual_seed(0)
    plain = MultiHeadAttention(32, num_heads=4).eval()
    content = DisentangledAttention(32, num_heads=4, pos_att_type=()).eval()
    content.load_state_dict(plain.state_dict())
    x = torch.randn(2, 7, 32)
    mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    mask[1, ..., 5:] = False
    with torch.no_grad():
        torch.testing.assert_close(content(x, mask=mask), plain(x, mask=mask), rtol=0, atol=1e-6)
    assert sum(p.numel() for p in content.parameters()) == sum(p.numel() for p in plain.parameters())


@pytest.mark.parametrize("share", [True, False])
def test_the_scores_are_content_plus_both_position_terms(share):
    torch.manual_seed(0)
    table = DebertaRelativeEmbedding(16, max_len=16, position_buckets=4, max_relative_positions=10).eval()
    attention = DisentangledAttention(16, num_heads=2, share_att_key=share).eval()
    x, L, D = torch.randn(1, 6, 16), 6, 8
    with torch.no_grad():
        q, k = attention.q_proj(x)[0].view(L, 2, D), attention.k_proj(x)[0].view(L, 2, D)
        rel = table.table()
        pk = (attention.k_proj if share else attention.pos_key_proj)(rel).view(-1, 2, D)
        pq = (attention.q_proj if share else attention.pos_query_proj)(rel).view(-1, 2, D)
        index = table.index(torch.arange(L)[None], torch.arange(L)[None])[0]
        expected = torch.empty(2, L, L)
        for h in range(2):
            for i in range(L):
                for j in range(L):
                    r = index[i, j]
                    expected[h, i, j] = q[i, h] @ k[j, h] + q[i, h] @ pk[r, h] + k[j, h] @ pq[r, h]
        expected = (expected / (3 * D) ** 0.5).softmax(-1)
        v = attention.v_proj(x)[0].view(L, 2, D).transpose(0, 1)  # (H, L, D)
        y = attention.o_proj((expected @ v).transpose(0, 1).reshape(1, L, 16))
        torch.testing.assert_close(attention(x, pos=table), y, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    "attention",
    [
        {"type": "disentangled", "num_heads": 4},
        {"type": "disentangled", "num_heads": 4, "share_att_key": False},
        {"type": "disentangled", "num_heads": 2, "head_dim": 6, "pos_att_type": ["c2p"], "share_att_key": False},
        {"type": "disentangled", "num_heads": 4, "pos_att_type": ["p2c"], "bias": False, "share_att_key": False},
        {"type": "disentangled", "num_heads": 4, "relative": {"type": "deberta_relative", "norm": False}},
    ],
)
def test_the_declared_parameters_are_the_modules(attention):
    recipe = zoo.load_recipe({**ENCODER, "attention": attention})
    model = zoo.build(recipe, device="meta")
    built = model.blocks[0].attention
    assert recipe.attention.cost(recipe.context()).params == sum(p.numel() for p in built.parameters())
    table = recipe.positional.cost(recipe.context()).params
    assert table == sum(p.numel() for p in model.positional.parameters()) == 2 * 4 * 32 + 2 * 32


def test_absolute_positions_add_a_row_per_position_and_bound_the_length():
    recipe = zoo.load_recipe(ENCODER, positional={"absolute": True})
    model = zoo.build(recipe, device="meta")
    assert recipe.positional.bounded_by_max_len and not zoo.load_recipe(ENCODER).positional.bounded_by_max_len
    assert recipe.positional.cost(recipe.context()).params == (8 + 24 + 2) * 32
    assert sum(p.numel() for p in model.positional.parameters()) == (8 + 24 + 2) * 32


def test_padding_right_leaves_the_real_positions_as_they_were():
    torch.manual_seed(0)
    model = zoo.build(ENCODER).eval()
    ids = torch.randint(1, 61, (1, 9))
    padded = torch.cat([ids, torch.zeros(1, 5, dtype=torch.long)], dim=1)
    mask = torch.ones(1, 14, dtype=torch.long)
    mask[:, 9:] = 0
    with torch.no_grad():
        a, b = model(ids).logits, model(padded, attention_mask=mask).logits[:, :9]
    torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"positional": "learned"},
            "pos_att_type ['c2p', 'p2c'] reads DeBERTa's relative table: set the stack's positional: "
            "{type: deberta_relative}",
        ),
        (
            {"architecture": "decoder", "head": "lm"},
            "disentangled attention is DeBERTa's bidirectional self-attention: it needs an encoder stack",
        ),
        ({"attention.pos_att_type": ["c2p", "c2p"]}, "pos_att_type ['c2p', 'c2p'] names a term twice"),
        (
            {"positional.position_buckets": 30},
            "max_relative_positions (12) must exceed position_buckets // 2 + 1 (16)",
        ),
        ({"positional.position_buckets": 1}, "position_buckets must be 0 (none) or >= 2, got 1"),
        (
            {"attention.relative": {"type": "deberta_relative", "absolute": True}},
            "relative: a layer's own table adds no absolute positions; set absolute: false",
        ),
        (
            {"attention.relative": {"type": "t5_relative"}},
            "relative: positional 't5_relative' is not a relative table; give deberta_relative",
        ),
        (
            {"attention.num_heads": 5},
            "d_model (32) must be divisible by num_heads (5), or set head_dim",
        ),
    ],
)
def test_what_cannot_work_is_refused_with_the_reason(changes, message):
    with pytest.raises(RecipeError) as caught:
        zoo.load_recipe(ENCODER, **changes)
    assert message in str(caught.value)


def test_a_plain_attention_reads_no_table_and_the_layers_share_one():
    model = zoo.build(ENCODER, device="meta")
    tables = [n for n, _ in model.named_parameters() if "rel_embeddings" in n]
    assert tables == ["positional.rel_embeddings.weight"]
    label = zoo.load_recipe(ENCODER).attention.label("attention", zoo.load_recipe(ENCODER).context(), None)
    assert "c2c + c2p + p2c" in " ".join(label.lines)
