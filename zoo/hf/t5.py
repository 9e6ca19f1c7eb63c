"""T5 (``T5ForConditionalGeneration``): RMSNorm pre-norm encoder-decoder with relative position buckets.

Only the first block of each stack holds ``relative_attention_bias``; the other blocks reuse it, which
is zoo's one positional module per stack. Attention has no biases and no score scaling (``scale: 1.0``).
With a tied head T5 multiplies the decoder output by d_model**-0.5 first (zoo's ``head.rescale``).
"""

from __future__ import annotations

from typing import Any

from zoo.architectures import decoder_start

from .mapping import ACTIVATIONS, HF_ACTIVATIONS, Rule
from .rows_classic import PRE_NORM, biases, width
from .table import Computed, Fixed, Key, Refused, Unread, family

GATED = {"relu": "reglu", "silu": "swiglu", "gelu": "geglu"}
"""T5's gated FFN activations and zoo's FFN of each (``gated-gelu`` is zoo's geglu with approximate: tanh)."""


def _stack(stack: str, ffn_layer: int) -> tuple[Rule, ...]:
    """The rows of one block of ``stack``; its FFN is sub-layer ``ffn_layer`` (1 in the encoder, 2 in the
    decoder, whose sub-layer 1 is cross-attention)."""
    hf, zoo = f"{stack}.block.{{i}}", f"{stack}.blocks.{{i}}"
    ffn = f"{hf}.layer.{ffn_layer}"
    return (
        Rule(f"{hf}.layer.0.layer_norm.weight", f"{zoo}.attention_norm.weight"),
        *(Rule(f"{hf}.layer.0.SelfAttention.{p}.weight", f"{zoo}.attention.{p}_proj.weight") for p in "qkvo"),
        Rule(f"{ffn}.layer_norm.weight", f"{zoo}.ffn_norm.weight"),
        Rule(f"{ffn}.DenseReluDense.wi.weight", f"{zoo}.ffn.up_proj.weight", when=lambda r: r.ffn.type == "mlp"),
        Rule(f"{ffn}.DenseReluDense.wi_0.weight", f"{zoo}.ffn.gate_proj.weight", when=lambda r: r.ffn.type != "mlp"),
        Rule(f"{ffn}.DenseReluDense.wi_1.weight", f"{zoo}.ffn.up_proj.weight", when=lambda r: r.ffn.type != "mlp"),
        Rule(f"{ffn}.DenseReluDense.wo.weight", f"{zoo}.ffn.down_proj.weight"),
        Rule(
            f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
            f"{stack}.positional.relative_attention_bias.weight",
        ),
        Rule(f"{stack}.final_layer_norm.weight", f"{stack}.final_norm.weight"),
    )


CROSS = (
    Rule("decoder.block.{i}.layer.1.layer_norm.weight", "decoder.blocks.{i}.cross_attention_norm.weight"),
    *(
        Rule(
            f"decoder.block.{{i}}.layer.1.EncDecAttention.{p}.weight",
            f"decoder.blocks.{{i}}.cross_attention.{p}_proj.weight",
        )
        for p in "qkvo"
    ),
)

RULES = (
    Rule("shared.weight", "embedding.token.weight"),
    *_stack("encoder", 1),
    *_stack("decoder", 2),
    *CROSS,
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied
)

IGNORED = (
    "encoder.embed_tokens.weight",  # copies of shared.weight
    "decoder.embed_tokens.weight",
    "lm_head.weight",
    "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight",  # unused, in old checkpoints
)


def ffn_spec(feed_forward_proj: str) -> dict[str, Any] | None:
    """zoo's FFN for T5's ``feed_forward_proj`` ("relu", "gated-silu", ...), or None if none is identical."""
    gated, _, act = feed_forward_proj.rpartition("-")
    if gated == "gated":
        if act not in GATED:
            return None
        # T5 v1.1 / Flan-T5's gated-gelu applies gelu_new in the gate: the tanh approximation.
        return {"type": GATED[act], "approximate": "tanh"} if act == "gelu" else {"type": GATED[act]}
    if gated == "" and act in ACTIVATIONS:
        return {"type": "mlp", "activation": ACTIVATIONS[act]}
    return None


def feed_forward_proj(recipe: Any, weights: Any) -> dict[str, Any]:
    """The way back of ``ffn_spec``."""
    ffn = recipe.ffn
    if ffn.type == "mlp":
        return {"feed_forward_proj": HF_ACTIVATIONS[ffn.activation]}
    return {"feed_forward_proj": "gated-" + {v: k for k, v in GATED.items()}[ffn.type]}


