"""The five built-in architecture families, registered as components of kind ``architecture``.

An architecture's factory is ``build(recipe, make) -> nn.Module``; its config says which recipe
fields it needs, the defaults it brings (vit embeds patches) and which stacks it has (causal or not).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from torch import nn

from zoo.components.positional.none import NoPositionalConfig
from zoo.config import ComponentConfig
from zoo.hookspecs import hookimpl

from .blocks import Block, ModelCache, ModelOutput, TransformerStack, build_mask
from .decoder import DecoderModel
from .dual_encoder import DualEncoderModel, DualEncoderOutput, Tower
from .encoder import EncoderModel
from .encoder_decoder import EncoderDecoderModel
from .stack import Make, stack_parts
from .vit import VisionTransformer

__all__ = [
    "ArchitectureConfig",
    "Block",
    "DecoderModel",
    "DualEncoderModel",
    "DualEncoderOutput",
    "EncoderDecoderModel",
    "EncoderModel",
    "ModelCache",
    "ModelOutput",
    "TransformerStack",
    "VisionTransformer",
    "build_mask",
]

RECIPES_DIR = Path(__file__).resolve().parents[1] / "recipes"
"""The named recipes zoo ships, inside the package (the repository's top-level ``recipes`` links here)."""


class ArchitectureConfig(ComponentConfig):
    """What an architecture asks of a recipe. Subclasses set the class variables and may add rules."""

    defaults: ClassVar[dict[str, Any]] = {}
    """Recipe keys filled in when the recipe leaves them out."""
    stacks: ClassVar[list[tuple[str, bool]]] = []
    """(stack name, causal) for each stack of blocks."""
    requires: ClassVar[tuple[str, ...]] = ()
    """Recipe fields that must be set."""
    token_input: ClassVar[bool] = True
    """Inputs are token sequences, so ``train.seq_len`` counts positions (vit derives its own)."""
    cross_stacks: ClassVar[tuple[str, ...]] = ()
    """Stacks whose blocks also cross-attend (built from each block's attention config)."""
    examples: ClassVar[tuple[dict[str, Any], ...]] = ()
    """Tiny recipes of this architecture: ``zoo.testing`` places every component's examples into them."""
    towers: ClassVar[tuple[str, ...]] = ()
    """Recipe fields holding a tower's recipe of its own (a dual-encoder's ``vision``)."""
    encoder_input: ClassVar[bool] = False
    """Its encoder may embed an input of its own (``encoder_embedding``: Whisper's audio front end)."""
    unused: ClassVar[tuple[str, ...]] = ()
    """Recipe fields (dotted: ``train.task``) this architecture never reads: a saved recipe leaves them out
    while they hold their default, so a decoder's recipe does not speak of image channels."""

    def derive(self, data: dict[str, Any]) -> None:
        """Fill recipe fields that follow from others (before validation). Here: a tied lm head multiplies by
        the token table, so it projects to the table's width, ``embedding.proj_dim`` (OPT-350m), unless the
        recipe gives ``head.proj_dim`` itself (``check_recipe`` refuses one that differs)."""
        embedding, head = data.get("embedding"), data.get("head")
        table = embedding.get("proj_dim") or embedding.get("width") if isinstance(embedding, dict) else None
        head = {"type": head} if isinstance(head, str) else head
        if table is None or not isinstance(head, dict) or head.get("type") not in ("lm", "mlm") or "proj_dim" in head:
            return
        if head.get("tie_embeddings", True) is True:
            data["head"] = {**head, "proj_dim": table}

    def check_recipe(self, recipe) -> list[tuple[str, str]]:
        errors = [
            (f, f"required by architecture '{recipe.architecture}'")
            for f in self.requires
            if getattr(recipe, f) is None
        ]
        if getattr(recipe.embedding, "width", None) is not None and (len(self.stacks) > 1 or self.towers):
            errors.append(("embedding.width", "a factorized embedding feeds one stack (an encoder or a decoder)"))
        stacks = self.stacks_of(recipe) if callable(getattr(self, "stacks_of", None)) else self.stacks
        if getattr(type(recipe.attention), "encoder_pattern", False) and all(causal for _, causal in stacks):
            errors.append(
                (
                    "attention",
                    f"attention '{recipe.attention.type}' is a pattern of an encoder's self-attention (LongT5's), and "
                    f"a {recipe.architecture} has no encoder: its causal attention would be plain mha; use mha",
                )
            )
        if recipe.encoder_embedding is not None and not self.encoder_input:
            errors.append(
                (
                    "encoder_embedding",
                    f"an encoder's own input embedding belongs to an encoder-decoder; a {recipe.architecture} embeds "
                    "its input with embedding: leave encoder_embedding out",
                )
            )
        if recipe.vision is not None and "vision" not in self.towers:
            errors.append(("vision", f"an image tower belongs to a dual-encoder; a {recipe.architecture} has none"))
        if getattr(type(recipe.head), "joins_towers", False) and not self.towers:
            errors.append(("head", f"a {recipe.head.type} head joins the two towers of an architecture: dual-encoder"))
        embeds_tokens = getattr(recipe.embedding, "token_input", True)
        field = getattr(type(recipe.embedding), "recipe_field", "embedding")
        if field != "embedding":
            errors.append(
                (
                    "embedding",
                    f"embedding '{recipe.embedding.type}' embeds an encoder's own input: give it as {field} (an "
                    "encoder-decoder's), and keep embedding for the tokens",
                )
            )
        elif embeds_tokens != self.token_input:
            feeds = "token ids" if self.token_input else "images"
            errors.append(
                (
                    "embedding",
                    f"embedding '{recipe.embedding.type}' cannot take the {feeds} of '{recipe.architecture}'",
                )
            )
        elif getattr(recipe.head, "tie_embeddings", False) and not embeds_tokens:
            errors.append(("head.tie_embeddings", "a tied head shares the token table, and this embedding has none"))
        elif getattr(recipe.head, "tie_embeddings", False):
            table = getattr(recipe.embedding, "proj_dim", None) or getattr(recipe.embedding, "width", None)
            table = table or recipe.d_model
            width = getattr(recipe.head, "proj_dim", None) or recipe.d_model
            if table != width:
                errors.append(
                    (
                        "head.proj_dim",
                        f"a tied head's output matrix is the token table, {table} wide (embedding.proj_dim or width, "
                        f"else d_model), but the head projects to {width}: give both the same proj_dim, or set "
                        "head.tie_embeddings: false",
                    )
                )
        return errors


class DecoderConfig(ArchitectureConfig):
    type: Literal["decoder"] = "decoder"
    defaults: ClassVar[dict[str, Any]] = {"embedding": {"type": "token"}, "head": {"type": "lm"}}
    stacks: ClassVar[list[tuple[str, bool]]] = [("decoder", True)]
    requires: ClassVar[tuple[str, ...]] = ("vocab_size", "max_len")
    unused: ClassVar[tuple[str, ...]] = (
        "image_size",
        "patch_size",
        "num_channels",
        "num_decoder_layers",
        "decoder_max_len",
        "train.task",
        "train.mask_prob",
    )
    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {
            "architecture": "decoder",
            "d_model": 32,
            "num_layers": 2,
            "vocab_size": 61,
            "max_len": 16,
            "positional": "rope",
            "attention": {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "bias": False},
            "norm": "rmsnorm",
            "ffn": {"type": "swiglu", "hidden": 32},
        },
    )


