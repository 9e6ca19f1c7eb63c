"""The Hugging Face family ``swin`` (``SwinForImageClassification``), joined to zoo's through ``register_hf_families``.

Checkpoints name the attention ``attention.self.query`` ... ``attention.output.dense`` and the MLP
``intermediate.dense`` / ``output.dense``; transformers 5 renames them in memory (``attention.q_proj``,
``mlp.fc1``, ``attention.relative_position_bias.relative_position_bias_table``), and a folder written with those
names imports too (``layout``). The relative position index is a buffer rebuilt from ``window_size``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from torch import nn

from zoo.errors import HFImportError
from zoo.hf.mapping import (
    ACTIVATIONS,
    HF_ACTIVATIONS,
    Family,
    Option,
    Rule,
    activation_option,
    dtype_name,
    num_labels,
    unsupported,
)

__all__ = ["SWIN", "from_swin_folder"]

BLOCK_HF, BLOCK = "swin.encoder.layers.{s}.blocks.{b}", "stages.{s}.blocks.{b}"

BLOCK_LINEARS = (
    ("layernorm_before", "attention_norm"),
    ("attention.self.query", "attention.q_proj"),
    ("attention.self.key", "attention.k_proj"),
    ("attention.self.value", "attention.v_proj"),
    ("attention.output.dense", "attention.o_proj"),
    ("layernorm_after", "ffn_norm"),
    ("intermediate.dense", "ffn.up_proj"),
    ("output.dense", "ffn.down_proj"),
)

RULES = (
    Rule("swin.embeddings.patch_embeddings.projection.weight", "embedding.proj.weight"),
    Rule("swin.embeddings.patch_embeddings.projection.bias", "embedding.proj.bias"),
    Rule("swin.embeddings.norm.weight", "embedding.norm.weight"),
    Rule("swin.embeddings.norm.bias", "embedding.norm.bias"),
    *(Rule(f"{BLOCK_HF}.{hf}.{k}", f"{BLOCK}.{zoo}.{k}") for hf, zoo in BLOCK_LINEARS for k in ("weight", "bias")),
    Rule(f"{BLOCK_HF}.attention.self.relative_position_bias_table", f"{BLOCK}.attention.relative_position_bias_table"),
    Rule("swin.encoder.layers.{s}.downsample.norm.weight", "stages.{s}.merge.norm.weight"),
    Rule("swin.encoder.layers.{s}.downsample.norm.bias", "stages.{s}.merge.norm.bias"),
    Rule("swin.encoder.layers.{s}.downsample.reduction.weight", "stages.{s}.merge.reduction.weight"),
    Rule("swin.layernorm.weight", "final_norm.weight"),
    Rule("swin.layernorm.bias", "final_norm.bias"),
    Rule("classifier.weight", "head.proj.weight"),
    Rule("classifier.bias", "head.proj.bias"),
)

IGNORED = ("swin.encoder.layers.{s}.blocks.{b}.attention.self.relative_position_index",)
"""A buffer older checkpoints store: zoo rebuilds it from window_size, as transformers does."""

RENAMED = (
    ("attention.relative_position_bias.relative_position_bias_table", "attention.self.relative_position_bias_table"),
    ("attention.q_proj.", "attention.self.query."),
    ("attention.k_proj.", "attention.self.key."),
    ("attention.v_proj.", "attention.self.value."),
    ("attention.o_proj.", "attention.output.dense."),
    ("mlp.fc1.", "intermediate.dense."),
    ("mlp.fc2.", "output.dense."),
)
"""transformers 5's in-memory names -> the checkpoint names of the table."""