def fits_ffn(recipe: Any) -> str | None:
    """A requirement: an FFN a ``feed_forward_proj`` names, without biases."""
    ffn = recipe.ffn
    if ffn.type == "mlp":
        if ffn.activation not in HF_ACTIVATIONS:
            return f"ffn.activation is {ffn.activation!r}, needs one of {', '.join(map(repr, HF_ACTIVATIONS))}"
    elif ffn.type not in GATED.values():
        return f"ffn.type is {ffn.type!r}, needs 'mlp', 'reglu', 'swiglu' or 'geglu'"
    elif ffn.type == "geglu" and ffn.approximate != "tanh":
        return "ffn.approximate is 'none', needs 'tanh' (T5's gated-gelu applies the tanh GELU)"
    if getattr(ffn, "bias", False):
        return "ffn.bias is True, needs False (T5's FFN has no biases)"
    return None


def fits_head(recipe: Any) -> str | None:
    if recipe.head.type == "lm" and not recipe.head.tie_embeddings and recipe.head.rescale:
        return "head.rescale is True with an untied head; T5 rescales the decoder output only with tied embeddings"
    return None


def rescales(config: dict[str, Any]) -> bool:
    """Whether the head multiplies the decoder output by d_model**-0.5: ``scale_decoder_outputs`` (transformers 5),
    else, as transformers 4, with tied embeddings."""
    rescale = config["scale_decoder_outputs"]
    return bool(config["tie_word_embeddings"]) if rescale is None else bool(rescale)


def hf_head(recipe: Any, weights: Any) -> dict[str, Any]:
    return {"tie_word_embeddings": recipe.head.tie_embeddings, "scale_decoder_outputs": recipe.head.rescale}