class EncoderConfig(ArchitectureConfig):
    type: Literal["encoder"] = "encoder"
    defaults: ClassVar[dict[str, Any]] = {"embedding": {"type": "token"}, "head": {"type": "mlm"}}
    stacks: ClassVar[list[tuple[str, bool]]] = [("encoder", False)]
    requires: ClassVar[tuple[str, ...]] = ("vocab_size", "max_len")
    unused: ClassVar[tuple[str, ...]] = (
        "image_size",
        "patch_size",
        "num_channels",
        "num_decoder_layers",
        "decoder_max_len",
        "train.task",
    )
    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {
            "architecture": "encoder",
            "d_model": 32,
            "num_layers": 2,
            "layer_groups": 1,  # ALBERT's cross-layer sharing: every component is checked in shared layers too
            "vocab_size": 61,
            "max_len": 16,
            "type_vocab_size": 2,
            "norm_position": "post",
            "positional": "learned",
            "attention": {"type": "mha", "num_heads": 4},
            "norm": {"type": "layernorm", "eps": 1e-12},
            "ffn": {"type": "mlp"},
        },
    )


class EncoderDecoderConfig(ArchitectureConfig):
    type: Literal["encoder-decoder"] = "encoder-decoder"
    defaults: ClassVar[dict[str, Any]] = {"embedding": {"type": "token"}, "head": {"type": "lm"}}
    stacks: ClassVar[list[tuple[str, bool]]] = [("encoder", False), ("decoder", True)]
    cross_stacks: ClassVar[tuple[str, ...]] = ("decoder",)
    encoder_input: ClassVar[bool] = True
    requires: ClassVar[tuple[str, ...]] = ("vocab_size", "max_len")
    unused: ClassVar[tuple[str, ...]] = ("image_size", "patch_size", "num_channels", "train.mask_prob")
    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {
            "architecture": "encoder-decoder",
            "d_model": 32,
            "num_layers": 2,
            "num_decoder_layers": 1,
            "vocab_size": 61,
            "max_len": 16,
            "pad_token_id": 0,
            "positional": {"type": "t5_relative", "num_buckets": 8, "max_distance": 16},
            "attention": {"type": "mha", "num_heads": 4, "bias": False, "scale": 1.0},
            "norm": "rmsnorm",
            "ffn": {"type": "mlp", "bias": False, "activation": "relu"},
            "head": {"type": "lm", "rescale": True},
        },
    )

    def check_recipe(self, recipe) -> list[tuple[str, str]]:
        errors = super().check_recipe(recipe)
        start = recipe.decoder_start_token_id
        if start is not None and recipe.vocab_size is not None and start >= recipe.vocab_size:
            errors.append(("decoder_start_token_id", f"must be below vocab_size ({recipe.vocab_size}), got {start}"))
        return errors


