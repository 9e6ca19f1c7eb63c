"""Rows of the vision families DINOv2 and BEiT (``zoo/hf/table.py``): square images cut into square patches, a head
chosen by the class (a classifier, or the bare model's pooled features), DINOv2's FFN width stated as a ratio
(``mlp_ratio``, plain or SwiGLU), BEiT's 2-D relative position biases, its projection biases and its mean
pooling."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from zoo.errors import HFImportError

from .mapping import ACTIVATIONS, HF_ACTIVATIONS, Transform, activation_option, num_labels
from .rows import BIAS_FIELDS
from .rows_classic import labels
from .table import Computed, Fixed, Key, Refused, Row

SPLIT_GATE_UP = Transform("split gate|up", lambda t: list(t[0].chunk(2, dim=0)), lambda t: [torch.cat(list(t), dim=0)])
"""DINOv2's fused SwiGLU input ``weights_in``: the gate's rows, then the up projection's."""


def image(image_size: int, patch_size: int, family: str) -> tuple[Row, ...]:
    """Square images of ``image_size`` pixels cut into square patches; the sizes zoo cannot take refused."""
    return (
        Fixed("architecture", "vit"),
        Key("image_size", "image_size", image_size),
        Key("patch_size", "patch_size", patch_size),
        Key("num_channels", "num_channels", 3),
        Fixed("embedding.type", "patch"),
        Fixed("embedding.cls_token", True),
        Refused("image_size", lambda v: isinstance(v, int), f"zoo's {family} takes square images (one integer)"),
        Refused("patch_size", lambda v: isinstance(v, int), f"zoo's {family} takes square patches (one integer)"),
    )


def image_head(base: str, classifier: Callable[[Any], dict[str, Any]]) -> Computed:
    """The head the class names: the bare model ``base`` pools its features (the final [CLS] vector), a classifier
    is ``classifier(n)`` for ``n`` register tokens; the labels are the config's (the bare model's too)."""
    features = {"type": "embedding", "pool": "cls"}

    def read(config: dict[str, Any], recipe: dict[str, Any], hf_class: str, names: Any) -> dict[str, Any]:
        head = features if hf_class == base else classifier(config.get("num_register_tokens", 0))
        return {"head": head, "num_classes": num_labels(config)}

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        return labels(recipe.num_classes) if recipe.head.type == "classification" else {}

    def check(recipe: Any) -> str | None:
        head = recipe.head
        wanted = features if head.type != "classification" else classifier(recipe.embedding.register_tokens)
        expected = (
            type(head).model_validate(wanted).model_dump(exclude={"dropout"}) if head.type == wanted["type"] else None
        )
        if head.model_dump(exclude={"dropout"}) != expected:
            return f"head is {head.model_dump(exclude={'dropout'})}, needs {wanted} (or {features})"
        return None

    return Computed(
        "head",
        keys={},
        paths=("head.*", "num_classes"),
        read=read,
        write=write,
        requires={"head": check},
        checkpoint=True,
    )


def exported_class(base: str, classifier: str) -> Callable[[Any], str]:
    """The class a recipe exports as: the bare model for pooled features, else the classifier."""
    return lambda recipe: classifier if recipe.head.type == "classification" else base


def swiglu_width(d_model: int, ratio: float) -> int:
    """DINOv2's SwiGLU hidden width (``Dinov2SwiGLUFFN``): two thirds of ``d_model * ratio``, rounded up to 8."""
    return (int(int(d_model * ratio) * 2 / 3) + 7) // 8 * 8


def ratio_of(recipe: Any, hidden: int) -> int | None:
    """The ``mlp_ratio`` (an integer, as transformers' config takes it) that gives the recipe's FFN width
    ``hidden``, or None when none does."""
    E = recipe.d_model
    if recipe.ffn.type == "swiglu":
        return next((r for r in range(1, 65) if swiglu_width(E, r) == hidden), None)
    return hidden // E if hidden % E == 0 else None


