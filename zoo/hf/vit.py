"""ViT (``ViTForImageClassification``): patch embedding with a [CLS] token, pre-norm encoder, classifier.

HF keeps the position table as (1, 1 + patches, E); zoo's learned table is (1 + patches, E).
"""

from __future__ import annotations

from .mapping import UNSQUEEZE, Rule, num_labels
from .rows_classic import BIASED, LEARNED, PRE_NORM, labels, mha, mlp, width
from .table import Computed, Fixed, Key, Refused, Unread, family

VIT_LAYER = (
    ("layernorm_before", "attention_norm"),
    ("attention.attention.query", "attention.q_proj"),
    ("attention.attention.key", "attention.k_proj"),
    ("attention.attention.value", "attention.v_proj"),
    ("attention.output.dense", "attention.o_proj"),
    ("layernorm_after", "ffn_norm"),
    ("intermediate.dense", "ffn.up_proj"),
    ("output.dense", "ffn.down_proj"),
)


def body(prefix: str) -> tuple[Rule, ...]:
    """ViT's embeddings, blocks and final norm under ``prefix`` (``vit``; DeiT's are ``deit``)."""
    return (
        Rule(f"{prefix}.embeddings.cls_token", "embedding.cls_token"),
        Rule(f"{prefix}.embeddings.position_embeddings", "positional.embedding.weight", UNSQUEEZE),
        Rule(f"{prefix}.embeddings.patch_embeddings.projection.weight", "embedding.proj.weight"),
        Rule(f"{prefix}.embeddings.patch_embeddings.projection.bias", "embedding.proj.bias"),
        *(
            Rule(f"{prefix}.encoder.layer.{{i}}.{hf}.{kind}", f"blocks.{{i}}.{zoo}.{kind}")
            for hf, zoo in VIT_LAYER
            for kind in ("weight", "bias")
        ),
        Rule(f"{prefix}.layernorm.weight", "final_norm.weight"),
        Rule(f"{prefix}.layernorm.bias", "final_norm.bias"),
    )


RULES = (
    *body("vit"),
    Rule("classifier.weight", "head.proj.weight"),
    Rule("classifier.bias", "head.proj.bias"),
)

IGNORED = (
    "vit.pooler.dense.weight",  # ViTModel's pooler, which the classification model drops as HF does
    "vit.pooler.dense.bias",
)

POOLER = "ViTModel's pooler, which the classification model does not have"

VIT = family(
    "vit",
    classes=("ViTForImageClassification",),
    rules=RULES,
    ignored=IGNORED,
    base_prefix="vit.",
    head_prefixes=("classifier.",),
    recipes=("vit-b16",),
    constants={},
    rows=(
        Fixed("architecture", "vit"),
        *PRE_NORM,
        Key("image_size", "image_size", 224),
        Key("patch_size", "patch_size", 16),
        Key("num_channels", "num_channels", 3),
        Computed(
            "labels",
            keys={},
            paths=("num_classes",),
            read=lambda config, recipe: {"num_classes": num_labels(config)},
            write=lambda recipe, weights: labels(recipe.num_classes),
        ),
        Key("hidden_size", "d_model", 768),
        Key("num_hidden_layers", "num_layers", 12),
        Fixed("embedding.type", "patch"),
        Fixed("embedding.cls_token", True),
        LEARNED,
        *mha("num_attention_heads", 12, "attention_probs_dropout_prob", 0.0),
        BIASED,
        Fixed("norm.type", "layernorm"),
        Key("layer_norm_eps", "norm.eps", 1e-12),
        *mlp("hidden_act", "gelu", "ViT"),
        width("intermediate_size", 3072),
        Key("hidden_dropout_prob", "dropout", 0.0),
        Fixed("head.type", "classification"),
        Fixed("head.pool", "cls"),
        Refused(
            "qkv_bias",
            lambda v: v is not False,
            "zoo's attention has biases on all four projections or none; ViT keeps the output bias",
            export=True,
        ),
        Refused("image_size", lambda v: isinstance(v, int), "zoo's vit takes square images (one integer image_size)"),
        Refused("patch_size", lambda v: isinstance(v, int), "zoo's vit takes square patches (one integer patch_size)"),
        Unread("encoder_stride", "ViTForMaskedImageModeling's decoder, a class zoo does not import"),
        Unread("pooler_act", POOLER),
        Unread("pooler_output_size", POOLER),
    ),
)