class VitConfig(ArchitectureConfig):
    type: Literal["vit"] = "vit"
    token_input: ClassVar[bool] = False
    defaults: ClassVar[dict[str, Any]] = {
        "embedding": {"type": "patch"},
        "head": {"type": "classification"},
        "positional": {"type": "learned"},
    }
    stacks: ClassVar[list[tuple[str, bool]]] = [("encoder", False)]
    requires: ClassVar[tuple[str, ...]] = ("image_size", "patch_size")
    unused: ClassVar[tuple[str, ...]] = (
        "type_vocab_size",
        "num_decoder_layers",
        "decoder_max_len",
        "train.task",
        "train.mask_prob",
        "train.tokenizer",
    )
    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {
            "architecture": "vit",
            "d_model": 32,
            "num_layers": 2,
            "image_size": 8,
            "patch_size": 4,
            "num_classes": 5,
            "attention": {"type": "mha", "num_heads": 4},
            "norm": {"type": "layernorm", "eps": 1e-6},
            "ffn": {"type": "mlp"},
        },
    )

    def derive(self, data: dict[str, Any]) -> None:
        # The positional table covers the patches, the CLS token and a distillation token; the recipe need not say so.
        image, patch = data.get("image_size"), data.get("patch_size")
        if "max_len" not in data and isinstance(image, int) and isinstance(patch, int) and patch > 0:
            embedding = data.get("embedding") or {}
            cls = embedding.get("cls_token", True) if isinstance(embedding, dict) else True
            distill = embedding.get("distillation_token", False) if isinstance(embedding, dict) else False
            registers = embedding.get("register_tokens", 0) if isinstance(embedding, dict) else 0
            registers = registers if isinstance(registers, int) else 0  # a bad value: the embedding's check says so
            data["max_len"] = (image // patch) ** 2 + int(bool(cls)) + int(bool(distill)) + registers

    def check_recipe(self, recipe) -> list[tuple[str, str]]:
        errors = super().check_recipe(recipe)
        if getattr(recipe.head, "type", None) == "classification" and recipe.num_classes is None:
            errors.append(("num_classes", "required by a classification head"))
        if errors:
            return errors
        if recipe.image_size % recipe.patch_size:
            sizes = f"image_size ({recipe.image_size}) must be divisible by patch_size ({recipe.patch_size})"
            return [("patch_size", sizes)]
        extra = getattr(recipe.embedding, "extra_tokens", int(getattr(recipe.embedding, "cls_token", True)))
        tokens = (recipe.image_size // recipe.patch_size) ** 2 + extra
        if recipe.max_len != tokens:
            errors.append(("max_len", f"must equal the number of patch tokens ({tokens}) for vit; leave it out"))
        return errors


class DualEncoderConfig(ArchitectureConfig):
    """Two towers: the recipe is the text tower, ``vision`` the image tower (a vit recipe whose head is left
    unused); a head that joins towers (``contrastive``: CLIP, ``siglip``) joins them."""

    type: Literal["dual-encoder"] = "dual-encoder"
    defaults: ClassVar[dict[str, Any]] = {"embedding": {"type": "token"}, "head": {"type": "contrastive"}}
    stacks: ClassVar[list[tuple[str, bool]]] = [("encoder", False)]
    requires: ClassVar[tuple[str, ...]] = ("vocab_size", "max_len", "vision")
    towers: ClassVar[tuple[str, ...]] = ("vision",)
    unused: ClassVar[tuple[str, ...]] = (
        "image_size",
        "patch_size",
        "num_channels",
        "num_classes",
        "num_decoder_layers",
        "decoder_max_len",
        "decoder_start_token_id",
        "train.task",
        "train.mask_prob",
    )
    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {
            "architecture": "dual-encoder",
            "d_model": 32,
            "num_layers": 2,
            "vocab_size": 61,
            "max_len": 16,
            "attention": {"type": "mha", "num_heads": 4},
            "norm": {"type": "layernorm", "eps": 1e-5},
            "ffn": {"type": "mlp"},
            "head": {"type": "contrastive", "proj_dim": 8, "text_pool": "argmax"},
            "vision": {
                "architecture": "vit",
                "d_model": 16,
                "num_layers": 1,
                "image_size": 8,
                "patch_size": 4,
                "embed_norm": True,
                "attention": {"type": "mha", "num_heads": 2},
                "norm": {"type": "layernorm", "eps": 1e-5},
                "ffn": {"type": "mlp"},
                "head": {"type": "embedding", "pool": "cls"},
            },
        },
    )

    def stacks_of(self, recipe) -> list[tuple[str, bool]]:
        """The text tower is causal where the head says so (CLIP's), so validation checks its blocks as built."""
        return [("encoder", bool(getattr(recipe.head, "causal_text", False)))]

    def derive(self, data: dict[str, Any]) -> None:
        """The head's ``vision_width`` is the image tower's width; the text tower's positions are learned."""
        super().derive(data)
        data.setdefault("positional", {"type": "learned"})
        vision, head = data.get("vision"), data.get("head")
        if isinstance(vision, dict) and isinstance(head, dict) and "vision_width" not in head:
            if isinstance(vision.get("d_model"), int):
                data["head"] = {**head, "vision_width": vision["d_model"]}
        if isinstance(vision, dict) and isinstance(data.get("head"), dict):
            data["head"] = {**from_vision(data["head"], vision), **data["head"]}

    def check_recipe(self, recipe) -> list[tuple[str, str]]:
        errors = super().check_recipe(recipe)
        if not getattr(type(recipe.head), "joins_towers", False):
            joins = "; heads that join towers: contrastive (CLIP), siglip"
            errors.append(
                ("head", f"a dual-encoder joins its towers with a contrastive head, not {recipe.head.type}{joins}")
            )
        vision = recipe.vision
        reads_cls = getattr(type(recipe.head), "reads_cls", False)
        if vision is not None and vision.architecture != "vit":
            errors.append(("vision.architecture", f"the image tower is a vit, not {vision.architecture}"))
        elif vision is not None and reads_cls and getattr(vision.embedding, "cls_token", False) is not True:
            errors.append(
                ("vision.embedding.cls_token", f"the {recipe.head.type} head reads the image tower's [CLS] token")
            )
        elif vision is not None:
            for field, path in getattr(type(recipe.head), "from_vision", {}).items():
                wanted = tower_value(vision, path)
                if getattr(recipe.head, field) != wanted:
                    errors.append(
                        (
                            f"head.{field}",
                            f"must equal vision.{path} ({wanted!r}); leave it out (it is taken from there)",
                        )
                    )
        width = getattr(recipe.head, "vision_width", None)
        if vision is not None and width not in (None, vision.d_model):
            errors.append(("head.vision_width", f"must equal vision.d_model ({vision.d_model}); leave it out"))
        return errors


def from_vision(head: dict[str, Any], vision: dict[str, Any]) -> dict[str, Any]:
    """The fields a dual-encoder's head takes from its image tower (its config's ``from_vision``: head field ->
    dotted path in the tower's recipe), where the tower's recipe states them."""
    from zoo.plugins import get_registry

    try:
        config = get_registry().get("head", head.get("type", ""))
    except Exception:  # noqa: BLE001 - an unknown head: its validation says so
        return {}
    out = {}
    for field, path in getattr(config.config, "from_vision", {}).items():
        value: Any = vision
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is not None:
            out[field] = value
    return out


def tower_value(vision, path: str) -> Any:
    """The value at dotted ``path`` of a validated image tower's recipe."""
    value = vision
    for part in path.split("."):
        value = getattr(value, part, None)
    return value


def build_decoder(recipe, make: Make) -> nn.Module:
    """GPT-like decoder-only language model."""
    ctx = recipe.context(causal=True, stack="decoder")
    return DecoderModel(
        embedding=make("embedding", recipe.embedding, ctx),
        head=make("head", recipe.head, ctx),
        max_len=recipe.max_len,
        **stack_parts(recipe, make, stack="decoder", causal=True),
    )


def build_encoder(recipe, make: Make) -> nn.Module:
    """BERT-like bidirectional encoder."""
    ctx = recipe.context(stack="encoder")
    return EncoderModel(
        embedding=make("embedding", recipe.embedding, ctx),
        head=make("head", recipe.head, ctx),
        max_len=recipe.max_len,
        **stack_parts(recipe, make, stack="encoder", causal=False),
    )


def build_encoder_decoder(recipe, make: Make) -> nn.Module:
    """T5-like encoder-decoder with cross-attention; with ``encoder_embedding`` (Whisper's audio front end) the
    encoder embeds its own input, and adds no positions where that embedding adds its own."""
    ctx = recipe.context(stack="decoder", causal=True)
    source = recipe.encoder_embedding
    if source is None:
        encoder = TransformerStack(**stack_parts(recipe, make, stack="encoder", causal=False))
    else:
        own = getattr(type(source), "own_positions", False)  # the encoder stack adds none of its own
        source_recipe = recipe.model_copy(update={"positional": NoPositionalConfig()}) if own else recipe
        encoder = Tower(
            embedding=make("embedding", source, source_recipe.context(stack="encoder")),
            **stack_parts(source_recipe, make, stack="encoder", causal=False),
        )
    return EncoderDecoderModel(
        embedding=make("embedding", recipe.embedding, ctx),
        encoder=encoder,
        decoder=TransformerStack(**stack_parts(recipe, make, stack="decoder", causal=True, cross=True)),
        head=make("head", recipe.head, ctx),
        max_len=recipe.stack_max_len("decoder"),
        decoder_start_token_id=decoder_start(recipe),
        pad_token_id=recipe.pad_token_id,
    )


def decoder_start(recipe) -> int:
    """The token an encoder-decoder's decoder starts from: ``decoder_start_token_id``, else the pad id, else 0."""
    if recipe.decoder_start_token_id is not None:
        return recipe.decoder_start_token_id
    return recipe.pad_token_id or 0


def build_vit(recipe, make: Make) -> nn.Module:
    """Vision Transformer: patch embedding, encoder, classifier."""
    ctx = recipe.context(stack="encoder")
    return VisionTransformer(
        embedding=make("embedding", recipe.embedding, ctx),
        head=make("head", recipe.head, ctx),
        max_len=recipe.max_len,
        **stack_parts(recipe, make, stack="encoder", causal=False),
    )


def build_dual_encoder(recipe, make: Make) -> nn.Module:
    """CLIP-like dual encoder: a text stack and a vit stack, joined by a contrastive head."""
    causal = getattr(recipe.head, "causal_text", False)
    vision = recipe.vision
    return DualEncoderModel(
        text=Tower(
            embedding=make("embedding", recipe.embedding, recipe.context(stack="encoder", causal=causal)),
            **stack_parts(recipe, make, stack="encoder", causal=causal),
        ),
        vision=Tower(
            embedding=make("embedding", vision.embedding, vision.context(stack="encoder")),
            **stack_parts(vision, make, stack="encoder", causal=False),
        ),
        head=make("head", recipe.head, recipe.context(stack="encoder")),
        max_len=recipe.max_len,
    )


@hookimpl
def register_components(register):
    register("architecture", "decoder", build_decoder, DecoderConfig)
    register("architecture", "encoder", build_encoder, EncoderConfig)
    register("architecture", "encoder-decoder", build_encoder_decoder, EncoderDecoderConfig)
    register("architecture", "vit", build_vit, VitConfig)
    register("architecture", "dual-encoder", build_dual_encoder, DualEncoderConfig)


@hookimpl
def register_recipes():
    return [RECIPES_DIR] if RECIPES_DIR.is_dir() else []
