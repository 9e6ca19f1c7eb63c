"""DeiT (``DeiTForImageClassificationWithTeacher``, ``DeiTForImageClassification``): ViT with a distillation token
after [CLS]; with the teacher a second classifier reads it, the logits the two's average (``head.distillation``)."""

from typing import Any

from .mapping import Rule
from .rows_flags import unwritten
from .table import Fixed, Require
from .vit import VIT, body

CLASSES = ("DeiTForImageClassificationWithTeacher", "DeiTForImageClassification")


def distilled(recipe: Any) -> bool:  # the class says whether a second classifier reads the distillation token
    return bool(getattr(recipe.head, "distillation", False))


RULES = (
    *body("deit"),
    Rule("deit.embeddings.distillation_token", "embedding.distillation_token"),
    *(Rule(f"cls_classifier.{k}", f"head.proj.{k}", when=distilled) for k in ("weight", "bias")),
    *(Rule(f"distillation_classifier.{k}", f"head.distill_proj.{k}") for k in ("weight", "bias")),
    *(Rule(f"classifier.{k}", f"head.proj.{k}", when=lambda recipe: not distilled(recipe)) for k in ("weight", "bias")),
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
        unwritten("distillation", "head.distillation", lambda hf_class, names: hf_class == CLASSES[0]),
        Require("head.distillation", (True, False)),
    ),
)
