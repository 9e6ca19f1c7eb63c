"""BEiT (``BeitForImageClassification``, ``BeitModel``): a pre-norm ViT with layer scale, 2-D relative position
biases (each layer's own table, or one the layers share: ``relative_2d``), absolute positions optional (the
embedding's own table), query and value biases without a key bias, and a classifier on the patches' mean under a
LayerNorm (``use_mean_pooling``) or on the final-normed [CLS]."""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from .mapping import UNSQUEEZE, Rule, no_layer_overrides, num_labels
from .rows import BIAS_FIELDS
from .rows_classic import labels, mha, mlp, width
from .rows_vision import exported_class, image
from .table import Computed, Fixed, Key, Require, Unread, family

LAYER = (
    ("layernorm_before", "attention_norm"),
    ("attention.attention.query", "attention.q_proj"),
    ("attention.attention.key", "attention.k_proj"),
    ("attention.attention.value", "attention.v_proj"),
    ("attention.output.dense", "attention.o_proj"),
    ("layernorm_after", "ffn_norm"),
    ("intermediate.dense", "ffn.up_proj"),
    ("output.dense", "ffn.down_proj"),
)
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
RELATIVE = {"type": "relative_2d"}


def read_biases(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    own, shared = config["use_relative_position_bias"], config["use_shared_relative_position_bias"]
    if own and shared:
        raise HFImportError(
            "use_relative_position_bias=True with use_shared_relative_position_bias=True: zoo's layers read their "
            "own relative bias or the shared one, not both added"
        )
    return {
        "positional": RELATIVE if shared else {"type": "none"},
        "attention.position_bias": RELATIVE if own else None,
    }


def fits_biases(recipe: Any) -> str | None:
    own, shared = recipe.attention.position_bias, recipe.positional.type
    if (own is not None and own.type != "relative_2d") or shared not in ("none", "relative_2d"):
        return f"positional {shared}, attention.position_bias {own}: needs relative_2d or none, one of them at most"
    return "attention.position_bias and positional: one relative_2d bias at most" if own and shared != "none" else None


def fits_projection_biases(recipe: Any) -> str | None:
    on = recipe.attention.biases()
    return None if on == {"q": True, "k": False, "v": True, "o": True} else f"attention biases {on}: needs all but k"


def read_head(config: dict[str, Any], recipe: dict[str, Any], hf_class: str, names: Any) -> dict[str, Any]:
    mean = config["use_mean_pooling"]
    if hf_class == CLASSES[1] and mean:
        raise HFImportError(
            "BeitModel with use_mean_pooling=True: its pooled output (a LayerNorm of the patches' mean) is no head "
            "zoo builds; import BeitForImageClassification, or BeitModel with use_mean_pooling=False"
        )
    head = {"type": "classification", "pool": "patches", "pool_norm": True, "eps": config["layer_norm_eps"]}
    head = (
        head if mean else {"type": "classification"} if hf_class == CLASSES[0] else {"type": "embedding", "pool": "cls"}
    )
    return {"head": head, "final_norm": not mean, "num_classes": num_labels(config)}


def fits_head(recipe: Any) -> str | None:
    head, final = recipe.head, recipe.final_norm is not False
    wanted = {"type": "embedding", "pool": "cls"} if head.type == "embedding" else {"type": "classification"}
    if not final:
        wanted = {"type": "classification", "pool": "patches", "pool_norm": True, "eps": recipe.norm.eps}
    expected = (
        type(head).model_validate(wanted).model_dump(exclude={"dropout"}) if head.type == wanted["type"] else None
    )
    return None if head.model_dump(exclude={"dropout"}) == expected else f"head is {head.type} {head}, needs {wanted}"


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
        Computed(
            "relative",
            keys={"use_relative_position_bias": False, "use_shared_relative_position_bias": False},
            paths=("positional.*", "attention.position_bias"),
            read=read_biases,
            write=lambda recipe, weights: {
                "use_relative_position_bias": recipe.attention.position_bias is not None,
                "use_shared_relative_position_bias": recipe.positional.type == "relative_2d",
            },
            requires={"positional": fits_biases},
        ),
        *mha("num_attention_heads", 12, "attention_probs_dropout_prob", 0.0),
        Computed(
            "biases",
            keys={},
            paths=BIAS_FIELDS,
            read=lambda config, recipe: {"attention.k_bias": False},
            write=lambda recipe, weights: {},
            requires={"attention.biases": fits_projection_biases},
        ),
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
        Computed(
            "head",
            keys={"use_mean_pooling": True},
            paths=("head.*", "final_norm", "num_classes"),
            read=read_head,
            write=lambda recipe, weights: {
                "use_mean_pooling": recipe.final_norm is False,
                **(labels(recipe.num_classes) if recipe.head.type == "classification" else {}),
            },
            requires={"head": fits_head},
            checkpoint=True,
        ),
        Unread("drop_path_rate", "stochastic depth drops whole residual branches in training only"),
        Unread("vocab_size", "BeitForMaskedImageModeling's visual-token head, a class zoo does not import"),
        *(
            Unread(k, "BeitForSemanticSegmentation's or BeitBackbone's parts, classes zoo does not import")
            for k in ("pool_scales", "use_auxiliary_head", "auxiliary_loss_weight", "auxiliary_channels")
        ),
        *(
            Unread(k, "BeitForSemanticSegmentation's or BeitBackbone's parts, classes zoo does not import")
            for k in ("auxiliary_num_convs", "auxiliary_concat_input", "semantic_loss_ignore_index", "add_fpn")
        ),
        *(
            Unread(k, "BeitBackbone's feature maps, a class zoo does not import")
            for k in ("reshape_hidden_states", "stage_names", "out_features", "out_indices")
        ),
    ),
)
