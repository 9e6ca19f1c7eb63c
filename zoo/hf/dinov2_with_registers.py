"""DINOv2 with registers (``Dinov2WithRegistersModel``, ``...ForImageClassification``): DINOv2 with
``num_register_tokens`` learned tokens after [CLS] (no positions; the classifier's mean leaves them out) and its
position table resized with antialiasing."""

from .dinov2 import DINOV2, body, classifier
from .rows_vision import exported_class, image_head
from .table import Computed, Fixed

CLASSES = ("Dinov2WithRegistersForImageClassification", "Dinov2WithRegistersModel")

REGISTERS = Computed(
    "registers",
    keys={"num_register_tokens": 4},
    paths=("embedding.register_tokens",),
    read=lambda config, recipe: {"embedding.register_tokens": config["num_register_tokens"]},
    write=lambda recipe, weights: {"num_register_tokens": recipe.embedding.register_tokens},
)

DINOV2_WITH_REGISTERS = DINOV2.derive(
    "dinov2_with_registers",
    classes=CLASSES,
    rules=body("dinov2_with_registers"),
    base_prefix="dinov2_with_registers.",
    recipes=("dinov2-with-registers-small",),
    hf_class=exported_class(CLASSES[1], CLASSES[0]),
    base_class=CLASSES[1],
    drop=("use_mask_token",),
    defaults={"patch_size": 16},
    rows=(
        REGISTERS,
        Fixed("embedding.antialias", True),
        Fixed("embedding.mask_token", True),  # the registers' config has no use_mask_token: always kept
        image_head(CLASSES[1], classifier),
    ),
)
