"""A token table narrower than the model (OPT-350m's word_embed_proj_dim): ``embedding.proj_dim`` projects it
up to d_model, ``head.proj_dim`` projects hidden states back down before the (tied) output matrix."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.components.embedding import TokenEmbedding, TokenEmbeddingConfig
from zoo.components.heads import LMHead, LMHeadConfig
from zoo.config import BuildContext


def test_embedding_projects_a_narrow_table_up_to_d_model():
    torch.manual_seed(0)
    emb = TokenEmbedding(32, vocab_size=50, proj_dim=8)
    assert emb.weight.shape == (50, 8) and emb.project_in.weight.shape == (32, 8)
    assert emb.project_in.bias is None
    ids = torch.randint(0, 50, (2, 5))
    torch.testing.assert_close(emb(ids), emb.token(ids) @ emb.project_in.weight.T, rtol=0, atol=0)
    assert TokenEmbedding(32, vocab_size=50).project_in is None


def test_head_projects_down_before_the_output_matrix():
    torch.manual_seed(0)
    head = LMHead(32, vocab_size=50, proj_dim=8, tie_embeddings=False)
    assert head.project_out.weight.shape == (8, 32) and head.proj.weight.shape == (50, 8)
    h = torch.randn(2, 5, 32)
    torch.testing.assert_close(head(h), h @ head.project_out.weight.T @ head.proj.weight.T, rtol=0, atol=0)


def test_a_tied_head_follows_the_token_table_width():
    model = zoo.build("gpt-tiny", embedding={"type": "token", "proj_dim": 16})
    assert model.recipe.head.proj_dim == 16  # filled in: a tied head multiplies by the 256 x 16 table
    assert model.head.proj.weight is model.embedding.token.weight
    assert model(torch.randint(0, 256, (2, 7))).logits.shape == (2, 7, 256)
    base = zoo.count_parameters(zoo.build("gpt-tiny"))
    assert zoo.count_parameters(model) == base - 256 * 64 + 256 * 16 + 2 * 16 * 64  # table, project_in, project_out


def test_a_tied_head_of_another_width_is_refused():
    with pytest.raises(zoo.RecipeError, match="a tied head's output matrix is the token table, 16 wide"):
        zoo.load_recipe("gpt-tiny", embedding={"type": "token", "proj_dim": 16}, head={"type": "lm", "proj_dim": 8})
    with pytest.raises(zoo.RecipeError, match="the token table, 64 wide"):
        zoo.load_recipe("gpt-tiny", head={"type": "lm", "proj_dim": 8})
    untied = zoo.load_recipe("gpt-tiny", head={"type": "lm", "proj_dim": 8, "tie_embeddings": False})
    assert untied.head.proj_dim == 8 and untied.embedding.proj_dim is None


def test_costs_count_the_projections():
    ctx = BuildContext(d_model=32, vocab_size=50)
    assert TokenEmbeddingConfig(proj_dim=8).cost(ctx).params == 50 * 8 + 8 * 32
    assert TokenEmbeddingConfig(proj_dim=8).cost(ctx).matmul == 8 * 32
    tied = LMHeadConfig(proj_dim=8).cost(ctx)
    assert tied.params == 32 * 8 and tied.matmul == 32 * 8 + 50 * 8
    assert LMHeadConfig(proj_dim=8, tie_embeddings=False).cost(ctx).params == 32 * 8 + 50 * 8
