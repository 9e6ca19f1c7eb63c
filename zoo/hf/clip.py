"""CLIP (``CLIPModel``): a causal text tower and a ViT image tower, both pre-norm with quick-GELU MLPs, projected
into one space by bias-free linears; the image tower normalises its embeddings first (``pre_layrnorm``) and its
[CLS] vector last (``post_layernorm``, zoo's final norm). Its config nests ``text_config`` and ``vision_config``.
"""

from __future__ import annotations

from typing import Any

from .mapping import Rule, Transform
from .rows_neox import linear_rules
from .rows_towers import IGNORED, TOWER_RULES, image_tower, tower
from .table import Computed, Fixed, Key, Require, Unread, family, under

TOKEN = Transform("as a [CLS] token", lambda t: [t[0].view(1, 1, -1)], lambda t: [t[0].reshape(-1)])
"""CLIP keeps its class embedding as (E,); zoo's [CLS] token is (1, 1, E)."""

RULES = (
    *TOWER_RULES,
    Rule("vision_model.embeddings.class_embedding", "vision.embedding.cls_token", TOKEN),
    Rule("vision_model.embeddings.patch_embedding.weight", "vision.embedding.proj.weight"),
    *linear_rules("vision_model.", "vision.", "pre_layrnorm embed_norm", "post_layernorm final_norm"),
    Rule("text_projection.weight", "head.text_projection.weight"),
    Rule("visual_projection.weight", "head.visual_projection.weight"),
    Rule("logit_scale", "head.logit_scale"),
)


def text_pool(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """The first CLIP configs say ``eos_token_id: 2``: HF then pools the largest id (the vocabulary's last token is
    end-of-text); later ones pool the first ``eos_token_id``."""
    eos = config["text_config.eos_token_id"]
    return {"head.text_pool": "argmax"} if eos == 2 else {"head.text_pool": "eos", "head.eos_token_id": eos}


def text_pool_key(recipe: Any, weights: Any) -> dict[str, Any]:
    return {"text_config.eos_token_id": 2 if recipe.head.text_pool == "argmax" else recipe.head.eos_token_id}


TEXT = (
    *tower("text_config", "CLIP", 8, "quick_gelu", 2048, 512, 12, 1e-5),
    Key("text_config.vocab_size", "vocab_size", 49408),
    Key("text_config.max_position_embeddings", "max_len", 77),
    Key("text_config.pad_token_id", "pad_token_id", 1),
    Computed(
        "text_pool",
        {"text_config.eos_token_id": 49407},
        ("head.text_pool", "head.eos_token_id"),
        text_pool,
        text_pool_key,
        requires={"head.text_pool": ("eos", "argmax")},
    ),
    Fixed("embedding.type", "token"),
    Unread("text_config.bos_token_id", "a tokenizer setting: the text's first token, not part of the network"),
    Unread("text_config.projection_dim", "CLIPTextModelWithProjection's; CLIPModel projects to projection_dim"),
)
VISION = (
    *image_tower("CLIP", 32, "quick_gelu", 1e-5, Fixed("embedding.bias", False), Fixed("head.pool", "cls")),
    Fixed("embed_norm", True),  # pre_layrnorm, in place of PRE_NORM's none
    Unread("vision_config.projection_dim", "CLIPVisionModelWithProjection's; CLIPModel projects to projection_dim"),
)

CLIP = family(
    "clip",
    classes=("CLIPModel",),
    rules=RULES,
    ignored=IGNORED,
    base_prefix="",
    head_prefixes=(),
    nested=("text_config", "vision_config"),
    recipes=("clip-vit-base-patch32",),
    rows=(
        Fixed("architecture", "dual-encoder"),
        Fixed("head.type", "contrastive"),
        Fixed("head.causal_text", True),
        Fixed("head.bias", False),
        Key("projection_dim", "head.proj_dim", 512),
        Key("logit_scale_init_value", "head.logit_scale", 2.6592),
        *TEXT,
        *under("vision", VISION),
        Require("head.vision_width", lambda recipe: None),  # vision.d_model, which the architecture checks
    ),
)
