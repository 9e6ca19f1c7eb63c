"""BEiT (``BeitForImageClassification``, ``BeitModel``): a pre-norm ViT with layer scale, 2-D relative position
biases (each layer's own table, or one the layers share: ``relative_2d``), absolute positions optional (the
embedding's own table), query and value biases without a key bias, and a classifier on the patches' mean under a
LayerNorm (``use_mean_pooling``) or on the final-normed [CLS]."""

from __future__ import annotations

from .mapping import UNSQUEEZE, Rule, no_layer_overrides
from .rows_classic import mha, mlp, width
from .rows_vision import QV_BIASES, exported_class, image, mean_pooling_head, relative_biases
from .table import Fixed, Key, Require, Unread, family
from .vit import VIT_LAYER

LAYER = VIT_LAYER  # the same module names as ViT
KINDS, TABLE = ("weight", "bias"), "relative_position_bias.relative_position_bias_table"

RULES = (
    Rule("beit.embeddings.cls_token", "embedding.cls_token"),
    Rule("beit.embeddings.mask_token", "embedding.mask_token", UNSQUEEZE),
    Rule("beit.embeddings.position_embeddings", "embedding.position"),
    *(Rule(f"beit.embeddings.patch_embeddings.projection.{k}", f"embedding.proj.{k}") for k in KINDS),
    *(Rule(f"beit.encoder.layer.{{i}}.{hf}.{k}", f"blocks.{{i}}.{zoo}.{k}") for hf, zoo in LAYER for k in KINDS),
    Rule(
        f"beit.encoder.layer.{{i}}.attention.attention.{TABLE}",
        "blocks.{i}.attention.position_bias.relative_position_bias_table",
    ),
    Rule(f"beit.encoder.{TABLE}", "positional.relative_position_bias_table"),
    Rule("beit.encoder.layer.{i}.lambda_1", "blocks.{i}.attention_scale"),
    Rule("beit.encoder.layer.{i}.lambda_2", "blocks.{i}.ffn_scale"),
    *(Rule(f"beit.layernorm.{k}", f"final_norm.{k}") for k in KINDS),
    *(Rule(f"beit.pooler.layernorm.{k}", f"head.pool_norm.{k}") for k in KINDS),
    *(Rule(f"classifier.{k}", f"head.proj.{k}") for k in KINDS),
)
CLASSES = ("BeitForImageClassification", "BeitModel")
SEGMENTATION = ("pool_scales", "use_auxiliary_head", "auxiliary_loss_weight", "auxiliary_channels")
SEGMENTATION += ("auxiliary_num_convs", "auxiliary_concat_input", "semantic_loss_ignore_index", "add_fpn")
BACKBONE = ("reshape_hidden_states", "stage_names", "out_features", "out_indices")


BEIT = family(
    "beit",
    classes=CLASSES,
    rules=RULES,
    base_prefix="beit.",
    head_prefixes=("classifier.",),
    recipes=("beit-base-patch16-224",),
    hf_class=exported_class(CLASSES[1], CLASSES[0]),
    base_class=CLASSES[1],
    constants={},
    rows=(
        *image(224, 16, "BEiT"),
        Fixed("block.norm_position", "pre"),
        Fixed("embed_norm", None, also=(False,), imported=False),
        Require("layers", no_layer_overrides),
        Key("hidden_size", "d_model", 768),
        Key("num_hidden_layers", "num_layers", 12),
        Key("use_mask_token", "embedding.mask_token", False),
        Key("use_absolute_position_embeddings", "embedding.positions", False),
        relative_biases("use_relative_position_bias", "use_shared_relative_position_bias"),
        *mha("num_attention_heads", 12, "attention_probs_dropout_prob", 0.0),
        QV_BIASES,
        Fixed("norm.type", "layernorm"),
        Key("layer_norm_eps", "norm.eps", 1e-12),
        Key(
            "layer_scale_init_value",
            "block.layer_scale",
            0.1,
            read=lambda v: v if v > 0 else None,
            write=lambda v: 0.0 if v is None else v,
        ),
        *mlp("hidden_act", "gelu", "BEiT"),
        width("intermediate_size", 3072),
        Key("hidden_dropout_prob", "dropout", 0.0),
        mean_pooling_head(CLASSES[1], CLASSES[0], "use_mean_pooling"),
        Unread("drop_path_rate", "stochastic depth drops whole residual branches in training only"),
        Unread("vocab_size", "BeitForMaskedImageModeling's visual-token head, a class zoo does not import"),
        *(Unread(k, "BeitForSemanticSegmentation's parts, a class zoo does not import") for k in SEGMENTATION),
        *(Unread(k, "BeitBackbone's feature maps, a class zoo does not import") for k in BACKBONE),
    ),
)
