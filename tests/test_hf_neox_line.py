"""zoo.hf without transformers, for gpt_neox, gptj, falcon, phi, stablelm and phi3: what their configs refuse by
name, transformers' rotary rounding, the head-count-dependent fused qkv layouts, and ``hf_family``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import zoo
from zoo.errors import HFExportError, HFImportError
from zoo.hf import family_of, from_hf, hf_recipe, to_hf
from zoo.hf._common import grouped_qkv, stacked_qkv
from zoo.hf.io import CONFIG_FILE
from zoo.hf.rope import exact_fraction, hf_rotary_dims


def hf_folder(tmp_path: Path, config: dict) -> Path:
    folder = tmp_path / "hf"
    folder.mkdir(parents=True)
    (folder / CONFIG_FILE).write_text(json.dumps(config))
    return folder


UNSUPPORTED = [
    ({"model_type": "falcon", "alibi": True}, "alibi=True is not supported: Falcon's ALiBi rounds its slopes"),
    (
        {"model_type": "falcon", "new_decoder_architecture": True, "parallel_attn": False},
        "new_decoder_architecture=True with parallel_attn=False is not supported",
    ),
    (
        {"model_type": "falcon", "num_ln_in_parallel_attn": 2},
        "num_ln_in_parallel_attn=2 without new_decoder_architecture is not supported",
    ),
    ({"model_type": "stablelm", "qk_layernorm": True}, "qk_layernorm=True is not supported: StableLM normalises"),
    (
        {"model_type": "phi3", "rope_scaling": {"type": "linear", "factor": 2.0}},
        "rope_scaling=.*linear.* is not supported: Phi3Config takes an unscaled rope or LongRoPE",
    ),
    ({"model_type": "phi3", "rope_parameters": {"rope_type": "llama3"}}, "rope_parameters.rope_type='llama3'"),
    ({"model_type": "gpt_neox", "rope_scaling": {"type": "proportional"}}, "rope_scaling=.*proportional"),
    ({"model_type": "gptj", "tie_word_embeddings": True}, "tie_word_embeddings=True is not supported: GPT-J's"),
    ({"model_type": "gptj", "rotary_dim": None}, "rotary_dim=None with n_head=16 is not supported"),
    ({"model_type": "phi", "tie_word_embeddings": True}, "tie_word_embeddings=True is not supported: Phi's LM head"),
    (
        {"model_type": "phi", "qk_layernorm": True, "head_dim": 32},  # hidden_size 2048 / 32 heads = 64
        "qk_layernorm with head_dim=32 is not supported",
    ),
    (  # 32 * 0.3 = 9.6: transformers rotates 9 dims, an odd number
        {"model_type": "gpt_neox", "hidden_size": 128, "num_attention_heads": 4, "rotary_pct": 0.3},
        "rope rotates 9 of 32 head dims; zoo .* need an even number",
    ),
]


@pytest.mark.parametrize(("config", "message"), UNSUPPORTED, ids=[m[:40] for _, m in UNSUPPORTED])
def test_unsupported_config_is_refused_by_name(tmp_path, config, message):
    with pytest.raises(HFImportError, match=message):
        hf_recipe(hf_folder(tmp_path, config))


def test_config_keys_of_both_transformers_versions_are_read(tmp_path):
    """4.x top-level keys (rotary_pct, rotary_emb_base) and 5.x rope_parameters give the same rope."""
    old = hf_recipe(hf_folder(tmp_path / "4", {"model_type": "gpt_neox", "rotary_pct": 0.5, "rotary_emb_base": 500}))
    new = {"rope_parameters": {"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.5}}
    new = hf_recipe(hf_folder(tmp_path / "5", {"model_type": "gpt_neox", **new}))
    assert old["positional"] == new["positional"] == {"type": "rope", "theta": 500.0, "rotary_fraction": 0.5}


def test_falcon_layouts_become_blocks_and_key_value_heads(tmp_path):
    def recipe(**config):
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        return hf_recipe(hf_folder(folder, {"model_type": "falcon", **config}))

    seven_b = recipe()
    assert seven_b["block"] == {"norm_position": "pre", "parallel": True, "shared_norm": True}
    assert seven_b["attention"]["type"] == "mqa"
    forty_b = recipe(new_decoder_architecture=True, num_attention_heads=128, num_kv_heads=8, hidden_size=8192)
    assert forty_b["block"] == {"norm_position": "pre", "parallel": True, "shared_norm": False}
    assert forty_b["attention"] | {"bias": False} == {"type": "gqa", "num_heads": 128, "num_kv_heads": 8, "bias": False}
    sequential = recipe(parallel_attn=False, multi_query=False)
    assert sequential["block"] == {"norm_position": "pre"} and sequential["attention"]["type"] == "mha"


@pytest.mark.parametrize(("head_dim", "rotated"), [(32, 28), (44, 30), (80, 32), (64, 16), (96, 72)])
def test_the_rotary_fraction_rotates_the_same_dims_in_zoo_and_transformers(head_dim, rotated):
    fraction = exact_fraction(rotated, head_dim)
    assert hf_rotary_dims(head_dim, fraction) == round(head_dim * fraction) == rotated


def test_a_rotary_fraction_transformers_would_truncate_is_refused_on_export():
    recipe = zoo.load_recipe("pythia-160m", positional={"type": "rope", "rotary_fraction": 30 / 44}, d_model=44 * 12)
    with pytest.raises(HFExportError, match=r"rotates 30 of 44 head dims in zoo but 29 in transformers"):
        family_of(recipe.model_copy(update={"hf_family": "gpt_neox"}))


class _Recipe:
    """Just the head counts a fused-qkv transform reads."""

    def __init__(self, heads: int, kv_heads: int, head_dim: int) -> None:
        self.d_model = heads * head_dim

        class Attention:
            num_heads, num_kv_heads = heads, kv_heads

            def head_dim_for(self, d_model: int) -> int:
                return head_dim

        self.attention = Attention()


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (4, 1), (6, 2)])
def test_fused_qkv_layouts_split_and_fuse_back_exactly(heads, kv_heads):
    head_dim = 3
    rows = (heads + 2 * kv_heads) * head_dim
    fused = [torch.arange(rows * 5.0).view(rows, 5), torch.arange(float(rows))]  # a weight and a bias
    for layout in (grouped_qkv, stacked_qkv):
        transform = layout(_Recipe(heads, kv_heads, head_dim))
        for tensor in fused:
            q, k, v = transform.to_zoo([tensor])
            assert q.shape[0] == heads * head_dim and k.shape[0] == v.shape[0] == kv_heads * head_dim
            assert torch.equal(transform.to_hf([q, k, v])[0], tensor)
    # GPT-NeoX's per-head layout (kv_heads = heads): head 1's query rows follow head 0's value rows.
    if kv_heads == heads:
        q, k, v = grouped_qkv(_Recipe(heads, kv_heads, head_dim)).to_zoo([fused[1]])
        assert q[:6].tolist() == [0, 1, 2, 9, 10, 11] and k[:3].tolist() == [3, 4, 5] and v[:3].tolist() == [6, 7, 8]


def test_hf_family_chooses_between_families_of_one_network(tmp_path):
    """Phi-3-mini's network (a sliding window, whole-head RoPE) is Mistral's: its recipe names phi3."""
    recipe = zoo.load_recipe("phi-3-mini-4k")
    assert family_of(recipe).name == "phi3"
    assert family_of(recipe.model_copy(update={"hf_family": None})).name == "mistral"
    with pytest.raises(HFExportError, match="names hf_family 'llama' but does not fit it: attention.window"):
        family_of(recipe.model_copy(update={"hf_family": "llama"}))
    with pytest.raises(HFExportError, match="hf_family 'phi-3' is not one of"):
        family_of(recipe.model_copy(update={"hf_family": "phi-3"}))


def test_a_phi3_export_fuses_qkv_and_gate_up_and_imports_back(tmp_path):
    torch.manual_seed(0)
    model = zoo.build(
        {
            "name": "phi3-tiny",
            "hf_family": "phi3",
            "architecture": "decoder",
            "vocab_size": 64,
            "d_model": 32,
            "num_layers": 2,
            "max_len": 32,
            "attention": {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "bias": False, "window": 3},
            "positional": {"type": "rope"},
            "norm": {"type": "rmsnorm", "eps": 1e-5},
            "ffn": {"type": "swiglu", "hidden": 48},
            "head": {"type": "lm", "tie_embeddings": False},
        }
    ).eval()
    to_hf(model, tmp_path)
    config = json.loads((tmp_path / CONFIG_FILE).read_text())
    assert config["architectures"] == ["Phi3ForCausalLM"] and config["sliding_window"] == 3
    back = from_hf(tmp_path)
    assert back.recipe.hf_family == "phi3"
    for (name, a), b in zip(model.state_dict().items(), back.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
