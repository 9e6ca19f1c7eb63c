"""SigLIP (``SiglipModel``): CLIP's two pre-norm towers with GELU-tanh MLPs, but a text tower that attends both ways
and is read at its final position through a biased ``head`` linear, an image tower without [CLS] or pre-norm whose
tokens an attention-pooling head reduces, and no projections; logits are cos · exp(s) + b (zoo's ``siglip`` head).
"""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from .mapping import Rule
from .rows_neox import linear_rules
from .rows_towers import IGNORED, TOWER_RULES, image_tower, tower
from .table import Computed, Fixed, Key, Refused, Unread, family, under

POOL = ("attention.out_proj out_proj", "layernorm layernorm", "mlp.fc1 up_proj", "mlp.fc2 down_proj")
RULES = (
    *TOWER_RULES,
    *linear_rules("vision_model.", "vision.", "embeddings.patch_embedding embedding.proj", "post_layernorm final_norm"),
    *linear_rules("text_model.", "head.", "head text_head"),
    Rule("vision_model.head.probe", "head.image_pool.probe"),
    *(Rule(f"vision_model.head.attention.in_proj_{p}", f"head.image_pool.in_proj_{p}") for p in ("weight", "bias")),
    *linear_rules("vision_model.head.", "head.image_pool.", *POOL),
    *(Rule(start, f"head.{start}") for start in ("logit_scale", "logit_bias")),
)


def projection(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """The text head maps to ``projection_size`` (default: the text width), which SiglipModel compares with the
    image vectors: it must be the image width."""
    size, image = config["text_config.projection_size"], config["vision_config.hidden_size"]
    if (size if size is not None else config["text_config.hidden_size"]) != image:
        raise HFImportError(f"text_config.projection_size={size!r} is not the image width {image}: SiglipModel fails")
    return {}


def image_width(recipe: Any, weights: Any) -> dict[str, Any]:
    return {"text_config.projection_size": recipe.vision.d_model}


TEXT = (
    *tower("text_config", "SigLIP", 12, "gelu_pytorch_tanh", 3072, 768, 12, 1e-6),
    Key("text_config.vocab_size", "vocab_size", 32000),
    Key("text_config.max_position_embeddings", "max_len", 64),
    Key("text_config.pad_token_id", "pad_token_id", 1),
    Fixed("embedding.type", "token"),
    Unread("text_config.bos_token_id", "a tokenizer setting: the text's first token, not part of the network"),
    Unread("text_config.eos_token_id", "a tokenizer setting: SigLIP reads the final position, not end-of-text"),
)
VISION = image_tower(
    "SigLIP", 16, "gelu_pytorch_tanh", 1e-6, Fixed("embedding.cls_token", False), Fixed("head.pool", "mean")
)
TAKEN = tuple(
    f"head.{f}" for f in ("pool_heads", "pool_hidden", "pool_activation", "pool_eps", "logit_scale", "logit_bias")
)
"""Head fields the image tower's rows state, and the logits' starting values (which imported weights replace)."""
USE_HEAD = "SiglipModel needs it: without the attention-pooling head its pooler_output is None and its forward fails"

SIGLIP = family(
    "siglip",
    classes=("SiglipModel",),
    rules=RULES,
    ignored=IGNORED,
    base_prefix="",
    head_prefixes=(),
    nested=("text_config", "vision_config"),
    recipes=("siglip-base-patch16-224",),
    rows=(
        Fixed("architecture", "dual-encoder"),
        Fixed("head.type", "siglip"),
        Fixed("head.text_pool", "final"),
        Fixed("head.causal_text", False),
        *TEXT,
        *under("vision", VISION),
        Refused("vision_config.vision_use_head", lambda v: v is not False, USE_HEAD),
        Computed("projection", {"text_config.projection_size": None}, ("head.vision_width",), projection, image_width),
        Computed("image tower", {}, TAKEN, lambda config, recipe: {}, lambda recipe, weights: {}),
    ),
)
