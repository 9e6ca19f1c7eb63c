"""The recipe model: ``Recipe``, its per-layer overrides, and what positions its encoding has rows for."""

from __future__ import annotations

import functools
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, field_validator

from zoo.config import BuildContext, ComponentConfig, StrictNumbers
from zoo.limits import (
    MAX_CHANNELS,
    MAX_D_MODEL,
    MAX_IMAGE_SIZE,
    MAX_LAYERS,
    MAX_NAME_CHARS,
    MAX_POSITIONS,
    MAX_VOCAB,
)

from .training import TrainConfig

COMPONENT_FIELDS: tuple[str, ...] = ("embedding", "positional", "attention", "norm", "ffn", "head")
LAYER_FIELDS: tuple[str, ...] = ("attention", "norm", "ffn")
SHAPE_FIELDS_SKIPPED = (
    "name",
    "description",
    "architecture",
    "layers",
    "expect",
    "hf_family",
    "train",
    "vision",
    "encoder_embedding",
)

Component = SerializeAsAny[ComponentConfig]


def _json_default(field: Any) -> Any:
    default = field.get_default(call_default_factory=True)
    return list(default) if isinstance(default, tuple) else default


class Expect(StrictNumbers):
    """Facts the built model must match; a mismatch fails the build with both numbers."""

    model_config = ConfigDict(extra="forbid")
    parameters: int | None = Field(None, ge=0, description="Exact parameter count (tied weights counted once).")


class LayerOverride(StrictNumbers):
    """Components that replace the recipe's defaults in the selected layers."""

    model_config = ConfigDict(extra="forbid")
    select: str | int | list[int] = Field(
        description="Layers to change: an index (3), a list ([0, 5]), or a Python slice ('1::2', ':4')."
    )
    stack: Literal["encoder", "decoder", "all"] = Field("all", description="For encoder-decoder models.")
    attention: Component | None = None
    norm: Component | None = None
    ffn: Component | None = None


