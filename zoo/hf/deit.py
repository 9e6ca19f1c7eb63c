"""DeiT (``DeiTForImageClassificationWithTeacher``, ``DeiTForImageClassification``): ViT with a distillation token.

A second learned token follows [CLS] (zoo's ``embedding: {type: patch, distillation_token: true}``; the position
table has a row for each). With the teacher, one classifier reads the [CLS] token and another the distillation
token, and the logits are their average (zoo's ``head: {type: classification, distillation: true}``);
``DeiTForImageClassification`` classifies the [CLS] token alone. The blocks are ViT's.
"""

from __future__ import annotations

from typing import Any

from . import vit
from .mapping import Family, Rule


def _distilled(recipe) -> bool:
    return bool(getattr(recipe.head, "distillation", False))


def _single(recipe) -> bool:
    return not _distilled(recipe)


RULES = (
    *(
        Rule(rule.hf_names[0].replace("vit.", "deit.", 1), rule.zoo, rule.transform)
        for rule in vit.RULES
        if rule.hf_names[0].startswith("vit.")
    ),
    Rule("deit.embeddings.distillation_token", "embedding.distillation_token"),
    Rule("cls_classifier.weight", "head.proj.weight", when=_distilled),
    Rule("cls_classifier.bias", "head.proj.bias", when=_distilled),
    Rule("distillation_classifier.weight", "head.distill_proj.weight"),
    Rule("distillation_classifier.bias", "head.distill_proj.bias"),
    Rule("classifier.weight", "head.proj.weight", when=_single),
    Rule("classifier.bias", "head.proj.bias", when=_single),
)

IGNORED = (
    "deit.pooler.dense.weight",  # DeiTModel's pooler, which the classification models drop as HF does
    "deit.pooler.dense.bias",
)

CLASSES = ("DeiTForImageClassificationWithTeacher", "DeiTForImageClassification")


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    out = vit.recipe(config, hf_class, names)
    out["embedding"]["distillation_token"] = True
    out["head"]["distillation"] = hf_class == CLASSES[0]
    return out


REQUIREMENTS = {
    **vit.REQUIREMENTS,
    "embedding.distillation_token": True,
    "head.distillation": (True, False),
}

DEIT = Family(
    name="deit",
    model_type="deit",
    classes=CLASSES,
    base_prefix="deit.",
    head_prefixes=("cls_classifier.", "distillation_classifier.", "classifier."),
    defaults=vit.DEFAULTS,
    options=vit.OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("deit-small-distilled",),
    unread=dict(vit.VIT.unread),
    recipe=recipe,
    config=vit.config,
    hf_class=lambda recipe: CLASSES[0] if _distilled(recipe) else CLASSES[1],
)
