"""DINOv2 (``Dinov2Model``, ``Dinov2ForImageClassification``): ViT with layer scale, its own position table resized
to each image (``embedding.positions``), a kept mask token; the classifier reads [CLS] beside the patches' mean."""

from __future__ import annotations

from .mapping import Rule
from .rows_attention import qkv_biases
from .rows_classic import PRE_NORM, mha
from .rows_vision import SPLIT_GATE_UP, exported_class, ffn_by_ratio, image, image_head
from .table import Fixed, Key, Refused, Unread, family

LAYER = (
    ("norm1", "attention_norm"),
    ("attention.attention.query", "attention.q_proj"),
    ("attention.attention.key", "attention.k_proj"),
    ("attention.attention.value", "attention.v_proj"),
    ("attention.output.dense", "attention.o_proj"),
    ("norm2", "ffn_norm"),
)


gated = lambda recipe: recipe.ffn.type == "swiglu"  # noqa: E731 - a fused gate|up ``weights_in``, ``weights_out``


def body(prefix: str) -> tuple[Rule, ...]:
    """The embeddings, blocks and final norm under ``prefix`` (``dinov2``, ``dinov2_with_registers``)."""
    embeddings, layer, kinds = f"{prefix}.embeddings", f"{prefix}.encoder.layer.{{i}}", ("weight", "bias")
    ffn = "blocks.{i}.ffn"
    return (
        *(Rule(f"{embeddings}.{k}", f"embedding.{k}") for k in ("cls_token", "mask_token", "register_tokens")),
        Rule(f"{embeddings}.position_embeddings", "embedding.position"),
        *(Rule(f"{embeddings}.patch_embeddings.projection.{k}", f"embedding.proj.{k}") for k in kinds),
        *(Rule(f"{layer}.{hf}.{k}", f"blocks.{{i}}.{zoo}.{k}") for hf, zoo in LAYER for k in kinds),
        *(Rule(f"{layer}.mlp.fc1.{k}", f"{ffn}.up_proj.{k}", when=lambda r: not gated(r)) for k in kinds),
        *(Rule(f"{layer}.mlp.fc2.{k}", f"{ffn}.down_proj.{k}", when=lambda r: not gated(r)) for k in kinds),
        *(
            Rule(f"{layer}.mlp.weights_in.{k}", (f"{ffn}.gate_proj.{k}", f"{ffn}.up_proj.{k}"), SPLIT_GATE_UP, gated)
            for k in kinds
        ),
        *(Rule(f"{layer}.mlp.weights_out.{k}", f"{ffn}.down_proj.{k}", when=gated) for k in kinds),
        Rule(f"{layer}.layer_scale1.lambda1", "blocks.{i}.attention_scale"),
        Rule(f"{layer}.layer_scale2.lambda1", "blocks.{i}.ffn_scale"),
        *(Rule(f"{prefix}.layernorm.{k}", f"final_norm.{k}") for k in kinds),
        *(Rule(f"classifier.{k}", f"head.proj.{k}") for k in kinds),
    )


CLASSES = ("Dinov2ForImageClassification", "Dinov2Model")
BACKBONE = ("apply_layernorm", "reshape_hidden_states", "stage_names", "out_features", "out_indices")


def classifier(registers: int) -> dict:  # [CLS] beside the mean of the patches (after [CLS] and the registers)
    return {"type": "classification", "pool": "cls_patches", "prefix_tokens": 1 + registers}


DINOV2 = family(
    "dinov2",
    classes=CLASSES,
    rules=body("dinov2"),
    base_prefix="dinov2.",
    head_prefixes=("classifier.",),
    recipes=("dinov2-small",),
    hf_class=exported_class(CLASSES[1], CLASSES[0]),
    base_class=CLASSES[1],
    constants={},
    rows=(
        *image(224, 14, "DINOv2"),
        *PRE_NORM,
        Key("hidden_size", "d_model", 768),
        Key("num_hidden_layers", "num_layers", 12),
        Fixed("embedding.positions", True),
        Key("use_mask_token", "embedding.mask_token", True),
        Fixed("positional.type", "none"),
        *mha("num_attention_heads", 12, "attention_probs_dropout_prob", 0.0),
        qkv_biases("qkv_bias"),
        Fixed("norm.type", "layernorm"),
        Key("layer_norm_eps", "norm.eps", 1e-6),
        Key("layerscale_value", "block.layer_scale", 1.0),
        Refused("layerscale_value", lambda v: v > 0, "zoo's layer scale starts above 0 (at 0 no sub-layer adds)"),
        *ffn_by_ratio("DINOv2"),
        Key("hidden_dropout_prob", "dropout", 0.0),
        image_head(CLASSES[1], classifier),
        Unread("drop_path_rate", "stochastic depth drops whole residual branches in training only"),
        *(Unread(k, "Dinov2Backbone's feature maps, a class zoo does not import") for k in BACKBONE),
    ),
)
