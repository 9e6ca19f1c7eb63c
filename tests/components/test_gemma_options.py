"""The options Gemma needs: RMSNorm's (offset + w) scale, sqrt(d_model) rounded to the dtype, capped logits."""

from __future__ import annotations

import math

import pytest
import torch

import zoo
from zoo.components.embedding import TokenEmbedding
from zoo.components.heads import LMHead
from zoo.components.norm import RMSNorm
from zoo.errors import RecipeError


def gemma_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """Hugging Face's GemmaRMSNorm, written out: float32 throughout, the cast last."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w.float())).type_as(x)


def test_offset_norm_starts_as_a_plain_rms_norm():
    norm = RMSNorm(8, offset=1.0)
    assert torch.equal(norm.weight, torch.zeros(8))  # (1 + 0): a fresh norm scales by one
    x = torch.randn(2, 3, 8)
    assert torch.allclose(norm(x), RMSNorm(8)(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_offset_norm_is_gemmas_bit_for_bit(dtype):
    torch.manual_seed(0)
    norm = RMSNorm(16, eps=1e-6, offset=1.0, dtype=dtype)
    with torch.no_grad():
        norm.weight.normal_()
    x = torch.randn(4, 5, 16).to(dtype)
    assert torch.equal(norm(x), gemma_rms_norm(x, norm.weight, 1e-6))


def test_offset_needs_a_learned_weight():
    with pytest.raises(RecipeError, match="offset"):
        zoo.build("llama-tiny", norm={"type": "rmsnorm", "affine": False, "offset": 1.0})


def test_offset_norms_survive_the_builders_init():
    model = zoo.build("llama-tiny", norm={"type": "rmsnorm", "offset": 1.0})
    assert torch.equal(model.final_norm.weight, torch.zeros_like(model.final_norm.weight))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rounded_scale_multiplies_by_sqrt_d_rounded_to_the_dtype(dtype):
    torch.manual_seed(0)
    embedding = TokenEmbedding(2048, vocab_size=64, scale=True, round_scale=True, dtype=dtype)
    ids = torch.arange(64)[None]
    expected = embedding.token.weight * torch.tensor(2048**0.5).to(dtype)  # Gemma's scaled embedding
    assert torch.equal(embedding(ids)[0], expected)


def test_rounding_the_scale_matters_in_bfloat16_only():
    torch.manual_seed(0)
    plain = TokenEmbedding(2048, vocab_size=64, scale=True, dtype=torch.bfloat16)
    rounded = TokenEmbedding(2048, vocab_size=64, scale=True, round_scale=True, dtype=torch.bfloat16)
    rounded.load_state_dict(plain.state_dict())
    ids = torch.arange(64)[None]
    assert not torch.equal(plain(ids), rounded(ids))  # 45.25 against 45.2548...
    assert torch.equal(plain.float()(ids), rounded.float()(ids))
    assert math.isclose(plain.scale, 2048**0.5)


def test_round_scale_needs_scale():
    with pytest.raises(RecipeError, match="round_scale"):
        zoo.build("llama-tiny", embedding={"type": "token", "round_scale": True})


def test_softcapped_logits_are_cap_times_tanh():
    torch.manual_seed(0)
    head = LMHead(8, vocab_size=32, tie_embeddings=False, softcap=3.0)
    h = 10 * torch.randn(2, 4, 8)
    logits = head(h)
    assert torch.allclose(logits, 3.0 * torch.tanh(head.proj(h) / 3.0))
    assert logits.abs().max() < 3.0


def test_softcap_is_off_by_default_and_must_be_positive():
    torch.manual_seed(0)
    head = LMHead(8, vocab_size=32, tie_embeddings=False)
    h = torch.randn(2, 4, 8)
    assert torch.equal(head(h), head.proj(h))
    with pytest.raises(RecipeError, match="softcap"):
        zoo.build("llama-tiny", **{"head.softcap": 0.0})


def test_a_capped_head_caps_the_models_logits():
    model = zoo.build("llama-tiny", **{"head.softcap": 5.0}).eval()
    ids = torch.randint(0, model.recipe.vocab_size, (1, 6))
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.abs().max() < 5.0


@pytest.mark.parametrize(
    "overrides,needs",
    [
        ({"norm.offset": 1.0}, "norm.offset is 1.0, needs 0.0"),
        ({"head.softcap": 30.0}, "head.softcap is 30.0, needs None"),
    ],
)
def test_families_without_the_option_refuse_to_export_it(overrides, needs):
    from zoo.errors import HFExportError
    from zoo.hf import family_of

    with pytest.raises(HFExportError, match=needs.replace(".", r"\.")):
        family_of(zoo.load_recipe("llama-tiny", **overrides))