def ffn_by_ratio(family: str) -> tuple[Row, ...]:
    """DINOv2's FFN: a biased two-layer MLP of ``int(hidden_size * mlp_ratio)`` (``hidden_act``), or with
    ``use_swiglu_ffn`` a biased SwiGLU of :func:`swiglu_width` (its activation always SiLU)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        E, ratio = config["hidden_size"], config["mlp_ratio"]
        if config["use_swiglu_ffn"]:
            return {"ffn": {"type": "swiglu", "hidden": swiglu_width(E, ratio), "bias": True}}
        return {"ffn": {"type": "mlp", "hidden": int(E * ratio), "activation": ACTIVATIONS[config["hidden_act"]]}}

    def hidden(weights: Any) -> int:
        return weights["blocks.0.ffn.up_proj.weight"].shape[0]

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        ratio = ratio_of(recipe, hidden(weights))
        if recipe.ffn.type == "swiglu":
            return {"use_swiglu_ffn": True, "mlp_ratio": ratio}
        return {"use_swiglu_ffn": False, "mlp_ratio": ratio, "hidden_act": HF_ACTIVATIONS[recipe.ffn.activation]}

    def check(recipe: Any) -> str | None:
        ffn = recipe.ffn
        if ffn.type not in ("mlp", "swiglu") or not ffn.bias:
            return f"ffn is {ffn.type} (bias {ffn.bias}), needs a biased mlp or swiglu"
        if ffn.type == "mlp" and ffn.activation not in HF_ACTIVATIONS:
            return f"ffn.activation {ffn.activation} has no Hugging Face name"
        hidden = ffn.hidden or 4 * recipe.d_model
        if ffn.type == "swiglu" and (ffn.alpha, ffn.limit, ffn.up_shift) != (1.0, None, 0.0):
            return "ffn: a plain SwiGLU (alpha 1, no limit, no up_shift)"
        if ratio_of(recipe, hidden) is None:
            return f"ffn.hidden {hidden} is d_model times no integer mlp_ratio (swiglu: 2/3 of it, rounded up to 8)"
        return None

    return (
        Computed(
            "ffn",
            keys={"mlp_ratio": 4, "use_swiglu_ffn": False, "hidden_act": "gelu"},
            paths=("ffn.*",),
            read=read,
            write=write,
            requires={"ffn": check},
            conditional=("hidden_act",),  # the MLP's: SwiGLU's activation is always SiLU
        ),
        activation_option("hidden_act", family),
    )


RELATIVE = {"type": "relative_2d"}


def relative_biases(own: str, shared: str) -> Computed:
    """BEiT's 2-D relative position bias: each layer's own table (``own``: ``attention.position_bias``) or one the
    layers share (``shared``: the stack's ``positional``), never both (zoo's layer reads one of the two)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        if config[own] and config[shared]:
            raise HFImportError(
                f"{own}=True with {shared}=True: zoo's layers read their own relative bias or the shared one, "
                "not both added"
            )
        return {
            "positional": RELATIVE if config[shared] else {"type": "none"},
            "attention.position_bias": RELATIVE if config[own] else None,
        }

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        return {own: recipe.attention.position_bias is not None, shared: recipe.positional.type == "relative_2d"}

    def check(recipe: Any) -> str | None:
        layer, stack = recipe.attention.position_bias, recipe.positional.type
        if (layer is not None and layer.type != "relative_2d") or stack not in ("none", "relative_2d"):
            return f"positional {stack}, attention.position_bias {layer}: needs relative_2d or none"
        both = layer is not None and stack != "none"
        return "attention.position_bias and positional: one relative_2d bias at most" if both else None

    keys = {own: False, shared: False}
    paths = ("positional.*", "attention.position_bias")
    return Computed("relative", keys=keys, paths=paths, read=read, write=write, requires={"positional": check})


def _qv_biased(recipe: Any) -> str | None:
    on = recipe.attention.biases()
    return None if on == {"q": True, "k": False, "v": True, "o": True} else f"attention biases {on}: needs all but k"


QV_BIASES = Computed(
    "biases",
    keys={},
    paths=BIAS_FIELDS,
    read=lambda config, recipe: {"attention.k_bias": False},
    write=lambda recipe, weights: {},
    requires={"attention.biases": _qv_biased},
)
"""BEiT's projections: query, value and output biased, the key not (the config states none of it)."""


def mean_pooling_head(base: str, classifier: str, key: str) -> Computed:
    """BEiT's head: with ``key`` (``use_mean_pooling``) the patches' mean under a LayerNorm (the classifier's input,
    or the bare model ``base``'s pooled output: ``patch_mean``) and no final norm in the stack; without it, the
    final-normed [CLS] (the bare model's: that vector as its features)."""

    def wanted(mean: bool, eps: float, hf_class: str) -> dict[str, Any]:
        if hf_class == base:
            return {"type": "patch_mean", "eps": eps} if mean else {"type": "embedding", "pool": "cls"}
        return {"type": "classification", **({"pool": "patches", "pool_norm": True, "eps": eps} if mean else {})}

    def read(config: dict[str, Any], recipe: dict[str, Any], hf_class: str, names: Any) -> dict[str, Any]:
        head = wanted(config[key], config["layer_norm_eps"], hf_class)
        return {"head": head, "final_norm": not config[key], "num_classes": num_labels(config)}

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        classes = labels(recipe.num_classes) if recipe.head.type == "classification" else {}
        return {key: recipe.final_norm is False, **classes}

    def check(recipe: Any) -> str | None:
        head, mean = recipe.head, recipe.final_norm is False
        want = wanted(mean, recipe.norm.eps, classifier if head.type == "classification" else base)
        shown = head.model_dump(exclude={"dropout"})
        fits = head.type == want["type"] and shown == type(head).model_validate(want).model_dump(exclude={"dropout"})
        return None if fits else f"head {shown}, needs {want}"

    return Computed(
        "head",
        keys={key: True},
        paths=("head.*", "final_norm", "num_classes"),
        read=read,
        write=write,
        requires={"head": check},
        checkpoint=True,
    )
