"""The mixture-of-experts families added as tables (Llama 4, DeepSeek-V2, PhiMoE, DBRX, Granite-MoE) and
HunYuan: what each refuses by name on import (a config zoo cannot compute exactly never imports) and on export
(a recipe its config cannot state)."""

from __future__ import annotations

import json

import pytest

import zoo
from zoo.hf import FAMILIES, HFImportError, hf_recipe

LONGROPE = {"type": "longrope", "short_factor": [1.0] * 64, "long_factor": [2.0] * 64, "short_mscale": 1.2}
LONGROPE |= {"long_mscale": 1.2, "original_max_position_embeddings": 4096}
DBRX = {"model_type": "dbrx", "attn_config": {"clip_qkv": 8, "rope_theta": 500000}}
REFUSED = [
    ({"model_type": "llama4_text", "router_jitter_noise": 0.1}, "router_jitter_noise=0.1 is not supported"),
    (
        {"model_type": "llama4_text", "num_hidden_layers": 2, "layer_types": ["sliding_attention"] * 2},
        "Llama4TextModel makes masks for full_attention and chunked_attention layers only",
    ),
    ({"model_type": "llama4_text", "num_hidden_layers": 2, "moe_layers": []}, "moe_layers names no layer"),
    (
        {"model_type": "llama4_text", "num_hidden_layers": 2, "attention_chunk_size": None, "layer_types": None}
        | {"no_rope_layers": [1, 0], "moe_layers": [0, 1]},
        None,  # no chunks at all: every layer attends fully
    ),
    (
        {"model_type": "llama4_text", "num_hidden_layers": 3, "no_rope_layers": [1, 0]},
        "no_rope_layers and layer_types need an entry per layer",
    ),
    ({"model_type": "deepseek_v2", "norm_topk_prob": True}, "DeepseekV2TopkRouter never renormalises"),
    ({"model_type": "deepseek_v2", "topk_method": "noaux_tc"}, "topk_method='noaux_tc' is not supported"),
    (
        {"model_type": "deepseek_v2", "num_key_value_heads": 8, "num_experts_per_tok": 6},
        "multi-head latent attention needs it to be 32",
    ),
    ({"model_type": "deepseek_v2", "mlp_bias": True}, "mlp_bias=True is not supported"),
    (
        {"model_type": "deepseek_v2", "topk_method": "group_limited_greedy", "num_experts_per_tok": 6},
        "needs n_group and topk_group",
    ),
    ({"model_type": "deepseek_v2", "num_experts_per_tok": None}, "num_experts_per_tok=None is not supported"),
    ({"model_type": "phimoe", "num_experts_per_tok": 3}, "sparsemixer picks two experts whatever it says"),
    (
        {"model_type": "phimoe", "rope_scaling": {"type": "yarn", "factor": 2.0, "short_mscale": 1, "long_mscale": 1}},
        "PhimoeRotaryEmbedding scales cos and sin by short_mscale whatever the type",
    ),
    (
        {"model_type": "phimoe", "rope_scaling": LONGROPE | {"long_mscale": 1.5}},
        "short_mscale=1.2 and long_mscale=1.5: PhiMoE's attention factor would change",
    ),
    ({"model_type": "phimoe", "rope_scaling": LONGROPE}, None),
    (DBRX | {"attn_config": {"clip_qkv": 8, "rope_theta": 500000}}, "attn_config.rope_theta=500000 differs from"),
    (DBRX | {"attn_config": {"rope_theta": 10000}}, "attn_config.clip_qkv=None is not supported"),
    (DBRX | {"ffn_config": {"moe_normalize_expert_weights": 2.0}}, "renormalises the top-k weights to sum to one"),
    (DBRX | {"ffn_config": {"ffn_act_fn": {"name": "silu", "alpha": 2}}}, "ffn_act_fn's name only"),
    (DBRX | {"tie_word_embeddings": True}, "DbrxConfig refuses tied embeddings"),
    (DBRX | {"rope_parameters": {"rope_type": "default", "rope_theta": 500000}}, None),
    ({"model_type": "hunyuan_v1_dense", "use_cla": True}, "shares no keys and values across layers"),
    ({"model_type": "hunyuan_v1_dense", "use_qk_norm": False}, "normalises queries and keys whatever"),
    (
        {"model_type": "hunyuan_v1_dense", "rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0}},
        "a dynamic rope with an alpha needs head_dim",
    ),
]


@pytest.mark.parametrize(
    ("config", "message"), REFUSED, ids=[f"{c['model_type']}-{i}" for i, (c, _) in enumerate(REFUSED)]
)
def test_what_zoo_cannot_compute_is_refused_by_name(config, message, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(config))
    if message is None:
        hf_recipe(tmp_path)
        return
    with pytest.raises(HFImportError, match=message):
        hf_recipe(tmp_path)


LLAMA4 = "llama-4-scout-17b-16e"
MISFITS = [
    (LLAMA4, {"layers.1.select": [3, 7]}, "Llama 4's RoPE layers share one qk norm, its NoPE layers one"),
    (LLAMA4, {"layers.0.attention.temperature_floor_scale": 4, "layers.0.attention.temperature_scale": 0.1}, "NoPE"),
    (LLAMA4, {"layers.0.attention.qk_norm.affine": True}, "Llama 4's qk norm is a weightless rmsnorm"),
    (LLAMA4, {"layers.0.attention.softcap": 30.0}, "a Llama 4 layer differs only in its"),
    (LLAMA4, {"ffn.shared_expert.hidden": 4096}, "ffn.shared_expert must equal ffn.expert"),
    (LLAMA4, {"ffn.normalize": True}, "ffn.normalize is True, needs False"),
    ("deepseek-v2", {"ffn.group_scoring": "top2"}, "needs 'max' (V2's groups score by their best expert)"),
    ("deepseek-v2", {"ffn.normalize": True}, "ffn.normalize is True, needs False"),
    ("deepseek-v2", {"attention.scale": 0.1}, "attention.scale is 0.1"),
    ("deepseek-v2-lite", {"ffn.scoring": "sigmoid"}, "ffn.scoring is 'sigmoid', needs 'softmax'"),
    ("phi-3.5-moe", {"positional.scaling": "linear", "positional.scaling_factor": 2.0}, "PhiMoE's rope is unscaled"),
    ("phi-3.5-moe", {"norm": {"type": "rmsnorm", "eps": 1e-5}}, "norm.type is 'rmsnorm', needs 'layernorm'"),
    ("phi-3.5-moe", {"ffn.scoring": "softmax"}, "ffn.scoring is 'softmax', needs 'sparsemixer'"),
    ("dbrx-base", {"attention.clip_qkv": None}, "cannot run without one"),
    ("dbrx-base", {"ffn.shared_expert": {"type": "swiglu", "hidden": 64}}, "ffn.shared_expert is"),
    ("dbrx-base", {"norm.bias": True}, "norm.bias is True, needs False"),
    ("granite-3.0-1b-a400m", {"ffn.scoring": "sigmoid"}, "ffn.scoring is 'sigmoid', needs 'softmax'"),
    ("granite-3.0-1b-a400m", {"ffn.expert.bias": True}, "Mixtral's experts have no biases"),
    ("hunyuan-7b", {"attention.qk_norm_position": "before_rope"}, "rmsnorm of norm.eps after rope, per head"),
    ("hunyuan-7b", {"attention.qk_norm": None, "attention.qk_norm_position": "before_rope"}, "HunYuan"),
]


def changed(name: str, change: dict) -> object:
    """The named recipe with each dotted path of ``change`` set (list indices included: ``layers.1.attention``)."""
    data = zoo.load_recipe(name).model_dump(mode="json", exclude_none=True)
    for path, value in change.items():
        *parents, leaf = path.split(".")
        node = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        node[leaf] = value
    return zoo.load_recipe(data)


@pytest.mark.parametrize(("name", "change", "message"), MISFITS)
def test_what_a_config_cannot_state_is_refused_on_export(name, change, message):
    recipe = changed(name, change)
    family = FAMILIES[recipe.hf_family]
    assert any(message in problem for problem in family.misfits(recipe)), family.misfits(recipe)
