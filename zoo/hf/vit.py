"""ViT (``ViTForImageClassification``): patch embedding with a [CLS] token, pre-norm encoder, classifier.

HF keeps the position table as (1, 1 + patches, E); zoo's learned table is (1 + patches, E).
"""

from __future__ import annotations

from typing import Any

from .mapping import (
    ACTIVATIONS,
    CLASSIC_BLOCK,
    HF_ACTIVATIONS,
    UNSQUEEZE,
    Family,
    Option,
    Rule,
    activation_option,
    dtype_name,
    no_layer_overrides,
    num_labels,
)

LAYER = "vit.encoder.layer.{i}"

RULES = (
    Rule("vit.embeddings.cls_token", "embedding.cls_token"),
    Rule("vit.embeddings.position_embeddings", "positional.embedding.weight", UNSQUEEZE),
    Rule("vit.embeddings.patch_embeddings.projection.weight", "embedding.proj.weight"),
    Rule("vit.embeddings.patch_embeddings.projection.bias", "embedding.proj.bias"),
    Rule(f"{LAYER}.layernorm_before.weight", "blocks.{i}.attention_norm.weight"),
    Rule(f"{LAYER}.layernorm_before.bias", "blocks.{i}.attention_norm.bias"),
    Rule(f"{LAYER}.attention.attention.query.weight", "blocks.{i}.attention.q_proj.weight"),
    Rule(f"{LAYER}.attention.attention.query.bias", "blocks.{i}.attention.q_proj.bias"),
    Rule(f"{LAYER}.attention.attention.key.weight", "blocks.{i}.attention.k_proj.weight"),
    Rule(f"{LAYER}.attention.attention.key.bias", "blocks.{i}.attention.k_proj.bias"),
    Rule(f"{LAYER}.attention.attention.value.weight", "blocks.{i}.attention.v_proj.weight"),
    Rule(f"{LAYER}.attention.attention.value.bias", "blocks.{i}.attention.v_proj.bias"),
    Rule(f"{LAYER}.attention.output.dense.weight", "blocks.{i}.attention.o_proj.weight"),
    Rule(f"{LAYER}.attention.output.dense.bias", "blocks.{i}.attention.o_proj.bias"),
    Rule(f"{LAYER}.layernorm_after.weight", "blocks.{i}.ffn_norm.weight"),
    Rule(f"{LAYER}.layernorm_after.bias", "blocks.{i}.ffn_norm.bias"),
    Rule(f"{LAYER}.intermediate.dense.weight", "blocks.{i}.ffn.up_proj.weight"),
    Rule(f"{LAYER}.intermediate.dense.bias", "blocks.{i}.ffn.up_proj.bias"),
    Rule(f"{LAYER}.output.dense.weight", "blocks.{i}.ffn.down_proj.weight"),
    Rule(f"{LAYER}.output.dense.bias", "blocks.{i}.ffn.down_proj.bias"),
    Rule("vit.layernorm.weight", "final_norm.weight"),
    Rule("vit.layernorm.bias", "final_norm.bias"),
    Rule("classifier.weight", "head.proj.weight"),
    Rule("classifier.bias", "head.proj.bias"),
)

IGNORED = (
    "vit.pooler.dense.weight",  # ViTModel's pooler, which the classification model drops as HF does
    "vit.pooler.dense.bias",
)

DEFAULTS: dict[str, Any] = {
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "layer_norm_eps": 1e-12,
    "image_size": 224,
    "patch_size": 16,
    "num_channels": 3,
    "qkv_bias": True,
}

OPTIONS = (
    Option(
        "qkv_bias",
        lambda v: v is not False,
        "zoo's attention has biases on all four projections or none; ViT keeps the output bias",
    ),
    Option("image_size", lambda v: isinstance(v, int), "zoo's vit takes square images (one integer image_size)"),
    Option("patch_size", lambda v: isinstance(v, int), "zoo's vit takes square patches (one integer patch_size)"),
    activation_option("hidden_act", "ViT"),
)

REQUIREMENTS = {
    "architecture": "vit",
    "block.norm_position": "pre",
    "embed_norm": (None, False),
    "final_norm": (None, True),
    "layers": no_layer_overrides,
    "embedding.type": "patch",
    "embedding.cls_token": True,
    "embedding.distillation_token": False,  # DeiT's
    **CLASSIC_BLOCK,
    "head.type": "classification",
    "head.pool": "cls",
    "head.pooler": False,
    "head.distillation": False,  # DeiT's
}


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    return {
        "architecture": "vit",
        "image_size": config["image_size"],
        "patch_size": config["patch_size"],
        "num_channels": config["num_channels"],
        "num_classes": num_labels(config),
        "d_model": config["hidden_size"],
        "num_layers": config["num_hidden_layers"],
        "norm_position": "pre",
        "embedding": {"type": "patch", "cls_token": True},
        "attention": {
            "type": "mha",
            "num_heads": config["num_attention_heads"],
            "dropout": config["attention_probs_dropout_prob"],
        },
        "positional": {"type": "learned"},
        "norm": {"type": "layernorm", "eps": config["layer_norm_eps"]},
        "ffn": {"type": "mlp", "hidden": config["intermediate_size"], "activation": ACTIVATIONS[config["hidden_act"]]},
        "head": {"type": "classification", "pool": "cls"},
        "dropout": config["hidden_dropout_prob"],
    }


def config(recipe, weights) -> dict[str, Any]:
    return {
        "hidden_size": recipe.d_model,
        "num_hidden_layers": recipe.num_layers,
        "num_attention_heads": recipe.attention.num_heads,
        "intermediate_size": weights["blocks.0.ffn.up_proj.weight"].shape[0],
        "hidden_act": HF_ACTIVATIONS[recipe.ffn.activation],
        "hidden_dropout_prob": recipe.dropout,
        "attention_probs_dropout_prob": recipe.attention.dropout,
        "layer_norm_eps": recipe.norm.eps,
        "image_size": recipe.image_size,
        "patch_size": recipe.patch_size,
        "num_channels": recipe.num_channels,
        "qkv_bias": True,
        "id2label": {str(i): f"LABEL_{i}" for i in range(recipe.num_classes)},
        "label2id": {f"LABEL_{i}": i for i in range(recipe.num_classes)},
        "dtype": dtype_name(weights),
    }


VIT = Family(
    name="vit",
    model_type="vit",
    classes=("ViTForImageClassification",),
    base_prefix="vit.",
    head_prefixes=("classifier.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("vit-b16",),
    unread={
        "encoder_stride": "ViTForMaskedImageModeling's decoder, a class zoo does not import",
        "pooler_act": "ViTModel's pooler, which the classification model does not have",
        "pooler_output_size": "ViTModel's pooler, which the classification model does not have",
    },
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "ViTForImageClassification",
)
