"""Qwen2-MoE and DeepSeek-V3 without transformers: other on-disk layouts (fused experts, DeepSeek's
multi-token-prediction layer) import, and what zoo cannot build is refused by name. (The published configs
translate to the shipped recipes: tests/test_hf_published.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import hf_cases.deepseek_v3 as deepseek_cases
import hf_cases.qwen2_moe as qwen_cases
import pytest
import torch
from safetensors.torch import load_file, save_file

import zoo
from zoo.errors import HFExportError, HFImportError
from zoo.hf import family_of, from_hf, hf_recipe, to_hf
from zoo.hf.io import CONFIG_FILE, SAFETENSORS_FILE


def hf_folder(tmp_path: Path, config: dict) -> Path:
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / CONFIG_FILE).write_text(json.dumps(config))
    return folder


def randomised(recipe) -> torch.nn.Module:
    torch.manual_seed(0)
    model = zoo.build(recipe).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.normal_()
    return model


def rewrite(folder: Path, change) -> None:
    weights = change(load_file(folder / SAFETENSORS_FILE))
    save_file({n: t.contiguous() for n, t in weights.items()}, folder / SAFETENSORS_FILE, metadata={"format": "pt"})


def assert_same_weights(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for name in sa:
        assert torch.equal(sa[name], sb[name]), name


def test_deepseek_v3_fp8_checkpoint_is_refused_by_name(tmp_path):
    with pytest.raises(HFImportError, match=r"quantization_config=.* is not supported: the weights are quantised"):
        hf_recipe(hf_folder(tmp_path, deepseek_cases.PUBLISHED["deepseek-v3"][1]))


REFUSED = [
    ({"model_type": "qwen2_moe", "use_sliding_window": True}, "use_sliding_window=True is not supported"),
    (
        {"model_type": "qwen2_moe", "num_hidden_layers": 2, "mlp_only_layers": [0, 1]},
        "every one of the 2 layers is dense",
    ),
    ({"model_type": "qwen2_moe", "num_experts": 0}, "import it as model_type qwen2"),
    ({"model_type": "deepseek_v3", "num_key_value_heads": 16}, "num_key_value_heads=16 is not supported"),
    ({"model_type": "deepseek_v3", "scoring_func": "softmax"}, "scoring_func='softmax' is not supported"),
    ({"model_type": "deepseek_v3", "topk_method": "greedy"}, "topk_method='greedy' is not supported"),
    (
        {"model_type": "deepseek_v3", "rope_scaling": {"type": "proportional", "factor": 2.0}},
        "rope_scaling=.*proportional.* is not supported: zoo's rope computes the rope types default",
    ),
]


@pytest.mark.parametrize("config, message", REFUSED)
def test_what_zoo_cannot_build_is_refused_by_name(config, message, tmp_path):
    with pytest.raises(HFImportError, match=message):
        hf_recipe(hf_folder(tmp_path, config))


def test_deepseek_multi_token_prediction_layer_is_dropped(tmp_path):
    model = randomised(deepseek_cases.DEEPSEEK_TINY)
    to_hf(model, tmp_path)

    def add_mtp(weights):  # DeepSeek's layer after the last: its own norms and projection, and a whole layer
        mtp = "model.layers.3"
        extra = {f"{mtp}.{n}": torch.randn(4) for n in ("enorm.weight", "hnorm.weight", "shared_head.norm.weight")}
        extra[f"{mtp}.eh_proj.weight"] = torch.randn(4, 8)
        extra |= {n.replace("layers.2.", "layers.3."): t.clone() for n, t in weights.items() if ".layers.2." in n}
        return {**weights, **extra}

    rewrite(tmp_path, add_mtp)
    assert_same_weights(model, from_hf(tmp_path))


@pytest.mark.parametrize("cases", [qwen_cases, deepseek_cases])
def test_fused_expert_layout_imports(cases, tmp_path):
    """Transformers 5 holds the experts of a layer as (X, 2H, E) gate_up_proj and (X, E, H) down_proj."""
    recipe = next(iter(cases.ZOO_MODELS.values()))[0]
    model = randomised(recipe)
    to_hf(model, tmp_path)

    def fuse(weights):
        out = dict(weights)
        for i in range(model.recipe.num_layers):
            experts = f"model.layers.{i}.mlp.experts"
            if f"{experts}.0.up_proj.weight" not in out:
                continue  # a dense layer
            n = model.recipe.ffn.num_experts
            gate = torch.stack([out.pop(f"{experts}.{e}.gate_proj.weight") for e in range(n)])
            up = torch.stack([out.pop(f"{experts}.{e}.up_proj.weight") for e in range(n)])
            out[f"{experts}.gate_up_proj"] = torch.cat([gate, up], dim=1)
            out[f"{experts}.down_proj"] = torch.stack([out.pop(f"{experts}.{e}.down_proj.weight") for e in range(n)])
        return out

    rewrite(tmp_path, fuse)
    assert_same_weights(model, from_hf(tmp_path))


def test_routers_of_one_family_do_not_export_as_another():
    qwen = zoo.load_recipe(qwen_cases.QWEN2_MOE_TINY)
    deepseek = zoo.load_recipe(deepseek_cases.DEEPSEEK_TINY)
    assert family_of(qwen).name == "qwen2_moe" and family_of(deepseek).name == "deepseek_v3"
    mixtral = {"extends": "llama-tiny", "name": "m", "ffn": {"type": "moe", "num_experts": 4, "top_k": 2}}
    assert family_of(zoo.load_recipe(mixtral)).name == "mixtral"
    for changes, refused in (
        ({"ffn.normalize": False}, "mixtral: ffn.normalize is False, needs True"),
        ({"ffn.routed_scaling_factor": 2.0}, "ffn.routed_scaling_factor is 2.0, needs 1.0"),
    ):
        with pytest.raises(HFExportError, match=refused):
            family_of(zoo.load_recipe(mixtral, **changes))
    with pytest.raises(HFExportError, match=r"deepseek_v3: attention.scale is 0.5, needs the default"):
        family_of(zoo.load_recipe(deepseek_cases.DEEPSEEK_TINY, **{"attention.scale": 0.5}))
    later = {**deepseek_cases.DEEPSEEK_TINY, "layers": [{"select": [1], "ffn": {"type": "swiglu", "hidden": 96}}]}
    with pytest.raises(HFExportError, match=r"the dense layers are \[1\]; DeepSeek-V3 has them first"):
        family_of(zoo.load_recipe(later))
