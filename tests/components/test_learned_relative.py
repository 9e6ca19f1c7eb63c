"""``learned_relative``: learned absolute positions plus T5's relative bias in one positional module (MPNet):
equal to ``learned`` and ``t5_relative`` applied separately, over positions or over token indices, its exact
parameter count, its initialisation, and its checks."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.components import positional as P
from zoo.config import BuildContext


def pair(module: P.LearnedRelativeEncoding, **learned) -> tuple[P.LearnedEncoding, P.T5RelativeBias]:
    """A learned table and a T5 bias holding ``module``'s own weights."""
    table = module.absolute.embedding.weight
    absolute = P.LearnedEncoding(table.shape[1], max_len=table.shape[0] - learned.get("offset", 0), **learned)
    relative_table = module.relative.relative_attention_bias.weight
    relative = P.T5RelativeBias(
        table.shape[1],
        num_heads=relative_table.shape[1],
        num_buckets=module.relative.num_buckets,
        max_distance=module.relative.max_distance,
    )
    with torch.no_grad():
        absolute.embedding.weight.copy_(table)
        relative.relative_attention_bias.weight.copy_(relative_table)
    return absolute, relative


def test_it_equals_learned_and_t5_relative_applied_separately():
    torch.manual_seed(0)
    module = P.LearnedRelativeEncoding(16, num_heads=4, max_len=40, offset=2, num_buckets=8, max_distance=20)
    absolute, relative = pair(module, offset=2)
    x, positions = torch.randn(2, 30, 16), torch.tensor([list(range(30)), list(range(5, 35))])
    torch.testing.assert_close(module.embed(x, positions), absolute.embed(x, positions), rtol=0, atol=0)
    bias = module.score_bias(positions, positions)
    assert bias.shape == (2, 4, 30, 30)
    torch.testing.assert_close(bias, relative.score_bias(positions, positions), rtol=0, atol=0)
    assert module.positions_from_ids(torch.ones(1, 3, dtype=torch.long)) is None


def test_by_index_the_bias_counts_every_token_and_the_table_skips_padding():
    torch.manual_seed(0)
    module = P.LearnedRelativeEncoding(16, num_heads=2, max_len=20, offset=2, padding_idx=1, relative_to="index")
    absolute, relative = pair(module, offset=2, padding_idx=1)
    ids = torch.tensor([[5, 1, 7, 8, 1, 1], [1, 1, 9, 4, 4, 2]])
    positions = module.positions_from_ids(ids)
    assert positions.tolist() == [[0, -1, 1, 2, -1, -1], [-1, -1, 0, 1, 2, 3]]
    assert torch.equal(positions, absolute.positions_from_ids(ids))
    x = torch.randn(2, 6, 16)
    torch.testing.assert_close(module.embed(x, positions), absolute.embed(x, positions), rtol=0, atol=0)
    index = P.positions_for(6)
    torch.testing.assert_close(module.score_bias(positions, positions), relative.score_bias(index, index))
    assert not torch.equal(module.score_bias(positions, positions)[0], relative.score_bias(positions, positions)[0])


def test_its_buckets_are_transformers_mpnet_buckets():
    mpnet = pytest.importorskip("transformers.models.mpnet.modeling_mpnet")
    relative = torch.arange(-400, 400)[None, :] - torch.arange(0, 3)[:, None]
    expected = mpnet.MPNetEncoder.relative_position_bucket(relative)
    assert torch.equal(P.relative_position_bucket(relative, bidirectional=True), expected)


def test_exact_parameter_count_and_declared_cost():
    config = P.LearnedRelativeConfig(offset=2, padding_idx=1, relative_to="index")
    ctx = BuildContext(d_model=768, num_heads=12, max_len=512)
    assert config.cost(ctx).params == 514 * 768 + 32 * 12 == 395_136
    module = P.LearnedRelativeEncoding(768, num_heads=12, max_len=512, offset=2, padding_idx=1, device="meta")
    assert sum(p.numel() for p in module.parameters()) == 395_136
    model = zoo.build("mpnet-base", device="meta")
    assert sum(p.numel() for p in model.positional.parameters()) == 395_136


def test_reset_parameters_draws_both_tables_again():
    module = P.LearnedRelativeEncoding(64, num_heads=4, max_len=500, init_std=0.02)
    with torch.no_grad():
        for p in module.parameters():
            p.fill_(3.0)
    module.reset_parameters()
    assert module.absolute.embedding.weight.std().item() == pytest.approx(0.02, rel=0.1)
    assert module.relative.relative_attention_bias.weight.std().item() == pytest.approx(64**-0.5, rel=0.3)


@pytest.mark.parametrize(
    ("options", "causal", "message"),
    [
        (
            {"relative_to": "index"},
            True,
            "relative_to 'index' counts a whole sequence's tokens: an encoder's (architecture: encoder)",
        ),
        ({"padding_idx": 1}, False, "padding_idx: padding reads row offset - 1, so offset must be >= 1 (RoBERTa: 2)"),
        ({"num_buckets": 2}, False, "t5_relative needs num_buckets >= 4 (causal False), got 2"),
    ],
)
def test_checks_name_what_is_wrong(options, causal, message):
    config = P.LearnedRelativeConfig(**options)
    assert message in config.check(BuildContext(d_model=16, num_heads=2, max_len=32, causal=causal))


def test_a_causal_index_bias_is_refused_on_build():
    with pytest.raises(ValueError, match="relative_to='index' counts a whole sequence's tokens"):
        P.LearnedRelativeEncoding(16, num_heads=2, max_len=8, relative_to="index", causal=True)


def test_an_attention_that_applies_no_score_bias_is_refused():
    message = "attention 'retention' cannot take positional 'learned_relative', which adds a score bias"
    with pytest.raises(zoo.RecipeError, match=message):
        zoo.load_recipe("mpnet-tiny", attention={"type": "retention", "num_heads": 4})


def test_tensor_parallelism_keeps_the_table_whole_and_splits_the_bias_by_heads():
    from fake_ranks import fake_ranks

    from zoo.train.tensor import parallelize, uncovered

    model = zoo.build("mpnet-tiny", **{"embedding.padding_idx": None})  # a zero row of its own has no plan
    assert uncovered(model) == []
    with fake_ranks(2) as mesh:
        parallelize(model, mesh)
        assert model.positional.relative.relative_attention_bias.weight.to_local().shape == (32, 2)  # 4 heads / 2
        assert not hasattr(model.positional.absolute.embedding.weight, "to_local")