def _layout(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for name, tensor in state.items():
        for new, old in RENAMED:
            name = name.replace(new, old)
        out[name] = tensor
    return out


DEFAULTS: dict[str, Any] = {
    "image_size": 224,
    "patch_size": 4,
    "num_channels": 3,
    "embed_dim": 96,
    "depths": [2, 2, 6, 2],
    "num_heads": [3, 6, 12, 24],
    "window_size": 7,
    "mlp_ratio": 4.0,
    "qkv_bias": True,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "hidden_act": "gelu",
    "use_absolute_embeddings": False,
    "layer_norm_eps": 1e-5,
}

OPTIONS = (
    activation_option("hidden_act", "Swin"),
    Option(
        "use_absolute_embeddings",
        lambda v: v is False,
        "zoo's swin adds no absolute position table to the patches (only the windows' relative bias)",
    ),
    Option(
        "mlp_ratio",
        lambda v: v == 4,
        "zoo's mlp is 4x its stage's width (or one fixed hidden width for all stages), so mlp_ratio is 4",
    ),
    Option("image_size", lambda v: isinstance(v, int), "zoo's swin takes square images (one integer image_size)"),
    Option("patch_size", lambda v: isinstance(v, int), "zoo's swin takes square patches (one integer patch_size)"),
)

BACKBONE = "the stages SwinBackbone returns, a class zoo does not import"
UNREAD = {
    "drop_path_rate": "stochastic depth: drops whole blocks in training only, so the network at inference is the same",
    "encoder_stride": "SwinForMaskedImageModeling's decoder, a class zoo does not import",
    "hidden_size": "derived by SwinConfig: embed_dim * 2 ** (stages - 1)",
    "num_layers": "derived by SwinConfig: the number of stages, len(depths)",
    "stage_names": BACKBONE,
    "out_features": BACKBONE,
    "out_indices": BACKBONE,
    "id2label": "the class names; their number is num_classes",
    "label2id": "the class names; their number is num_classes",
}


def _positive_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and len(value) > 0 and all(isinstance(v, int) and v > 0 for v in value)


OPTIONS += (
    Option("depths", _positive_list, "depths lists each stage's blocks, positive integers"),
    Option("num_heads", _positive_list, "num_heads lists each stage's heads, positive integers"),
)


def swin_recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    return {
        "architecture": "swin",
        "d_model": config["embed_dim"],
        "num_layers": sum(config["depths"]),
        "image_size": config["image_size"],
        "patch_size": config["patch_size"],
        "num_channels": config["num_channels"],
        "num_classes": num_labels(config),
        "dropout": config["hidden_dropout_prob"],
        "embedding": {"type": "swin_patch"},
        "positional": {"type": "none"},
        "attention": {
            "type": "swin_window",
            "window_size": config["window_size"],
            "depths": list(config["depths"]),
            "heads": list(config["num_heads"]),
            "qkv_bias": bool(config["qkv_bias"]),
            "dropout": config["attention_probs_dropout_prob"],
        },
        "norm": {"type": "layernorm", "eps": config["layer_norm_eps"]},
        "ffn": {"type": "mlp", "activation": ACTIVATIONS[config["hidden_act"]]},
        "head": {"type": "classification", "pool": "mean"},
    }


def swin_config(recipe: Any, weights: Any) -> dict[str, Any]:
    a = recipe.attention
    classes = recipe.num_classes
    return {
        "image_size": recipe.image_size,
        "patch_size": recipe.patch_size,
        "num_channels": recipe.num_channels,
        "embed_dim": recipe.d_model,
        "depths": list(a.depths),
        "num_heads": list(a.heads),
        "window_size": a.window_size,
        "mlp_ratio": 4.0,
        "qkv_bias": a.qkv_bias,
        "hidden_dropout_prob": recipe.dropout,
        "attention_probs_dropout_prob": a.dropout,
        "drop_path_rate": 0.0,
        "hidden_act": HF_ACTIVATIONS[recipe.ffn.activation],
        "use_absolute_embeddings": False,
        "layer_norm_eps": recipe.norm.eps,
        "id2label": {str(i): f"LABEL_{i}" for i in range(classes)},
        "label2id": {f"LABEL_{i}": i for i in range(classes)},
        "dtype": dtype_name(weights),
    }


SWIN = Family(
    name="swin",
    model_type="swin",
    classes=("SwinForImageClassification",),
    base_prefix="swin.",
    head_prefixes=("classifier.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements={
        "architecture": "swin",
        "embedding.type": "swin_patch",
        "embedding.norm_eps": 1e-5,
        "attention.type": "swin_window",
        "norm.type": "layernorm",
        "norm.bias": True,
        "norm.affine": True,
        "ffn.type": "mlp",
        "ffn.hidden": None,
        "ffn.bias": True,
        "ffn.dropout": 0.0,
        "ffn.activation": tuple(HF_ACTIVATIONS),
        "head.type": "classification",
        "head.pool": "mean",
        "head.pooler": False,
        "head.pool_norm": False,
        "head.distillation": False,
        "head.spare_pooler": False,
    },
    recipe=swin_recipe,
    config=swin_config,
    hf_class=lambda recipe: "SwinForImageClassification",
    layout=_layout,
    recipes=("swin-tiny",),
    unread=UNREAD,
)


def from_swin_folder(path: str | Path, *, dtype: torch.dtype | None = None) -> nn.Module:
    """A zoo model with the weights of the ``SwinForImageClassification`` folder ``path`` (config.json and
    model.safetensors), through this family's table: what ``zoo.hf.from_hf`` does, less its generic check of
    config values, which refuses Swin's per-stage ``num_heads`` list (it takes every ``num_heads`` for one
    integer); ``from_hf`` imports Swin once that check reads a list item by item.

    Raises:
        HFImportError: another model type or class, an option zoo cannot reproduce (named), weights that do not
            fit the model (named).
    """
    import zoo
    from zoo.hf import load_hf_weights

    folder = Path(path)
    config = json.loads((folder / "config.json").read_text())
    if config.get("model_type") != "swin":
        raise HFImportError(f"model_type {config.get('model_type')!r} is not swin", source=str(folder))
    hf_class = (config.get("architectures") or [SWIN.classes[0]])[0]
    if hf_class not in SWIN.classes:
        raise HFImportError(
            f"architectures=[{hf_class!r}] is not supported: zoo imports swin checkpoints of {', '.join(SWIN.classes)}",
            source=str(folder),
        )
    merged = {**DEFAULTS, **config}
    problems = unsupported(merged, OPTIONS)
    if problems:
        raise HFImportError(problems, source=str(folder))
    state = {SWIN.full_name(n): t for n, t in _layout(load_file(str(folder / "model.safetensors"))).items()}
    recipe = {"name": folder.resolve().name or "swin", **swin_recipe(merged, hf_class, frozenset(state))}
    if dtype is None:
        dtype = next((t.dtype for t in state.values() if t.is_floating_point()), None)
    model = zoo.build(recipe, dtype=dtype)
    load_hf_weights(model, SWIN, state, source=str(folder))
    return model
