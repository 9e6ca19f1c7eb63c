"""Constant multipliers at both ends of the stack (Granite): the token embedding's ``multiplier`` and the LM
head's ``logit_divisor``; each is its formula, and at its default changes nothing, bit for bit."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.components.embedding import TokenEmbedding
from zoo.components.heads.lm import LMHead


def test_embedding_multiplier_multiplies_after_the_sqrt_d_model_scale():
    torch.manual_seed(0)
    plain = TokenEmbedding(16, vocab_size=32, scale=True)
    scaled = TokenEmbedding(16, vocab_size=32, scale=True, multiplier=12.0)
    scaled.load_state_dict(plain.state_dict())
    ids = torch.randint(0, 32, (2, 5))
    assert torch.equal(scaled(ids), plain(ids) * 12.0)


def test_logit_divisor_divides_before_the_softcap():
    torch.manual_seed(0)
    plain = LMHead(16, vocab_size=32, tie_embeddings=False)
    divided = LMHead(16, vocab_size=32, tie_embeddings=False, logit_divisor=8.0, softcap=3.0)
    divided.load_state_dict(plain.state_dict())
    h = torch.randn(2, 5, 16)
    assert torch.equal(divided(h), torch.tanh(plain(h) / 8.0 / 3.0) * 3.0)


def test_defaults_change_no_logit_bit_for_bit():
    torch.manual_seed(0)
    plain = zoo.build("llama-tiny").eval()
    ones = zoo.build(
        "llama-tiny", **{"embedding.type": "token", "embedding.multiplier": 1.0, "head.logit_divisor": 1.0}
    ).eval()
    ones.load_state_dict(plain.state_dict())
    ids = torch.randint(0, 256, (2, 7))
    assert torch.equal(plain(ids).logits, ones(ids).logits)


@pytest.mark.parametrize("field", ["embedding.multiplier", "head.logit_divisor"])
def test_a_multiplier_must_be_positive(field):
    with pytest.raises(zoo.RecipeError, match=field.split(".")[1]):
        zoo.load_recipe("llama-tiny", **{"embedding.type": "token", field: 0.0})


def test_a_family_without_them_refuses_to_export_them():
    recipe = zoo.load_recipe(
        "llama-tiny", **{"embedding.type": "token", "embedding.multiplier": 12.0, "head.logit_divisor": 8.0}
    )
    from zoo.hf import FAMILIES

    problems = FAMILIES["llama"].misfits(recipe)
    assert "embedding.multiplier is 12.0, needs 1.0" in problems
    assert "head.logit_divisor is 8.0, needs 1.0" in problems
