"""The ``embedding`` head: sentence vectors pooled from the final hidden states (mean over the real tokens, [CLS],
the last real token), unit length with ``normalize``; equal however a batch is padded; no loss; ``zoo predict
--embed`` of a model with it pools as it says."""

from __future__ import annotations

import pytest
import torch
from run_files import write_run

import zoo
from zoo.analysis.params import analytic_parameters
from zoo.components.heads import EmbeddingHead, pool
from zoo.errors import TrainError
from zoo.predict import embed
from zoo.train.objectives import objective_name
from zoo.train.tokenizer import ByteTokenizer


def test_pooling_reads_only_the_real_tokens_on_either_side():
    h = torch.arange(2 * 4 * 3, dtype=torch.float).reshape(2, 4, 3)
    right = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    left = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(pool(h, right, "last"), torch.stack([h[0, 1], h[1, 3]]))
    assert torch.equal(pool(h, left, "last"), torch.stack([h[0, 3], h[1, 3]]))
    assert torch.equal(pool(h, None, "last"), h[:, -1])
    assert torch.equal(pool(h, right, "mean"), torch.stack([h[0, :2].mean(0), h[1].mean(0)]))
    assert torch.equal(pool(h, left, "cls"), h[:, 0])


def test_normalized_vectors_have_unit_length_and_keep_their_direction():
    h = torch.randn(3, 5, 8)
    plain, unit = EmbeddingHead(8, pool="mean")(h), EmbeddingHead(8, pool="mean", normalize=True)(h)
    torch.testing.assert_close(unit.norm(dim=-1), torch.ones(3))
    torch.testing.assert_close(unit * plain.norm(dim=-1, keepdim=True), plain)


@pytest.mark.parametrize(("recipe", "how"), [("bert-tiny", "mean"), ("bert-tiny", "cls"), ("llama-tiny", "last")])
def test_a_padded_batch_gives_each_text_its_vector_alone(recipe, how):
    torch.manual_seed(0)
    model = zoo.build(zoo.load_recipe(recipe, head={"type": "embedding", "pool": how, "normalize": True})).eval()
    ids = torch.randint(3, 200, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[0, 4:] = 0  # the first text is 4 tokens, padded on the right
    with torch.no_grad():
        batch = model(ids, attention_mask=mask).logits
        alone = model(ids[:1, :4]).logits
    assert batch.shape == (2, model.recipe.d_model)
    torch.testing.assert_close(batch[0], alone[0], rtol=0, atol=1e-5)


def test_it_has_no_loss_and_nothing_to_train_on():
    with pytest.raises(ValueError, match="the embedding head gives sentence vectors, not predictions: it has no loss"):
        EmbeddingHead.loss(torch.zeros(2, 4), torch.zeros(2, dtype=torch.long))
    recipe = zoo.load_recipe("bert-tiny", head={"type": "embedding"})
    with pytest.raises(TrainError, match="an encoder with a 'embedding' head has nothing to train on"):
        objective_name(recipe)


def test_it_adds_no_parameters_and_summary_counts_them_exactly():
    plain = zoo.load_recipe("bert-tiny", head={"type": "pooler"})
    embedding = zoo.load_recipe("bert-tiny", head={"type": "embedding", "pool": "cls"})
    d, built = plain.d_model, zoo.build(embedding)
    assert analytic_parameters(embedding).total == analytic_parameters(plain).total - (d * d + d)  # the pooler's
    assert analytic_parameters(embedding).by_kind["head"] == 0
    assert (
        analytic_parameters(embedding).total
        == zoo.count_parameters(built)
        == sum(p.numel() for p in built.parameters())
    )


def test_predict_embed_pools_as_the_models_head_says(tmp_path):
    torch.manual_seed(0)
    model = zoo.build(zoo.load_recipe("bert-tiny", head={"type": "embedding", "pool": "cls", "normalize": True}))
    write_run(tmp_path / "run", model, ByteTokenizer(), objective="masked_lm", labels=None)
    result = embed(tmp_path / "run", ["abc"])
    assert (result.pooling, result.normalized) == ("cls", True)
    ids = torch.tensor([[ByteTokenizer.cls_id, *ByteTokenizer().encode("abc")]])
    with torch.no_grad():
        expected = model.eval()(ids).logits[0]
    torch.testing.assert_close(torch.tensor(result.vectors[0]), expected, rtol=0, atol=1e-6)
    assert embed(tmp_path / "run", ["abc"], pooling="mean", normalize=False).pooling == "mean"  # flags still choose