class Recipe(StrictNumbers):
    """A validated recipe. Component fields hold the validated configs of their registered components."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS, description="Recipe name, e.g. gpt2-small.")
    description: str = ""
    architecture: str = Field(description="encoder | decoder | encoder-decoder | vit, or a plugin's.")
    d_model: int = Field(ge=1, le=MAX_D_MODEL, description="Width of the residual stream (E).")
    num_layers: int = Field(
        ge=1, le=MAX_LAYERS, description="Blocks in the stack (the encoder's, for encoder-decoder)."
    )
    num_decoder_layers: int | None = Field(
        None, ge=1, le=MAX_LAYERS, description="Decoder blocks (default num_layers)."
    )
    layer_groups: int | None = Field(
        None,
        ge=1,
        le=MAX_LAYERS,
        description="Cross-layer parameter sharing (ALBERT): each stack's layers fall into this many consecutive "
        "groups of equal size, and the layers of a group use one set of weights; default every layer its own.",
    )
    max_len: int | None = Field(None, ge=1, le=MAX_POSITIONS, description="Longest sequence (positional table size).")
    decoder_max_len: int | None = Field(
        None,
        ge=1,
        le=MAX_POSITIONS,
        description="encoder-decoder: the decoder's longest sequence, its positional table's size, where it is not "
        "the encoder's (LED: 1024 beside max_len 16384); default max_len.",
    )
    vocab_size: int | None = Field(None, ge=1, le=MAX_VOCAB, description="Token vocabulary (text models).")
    type_vocab_size: int = Field(
        0, ge=0, le=MAX_VOCAB, description="Segment (token type) vocabulary; 0 = none (BERT: 2)."
    )
    pad_token_id: int | None = Field(None, ge=0, description="Padding token id (below vocab_size).")
    decoder_start_token_id: int | None = Field(
        None, ge=0, description="encoder-decoder: the first decoder token (default pad_token_id, else 0; BART: 2)."
    )
    image_size: int | None = Field(None, ge=1, le=MAX_IMAGE_SIZE, description="Input image side in pixels (vit).")
    patch_size: int | None = Field(None, ge=1, le=MAX_IMAGE_SIZE, description="Patch side in pixels (vit).")
    num_channels: int = Field(3, ge=1, le=MAX_CHANNELS, description="Image channels (vit).")
    num_classes: int | None = Field(None, ge=1, le=MAX_VOCAB, description="Classes of a classification head.")
    block: SerializeAsAny[BaseModel] = Field(
        description="How each block meets the residual stream: a zoo.recipe.block.BlockConfig, validated with "
        "the components (`norm_position: post` at the top of a recipe is short for `block: {norm_position: post}`)."
    )
    embed_norm: bool | None = Field(None, description="Norm after the embeddings (default: post-norm models).")
    final_norm: bool | None = Field(None, description="Norm after the last block (default: pre-norm models).")
    dropout: float = Field(0.0, ge=0, lt=1, description="Residual and embedding dropout.")
    init_std: float = Field(0.02, gt=0, description="Std of the normal init of weights.")
    embedding: Component
    positional: Component
    attention: Component
    norm: Component
    ffn: Component
    head: Component
    encoder_embedding: Component | None = Field(
        None,
        description="An encoder-decoder's encoder input when it is not the decoder's tokens: an embedding of its own "
        "(Whisper's audio front end, type: audio), which adds its own positions; default the shared token embedding.",
    )
    layers: list[LayerOverride] = Field(
        default_factory=list, max_length=MAX_LAYERS, description="Per-layer component overrides."
    )
    expect: Expect | None = None
    hf_family: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_NAME_CHARS,
        description="The Hugging Face model_type `zoo export` writes (Phi-3 is Mistral's network: a Phi-3 recipe "
        "says phi3); default the first family the recipe fits.",
    )
    train: TrainConfig = Field(default_factory=TrainConfig, description="How `zoo train` trains the model.")
    vision: Recipe | None = Field(
        None,
        description="A dual-encoder's image tower, a vit recipe of its own (CLIP, SigLIP); the rest of the recipe "
        "is its text tower.",
    )

    @field_validator("name")
    @classmethod
    def _name_is_not_blank(cls, name: str) -> str:
        if not name.strip():
            raise ValueError("a recipe name cannot be blank")
        return name

    def to_dict(self) -> dict[str, Any]:
        """Plain data that loads back into the same recipe (no ``extends``, nothing implicit). Fields the
        architecture never reads (its ``unused``) are left out while they hold their default."""
        data = self.model_dump(mode="json", exclude_none=True)
        for dotted in self._unused_fields():
            section, _, name = dotted.rpartition(".")
            holder = data.get(section) if section else data
            model = TrainConfig if section == "train" else Recipe
            field = model.model_fields.get(name)
            if isinstance(holder, dict) and name in holder and field is not None and not field.is_required():
                if holder[name] == _json_default(field):
                    del holder[name]
        return data

    def _unused_fields(self) -> tuple[str, ...]:
        from zoo.errors import ZooError
        from zoo.plugins import get_registry

        try:
            return tuple(getattr(get_registry().get("architecture", self.architecture).config, "unused", ()))
        except ZooError:  # an architecture no longer registered: save every field
            return ()

    def layer_components(self, stack: str, index: int) -> dict[str, ComponentConfig]:
        """The attention / norm / ffn configs of block ``index`` of ``stack`` after overrides."""
        parts: dict[str, ComponentConfig] = {k: getattr(self, k) for k in LAYER_FIELDS}
        n = self.stack_layers(stack)
        for override in self.layers:
            if override.stack in ("all", stack) and index in _selected(override.select, n):
                parts.update({k: getattr(override, k) for k in LAYER_FIELDS if getattr(override, k) is not None})
        return parts

    def layer_plan(self, stack: str) -> list[dict[str, tuple[ComponentConfig, str]]]:
        """For every block of ``stack``: its attention / norm / ffn configs after overrides, each with the
        recipe path that set it (``ffn`` or ``layers.3.ffn``). One pass over the overrides, whatever their count."""
        n = self.stack_layers(stack)
        plan = [{k: (getattr(self, k), k) for k in LAYER_FIELDS} for _ in range(n)]
        for j, override in enumerate(self.layers):
            if override.stack not in ("all", stack):
                continue
            update = {
                k: (getattr(override, k), f"layers.{j}.{k}") for k in LAYER_FIELDS if getattr(override, k) is not None
            }
            if update:
                for i in _selected(override.select, n):
                    plan[i].update(update)
        return plan

    def layer_group(self, stack: str, index: int) -> int:
        """The group of layer ``index`` of ``stack`` under ``layer_groups`` (consecutive groups of equal size);
        without it every layer is a group of its own, its index."""
        return index if self.layer_groups is None else index // self._group_size(stack)

    def weights_of(self, stack: str, index: int) -> int:
        """The layer of ``stack`` whose weights layer ``index`` uses: itself, or with ``layer_groups`` the first
        layer of its group."""
        return index if self.layer_groups is None else self.layer_group(stack, index) * self._group_size(stack)

    def _group_size(self, stack: str) -> int:
        return max(self.stack_layers(stack) // (self.layer_groups or 1), 1)

    def stack_layers(self, stack: str) -> int:
        if stack == "decoder" and self.architecture == "encoder-decoder" and self.num_decoder_layers is not None:
            return self.num_decoder_layers
        return self.num_layers

    def stack_max_len(self, stack: str) -> int | None:
        """The longest sequence of ``stack``: ``decoder_max_len`` for an encoder-decoder's decoder where given, else
        ``max_len``."""
        if stack == "decoder" and self.architecture == "encoder-decoder" and self.decoder_max_len is not None:
            return self.decoder_max_len
        return self.max_len

    def context(
        self,
        *,
        layer_idx: int = 0,
        causal: bool = False,
        cross: bool = False,
        stack: str = "encoder",
        attention: ComponentConfig | None = None,
    ):
        """The ``BuildContext`` of one place in the model (heads from that layer's attention; pass ``attention``
        when it is known, from ``layer_plan``, to skip looking it up).

        Validation reads it from a recipe some of whose fields failed: a field is passed on as it is (no ``or``
        of it), so that only a check reading a failed one is skipped."""
        if attention is None:
            attention = self.layer_components(stack, layer_idx)["attention"] if self.num_layers else self.attention
        num_heads = getattr(attention, "num_heads", 1)
        head_dim = attention.head_dim_for(self.d_model) if hasattr(attention, "head_dim_for") else 0
        return BuildContext(
            d_model=self.d_model,
            max_len=_or_zero(self.stack_max_len(stack)),
            causal=causal,
            cross=cross,
            layer_idx=layer_idx,
            num_layers=self.stack_layers(stack),
            num_heads=num_heads,
            head_dim=head_dim,
            vocab_size=_or_zero(self.vocab_size),
            num_classes=_or_zero(self.num_classes),
            type_vocab_size=self.type_vocab_size,
            image_size=_or_zero(self.image_size),
            patch_size=_or_zero(self.patch_size),
            num_channels=self.num_channels,
            pad_token_id=self.pad_token_id,
            init_std=self.init_std,
            positional=getattr(self.positional, "type", None),
        )


def _or_zero(value: Any) -> Any:
    return 0 if value is None else value


def select_layers(select: str | int | list[int], n: int) -> list[int]:
    """Indices of ``n`` layers chosen by an index, a list of indices, or a slice string like '1::2'.

    Raises ``ValueError`` for anything else (``validation`` says why in the recipe's terms).
    """
    return sorted(layer_selection(select, n))


@functools.lru_cache(maxsize=4096)
def _selection(key: Any, n: int) -> range | frozenset[int]:
    return layer_selection(list(key) if isinstance(key, tuple) else key, n)


def _selected(select: Any, n: int) -> range | frozenset[int]:
    """``layer_selection``, computed once per selector and stack size (a recipe asks again for every block)."""
    if isinstance(select, bool) or (isinstance(select, list) and any(isinstance(i, bool) for i in select)):
        return layer_selection(select, n)  # True == 1 for a cache: not a valid selector, which this says
    try:
        return _selection(tuple(select) if isinstance(select, list) else select, n)
    except TypeError:  # unhashable items: not a valid selector, which layer_selection says
        return layer_selection(select, n)


def layer_selection(select: str | int | list[int], n: int) -> range | frozenset[int]:
    """The layers ``select`` chooses of ``n``, as a range or set (membership costs O(1) either way)."""
    if isinstance(select, bool):
        raise ValueError(f"a layer selector is not a boolean: {select!r}")
    if isinstance(select, int):
        return frozenset([select % n]) if -n <= select < n else frozenset()
    if isinstance(select, list):
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in select):
            raise ValueError(f"a list of layers holds integers only: {select!r}")
        return frozenset(i % n for i in select if -n <= i < n)
    if not isinstance(select, str):
        raise ValueError(f"a layer selector is an index, a list or a slice, not {type(select).__name__}")
    if select.strip() == "all":
        return range(n)
    parts = select.split(":")
    if len(parts) == 1:
        return layer_selection(int(parts[0]), n)
    if len(parts) > 3:
        raise ValueError(f"a slice has at most three parts: {select!r}")
    bounds = [int(p) if p.strip() else None for p in parts]
    return range(n)[slice(*bounds)]


def position_limit(recipe: Recipe, stack: str = "encoder") -> int | None:
    """How many positions the recipe's positional encoding has rows for (in ``stack``: an encoder-decoder's decoder
    may have a table of its own size, ``decoder_max_len``); None when it has no table (RoPE)."""
    if getattr(recipe.positional, "bounded_by_max_len", False):
        return recipe.stack_max_len(stack) or 0
    return None


def positions_fit(recipe: Recipe, n: int, stack: str = "encoder") -> str | None:
    """None when a sequence of ``n`` positions fits the recipe's positional encoding, else why not.

    A learned or sinusoidal table (``bounded_by_max_len``) has rows only for positions below ``max_len``.
    The reason names no fix: each caller knows what to lower.
    """
    limit = position_limit(recipe, stack)
    if limit is not None and n > limit:
        return f"{n} positions do not fit the {recipe.positional.type} position table of max_len {limit}"
    return None


def architecture_fields(unused: tuple[str, ...], towers: tuple[str, ...] = ()) -> list[str]:
    """The recipe's top-level shape fields an architecture reads (all but its ``unused``), then its ``towers`` (a
    dual-encoder's ``vision``), as listings show them: ``d_model``, ``num_layers``, ``layer_groups`` (cross-layer
    sharing), ... Components and bookkeeping left out."""
    skipped = {*SHAPE_FIELDS_SKIPPED, *COMPONENT_FIELDS, *unused}
    return [name for name in Recipe.model_fields if name not in skipped] + list(towers)
