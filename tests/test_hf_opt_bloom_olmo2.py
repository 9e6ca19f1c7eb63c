"""OPT, BLOOM and OLMo 2 beyond the parity cases: BLOOM's ALiBi (slopes for any head count, positions counted
over the attention mask) is zoo's, and what zoo cannot reproduce is refused by name. (The published configs
import as the named recipes: tests/test_hf_published.py.)"""

from __future__ import annotations

import json

import pytest
import torch
from hf_cases import bloom

import zoo
from zoo.components.positional import alibi_slopes
from zoo.errors import HFImportError
from zoo.hf import family_of, hf_recipe

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()


def recipe_of(tmp_path, config: dict):
    (tmp_path / "config.json").write_text(json.dumps(config))
    return zoo.load_recipe(hf_recipe(tmp_path))


@pytest.mark.parametrize("heads", range(1, 65))
def test_alibi_slopes_are_blooms_for_every_head_count(heads):
    from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

    expected = _get_alibi_slopes(heads, torch.device("cpu")).double()
    torch.testing.assert_close(torch.tensor(alibi_slopes(heads), dtype=torch.float64), expected, rtol=1e-6, atol=0)


@torch.no_grad()
def test_bloom_padded_rows_need_no_positions(tmp_path):
    """BLOOM counts key positions over the attention mask; zoo's bias depends on distances only, so a left- or
    right-padded row gives the same logits at its real tokens with zoo's default positions."""
    torch.manual_seed(0)
    config = transformers.BloomConfig(**bloom.CASES["bloom-6-heads-tied"]["config"])
    hf = transformers.BloomForCausalLM(config).eval()
    for p in hf.parameters():
        p.add_(0.02 * torch.randn_like(p))
    hf.save_pretrained(tmp_path)
    model = zoo.hf.from_hf(tmp_path).eval()
    ids = torch.randint(1, config.vocab_size, (3, 10), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, -4:] = 0  # right-padded
    mask[2, :5] = 0  # left-padded
    expected = hf(input_ids=ids, attention_mask=mask).logits
    actual = model(ids, attention_mask=mask).logits
    assert (expected - actual)[mask.bool()].abs().max() < 1e-5


@pytest.mark.parametrize(
    "config,refused",
    [
        ({"model_type": "bloom", "apply_residual_connection_post_layernorm": True}, "apply_residual_connection"),
        ({"model_type": "opt", "activation_function": "mish"}, "activation_function='mish'"),
        ({"model_type": "olmo2", "rope_scaling": {"rope_type": "proportional", "factor": 4.0}}, "rope_scaling="),
        ({"model_type": "olmo2", "hidden_act": "gelu_new"}, "hidden_act='gelu_new'"),
    ],
)
def test_what_zoo_cannot_reproduce_is_refused_by_name(config, refused, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(HFImportError, match=refused):
        hf_recipe(tmp_path)


def test_opt_and_gpt2_tell_their_learned_positions_apart():
    assert family_of(zoo.load_recipe("opt-125m")).name == "opt"
    assert family_of(zoo.load_recipe("gpt-tiny")).name == "gpt2"
    shifted = zoo.load_recipe("gpt-tiny", positional={"type": "learned", "offset": 2})  # GELU-tanh, no padding row
    assert family_of(shifted).name == "opt"