def tie(config: dict[str, Any], recipe: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict:
    # Transformers 4 ties the head and rescales iff tie_word_embeddings; transformers 5 always ties unless
    # the checkpoint holds its own lm_head, and says whether to rescale in scale_decoder_outputs.
    tied = bool(config["tie_word_embeddings"]) or (names is not None and "lm_head.weight" not in names)
    return {"head.tie_embeddings": tied, "head.rescale": rescales(config)}


def checkpoint_tied(config: dict[str, Any], names: frozenset[str] | None) -> bool:
    """Whether mT5's or UMT5's head is the token table: the checkpoint has no ``lm_head.weight`` of its own
    (transformers 5 ties every other), or, with no checkpoint to look at, the config's ``tie_word_embeddings``."""
    if names is not None:
        return "lm_head.weight" not in names
    return bool(config["tie_word_embeddings"])


def never_rescales(recipe: Any) -> str | None:
    if recipe.head.type == "lm" and recipe.head.rescale:
        return "head.rescale is True, needs False (mT5 never rescales the decoder output)"
    return None


def own_head(rescale: bool) -> Computed:
    """The head of mT5 and UMT5, in place of T5's ``tie``: tied as ``checkpoint_tied`` says; rescaled as
    ``scale_decoder_outputs`` says (``rescale``: UMT5) or never (mT5, which has no such key)."""
    return Computed(
        "tie",
        keys={"tie_word_embeddings": True, **({"scale_decoder_outputs": None} if rescale else {})},
        paths=("head.tie_embeddings", "head.rescale"),
        read=lambda config, recipe, hf_class, names: {
            "head.tie_embeddings": checkpoint_tied(config, names),
            "head.rescale": rescale and rescales(config),
        },
        write=hf_head if rescale else lambda recipe, weights: {"tie_word_embeddings": recipe.head.tie_embeddings},
        requires={"head": fits_head} if rescale else {"head": fits_head, "head.rescale": never_rescales},
        checkpoint=True,
    )


def start(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """The decoder's start token where it is not the pad id (T5's, zoo's default)."""
    pad, start = config["pad_token_id"], config["decoder_start_token_id"]
    return {"decoder_start_token_id": start} if start is not None and start != (pad or 0) else {}


T5 = family(
    "t5",
    classes=("T5ForConditionalGeneration",),
    rules=RULES,
    ignored=IGNORED,
    base_prefix="",
    head_prefixes=(),
    recipes=("t5-small",),
    constants={"eos_token_id": None, "is_encoder_decoder": True},
    rows=(
        Fixed("architecture", "encoder-decoder"),
        *PRE_NORM,
        Key("vocab_size", "vocab_size", 32128),
        Key("d_model", "d_model", 512),
        Key("num_layers", "num_layers", 6),
        Computed(
            "decoder layers",  # null: as many as the encoder's
            keys={"num_decoder_layers": None},
            paths=("num_decoder_layers",),
            read=lambda config, recipe: {"num_decoder_layers": config["num_decoder_layers"] or config["num_layers"]},
            write=lambda recipe, weights: {"num_decoder_layers": recipe.stack_layers("decoder")},
        ),
        Key("n_positions", "max_len", 512),
        Fixed("embedding.type", "token"),
        Computed(
            "pad",  # no padding row: T5's shared embedding is a plain nn.Embedding
            keys={"pad_token_id": 0},
            paths=("pad_token_id",),
            read=lambda config, recipe: {"pad_token_id": config["pad_token_id"]},
            write=lambda recipe, weights: {
                "pad_token_id": recipe.pad_token_id if recipe.pad_token_id is not None else 0
            },
        ),
        Computed(
            "decoder start",
            keys={"decoder_start_token_id": None},
            paths=("decoder_start_token_id",),
            read=start,
            write=lambda recipe, weights: {"decoder_start_token_id": decoder_start(recipe)},
        ),
        Fixed("positional.type", "t5_relative"),  # in the first block of each stack, reused by the others
        Key("relative_attention_num_buckets", "positional.num_buckets", 32),
        Key("relative_attention_max_distance", "positional.max_distance", 128),
        Fixed("attention.type", "mha"),
        Key("num_heads", "attention.num_heads", 8),
        Computed(
            "head width",
            keys={"d_kv": 64},
            paths=("attention.head_dim",),
            read=lambda config, recipe: {"attention.head_dim": config["d_kv"]},
            write=lambda recipe, weights: {"d_kv": recipe.attention.head_dim_for(recipe.d_model)},
        ),
        biases(False),
        Fixed("attention.scale", 1.0),  # T5 does not scale its scores
        Computed(
            "dropout",  # one rate for the sub-layers' outputs and the attention weights
            keys={"dropout_rate": 0.1},
            paths=("dropout", "attention.dropout"),
            read=lambda config, recipe: {
                "attention.dropout": config["dropout_rate"],
                "dropout": config["dropout_rate"],
            },
            write=lambda recipe, weights: {"dropout_rate": recipe.dropout},
        ),
        Fixed("norm.type", "rmsnorm"),
        Key("layer_norm_epsilon", "norm.eps", 1e-6),
        Computed(
            "ffn",
            keys={"feed_forward_proj": "relu"},
            paths=("ffn.type", "ffn.activation", "ffn.approximate", "ffn.bias"),
            read=lambda config, recipe: {
                **{f"ffn.{k}": v for k, v in ffn_spec(config["feed_forward_proj"]).items()},
                "ffn.bias": False,
            },
            write=feed_forward_proj,
            requires={"ffn": fits_ffn},
        ),
        width("d_ff", 2048, "encoder.blocks.0.ffn.up_proj.weight", owns=("ffn.multiple_of",)),
        Fixed("head.type", "lm"),
        Computed(
            "tie",  # with a tied head T5 multiplies the decoder output by d_model**-0.5 first (head.rescale)
            keys={"tie_word_embeddings": True, "scale_decoder_outputs": None},
            paths=("head.tie_embeddings", "head.rescale"),
            read=tie,
            write=hf_head,
            requires={"head": fits_head},
            checkpoint=True,
        ),
        Refused(
            "feed_forward_proj",
            lambda v: isinstance(v, str) and ffn_spec(v) is not None,
            "gated T5 FFNs import as zoo's reglu, swiglu and tanh-approximate geglu ('gated-relu', 'gated-silu', "
            f"'gated-gelu'); plain FFNs take one of {', '.join(ACTIVATIONS)}",
        ),
        Refused("is_decoder", lambda v: not v, "T5ForConditionalGeneration is an encoder-decoder"),
        Unread("classifier_dropout", "T5ForSequenceClassification's head, a class zoo does not import"),
        Unread("dense_act_fn", "derived by T5Config from feed_forward_proj, which is read"),
        Unread("is_gated_act", "derived by T5Config from feed_forward_proj, which is read"),
    ),
)
