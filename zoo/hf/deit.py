"""DeiT (``DeiTForImageClassificationWithTeacher``, ``DeiTForImageClassification``): ViT with a distillation token.

A second learned token follows [CLS] (zoo's ``embedding: {type: patch, distillation_token: true}``; the position
table has a row for each). With the teacher, one classifier reads the [CLS] token and another the distillation
token, and the logits are their average (zoo's ``head: {type: classification, distillation: true}``);
``DeiTForImageClassification`` classifies the [CLS] token alone. The blocks are ViT's.
"""

from __future__ import annotations

from typing import Any

from .mapping import Rule
from .table import Computed, Fixed
from .vit import VIT, body

CLASSES = ("DeiTForImageClassificationWithTeacher", "DeiTForImageClassification")


def distilled(recipe: Any) -> bool:
    return bool(getattr(recipe.head, "distillation", False))


RULES = (
    *body("deit"),
    Rule("deit.embeddings.distillation_token", "embedding.distillation_token"),
    Rule("cls_classifier.weight", "head.proj.weight", when=distilled),
    Rule("cls_classifier.bias", "head.proj.bias", when=distilled),
    Rule("distillation_classifier.weight", "head.distill_proj.weight"),
    Rule("distillation_classifier.bias", "head.distill_proj.bias"),
    Rule("classifier.weight", "head.proj.weight", when=lambda recipe: not distilled(recipe)),
    Rule("classifier.bias", "head.proj.bias", when=lambda recipe: not distilled(recipe)),
)

DEIT = VIT.derive(
    "deit",
    classes=CLASSES,
    rules=RULES,
    ignored=("deit.pooler.dense.weight", "deit.pooler.dense.bias"),  # DeiTModel's pooler, as for ViT
    base_prefix="deit.",
    head_prefixes=("cls_classifier.", "distillation_classifier.", "classifier."),
    recipes=("deit-small-distilled",),
    hf_class=lambda recipe: CLASSES[0] if distilled(recipe) else CLASSES[1],
    rows=(
        Fixed("embedding.distillation_token", True),
        Computed(
            "distillation",  # the class says whether a second classifier reads the distillation token
            keys={},
            paths=("head.distillation",),
            read=lambda config, recipe, hf_class, names: {"head.distillation": hf_class == CLASSES[0]},
            write=lambda recipe, weights: {},
            requires={"head.distillation": (True, False)},
            checkpoint=True,
        ),
    ),
)
