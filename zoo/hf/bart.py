"""BART (``BartForConditionalGeneration``): a post-norm encoder-decoder with learned positions read two rows on,
a LayerNorm on the embeddings of each stack, and a tied head with a fixed ``final_logits_bias``.

Each stack has its own position table (``embed_positions``: ``max_position_embeddings + 2`` rows, position ``p``
reads row ``p + 2``: zoo's ``positional: {type: learned, offset: 2}``) and its own ``layernorm_embedding``
(zoo's ``embed_norm``); blocks normalise after each residual add, and neither stack ends with a norm. The token
table is shared by both stacks and the head, which adds ``final_logits_bias`` (a buffer of zeros in every
published checkpoint): zoo's ``head: {type: lm, logits_bias: true}``, kept so that a round trip is bit for bit.
A ``BartModel`` checkpoint (bart-base's) has no head of its own: it imports with the tied head and no bias, and
exports as ``BartForConditionalGeneration``.
Decoding starts from ``decoder_start_token_id`` (2, the eos token), not from the pad token (1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from zoo.architectures import decoder_start
from zoo.errors import HFImportError

from .mapping import UNSQUEEZE, Rule, Transform, activation_option, default_head_dim, no_layer_overrides
from .opt import padding_is_pad, stack_norms
from .rows_classic import LEARNED, mlp, pad
from .rows_flags import holds
from .table import Computed, Fixed, Key, Refused, Require, Row, Unread, family, get

POSITION_OFFSET = 2
"""BART's position ``p`` reads row ``p + 2`` of each ``embed_positions`` (a fairseq leftover, as in OPT)."""


FAIRSEQ_LAYER = (
    ("self_attn_layer_norm", "attention_norm"),
    ("self_attn.q_proj", "attention.q_proj"),
    ("self_attn.k_proj", "attention.k_proj"),
    ("self_attn.v_proj", "attention.v_proj"),
    ("self_attn.out_proj", "attention.o_proj"),
    ("final_layer_norm", "ffn_norm"),
    ("fc1", "ffn.up_proj"),
    ("fc2", "ffn.down_proj"),
)
"""A fairseq-style block's modules (HF name, zoo name): BART's, M2M-100's, XGLM's and BioGPT's."""


def fairseq_layers(prefix: str = "model") -> tuple[Rule, ...]:
    """The rows of the fairseq-style blocks BART and M2M-100 share: ``self_attn`` (+ ``encoder_attn`` in the
    decoder), ``fc1`` / ``fc2``, a LayerNorm after (post-norm) or before (pre-norm) each sub-layer."""
    parts = list(FAIRSEQ_LAYER)
    cross = [
        ("encoder_attn_layer_norm", "cross_attention_norm"),
        ("encoder_attn.q_proj", "cross_attention.q_proj"),
        ("encoder_attn.k_proj", "cross_attention.k_proj"),
        ("encoder_attn.v_proj", "cross_attention.v_proj"),
        ("encoder_attn.out_proj", "cross_attention.o_proj"),
    ]
    return tuple(
        Rule(f"{prefix}.{stack}.layers.{{i}}.{hf}.{kind}", f"{stack}.blocks.{{i}}.{zoo}.{kind}")
        for stack, rows in (("encoder", parts), ("decoder", parts + cross))
        for hf, zoo in rows
        for kind in ("weight", "bias")
    )


SHARED = Rule("model.shared.weight", "embedding.token.weight")
LOGITS_BIAS = Rule("final_logits_bias", "head.logits_bias", UNSQUEEZE)

RULES = (
    SHARED,
    *(
        rule
        for stack in ("encoder", "decoder")
        for rule in (
            Rule(f"model.{stack}.embed_positions.weight", f"{stack}.positional.embedding.weight"),
            Rule(f"model.{stack}.layernorm_embedding.weight", f"{stack}.embed_norm.weight"),
            Rule(f"model.{stack}.layernorm_embedding.bias", f"{stack}.embed_norm.bias"),
        )
    ),
    *fairseq_layers(),
    LOGITS_BIAS,
)

IGNORED = (
    "model.encoder.embed_tokens.weight",  # copies of model.shared.weight
    "model.decoder.embed_tokens.weight",
    "lm_head.weight",
)

SHARED_TABLE_WHY = (
    "zoo's encoder-decoder has one token table for the encoder, the decoder and the head; an untied BART has "
    "three (shared, encoder and decoder embed_tokens) besides lm_head"
)


STACKS = ("encoder", "decoder")


def encoder_decoder(model: str) -> Refused:
    """``is_decoder: true`` refused: ``{model}ForCausalLM``'s decoder alone, not the encoder-decoder zoo imports
    (Marian's, Pegasus's, mBART's, Blenderbot's)."""
    return Refused("is_decoder", lambda v: not v, f"zoo imports the encoder-decoder (not {model}ForCausalLM)")


def shared_table(family: str = "BART") -> Refused:
    """``tie_word_embeddings: false`` refused: zoo's encoder-decoder shares one token table (BART's, M2M-100's)."""
    return Refused(
        "tie_word_embeddings", lambda v: v is not False, SHARED_TABLE_WHY.replace("BART", family), export=True
    )


def named_rows(family: str, model: str | None = None) -> tuple[Row, ...]:
    """BART's rows whose refusals name the family (``model``: its class prefix, where not ``family``): the stacks
    alike, the activation, the shared table, the encoder-decoder."""
    activation = activation_option("activation_function", family)
    return (stacks(family), activation, shared_table(family), encoder_decoder(model or family))


def shared_key(key: str, twin: str, default: Any, reader: str) -> Computed:
    """The recipe field ``key``, which the config states twice: as ``key`` and as ``twin`` (None: the same);
    ``twin`` of its own is refused, as only ``reader`` reads ``key`` (Marian's decoder_vocab_size)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        value, other = config[key], config[twin]
        if other not in (None, value):
            raise HFImportError(f"{twin}={other!r} is not supported: {reader} reads {key}={value}")
        return {key: value}

    return Computed(
        key,
        keys={key: default, twin: None},
        paths=(key,),
        read=read,
        write=lambda recipe, weights: dict.fromkeys((key, twin), get(recipe, key)),
    )


def computed_tables(table: Callable[[Any], torch.Tensor]) -> tuple[Rule, ...]:
    """Each stack's position table, which transformers keeps as a frozen parameter but leaves out of its
    checkpoints: no tensor, the table computed from the recipe (``table(recipe)``) on import."""

    def computed(recipe: Any) -> Transform:
        return Transform("computed", lambda t: [table(recipe)], lambda t: [])

    return tuple(Rule((), f"{stack}.positional.table", computed) for stack in STACKS)


def same_stacks(config: dict[str, Any], family: str) -> None:
    """Refuse, by name, encoder and decoder blocks of different widths or heads (zoo's blocks are alike).

    Raises:
        HFImportError: decoder_attention_heads or decoder_ffn_dim differs from the encoder's.
    """
    problems = [
        f"{decoder}={config[decoder]!r} is not supported: {family} imports decoder blocks like the encoder's "
        f"({encoder}={config[encoder]!r}); zoo's recipe has one attention and one FFN for both stacks"
        for encoder, decoder in (
            ("encoder_attention_heads", "decoder_attention_heads"),
            ("encoder_ffn_dim", "decoder_ffn_dim"),
        )
        if config[encoder] != config[decoder]
    ]
    if problems:
        raise HFImportError(problems)


def stacks(family: str) -> Computed:
    """The heads and FFN width of the encoder's blocks, which must be the decoder's (``same_stacks``)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        same_stacks(config, family)
        return {"attention.num_heads": config["encoder_attention_heads"], "ffn.hidden": config["encoder_ffn_dim"]}

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        heads, hidden = recipe.attention.num_heads, weights["encoder.blocks.0.ffn.up_proj.weight"].shape[0]
        return {
            "encoder_attention_heads": heads,
            "decoder_attention_heads": heads,
            "encoder_ffn_dim": hidden,
            "decoder_ffn_dim": hidden,
        }

    keys = {
        "encoder_attention_heads": 16,
        "decoder_attention_heads": 16,
        "encoder_ffn_dim": 4096,
        "decoder_ffn_dim": 4096,
    }
    return Computed("stacks", keys=keys, paths=("attention.num_heads", "ffn.hidden"), read=read, write=write)


def layout_norms(pre_norm: bool) -> Any:
    """A requirement: the stack norms of the layout (post-norm: on the embeddings; pre-norm: at the end)."""

    def check(recipe: Any) -> str | None:
        embed, final = stack_norms(recipe)
        if (embed, final) != (not pre_norm, pre_norm):
            wanted = "final_norm only" if pre_norm else "embed_norm only"
            return f"embed_norm is {embed} and final_norm is {final}, needs {wanted}"
        return None

    return check


def norms(pre_norm: bool) -> Computed:
    """The stack norms of the layout, on import and as a requirement (``layout_norms``)."""
    return Computed(
        "stack norms",
        keys={},
        paths=("embed_norm", "final_norm"),
        read=lambda config, recipe: {"embed_norm": not pre_norm, "final_norm": pre_norm},
        write=lambda recipe, weights: {},
        requires={"stack norms": layout_norms(pre_norm)},
    )


LAYERDROP = "LayerDrop skips whole layers at random in training only; inference runs every layer"


def start(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """The decoder's start token: 2 (the eos token) in BART's configs, not the pad token (1)."""
    start = config["decoder_start_token_id"]
    return {} if start is None else {"decoder_start_token_id": start}


BART = family(
    "bart",
    classes=("BartForConditionalGeneration", "BartModel"),
    rules=RULES,
    ignored=IGNORED,
    head_prefixes=("lm_head.", "final_logits_bias"),
    recipes=("bart-base",),
    constants={
        "bos_token_id": None,
        "eos_token_id": None,
        "forced_eos_token_id": None,
        "is_encoder_decoder": True,
        "activation_dropout": 0.0,
        "encoder_layerdrop": 0.0,
        "decoder_layerdrop": 0.0,
    },
    rows=(
        Fixed("architecture", "encoder-decoder"),
        Fixed("block.norm_position", "post"),
        norms(pre_norm=False),
        Fixed("type_vocab_size", 0, imported=False),
        Require("layers", no_layer_overrides),
        Key("vocab_size", "vocab_size", 50265),
        Key("max_position_embeddings", "max_len", 1024),
        Key("d_model", "d_model", 1024),
        Key("encoder_layers", "num_layers", 12),
        Computed(
            "decoder layers",
            keys={"decoder_layers": 12},
            paths=("num_decoder_layers",),
            read=lambda config, recipe: {"num_decoder_layers": config["decoder_layers"]},
            write=lambda recipe, weights: {"decoder_layers": recipe.stack_layers("decoder")},
        ),
        pad(1),
        Require("embedding.padding_idx", padding_is_pad),
        Key("scale_embedding", "embedding.scale", False, read=bool),
        Computed(
            "decoder start",
            keys={"decoder_start_token_id": 2},
            paths=("decoder_start_token_id",),
            read=start,
            write=lambda recipe, weights: {"decoder_start_token_id": decoder_start(recipe)},
        ),
        LEARNED,
        Fixed("positional.offset", POSITION_OFFSET),
        Fixed("attention.type", "mha"),
        Require("attention.head_dim", default_head_dim),
        Key("attention_dropout", "attention.dropout", 0.0),
        stacks("BART"),
        Fixed("norm.type", "layernorm"),
        Fixed("norm.eps", 1e-5),  # the configs have no key for it
        *mlp("activation_function", "gelu", "BART"),
        Require("ffn.dropout", 0.0),
        Key("dropout", "dropout", 0.1),
        Fixed("head.type", "lm"),
        Fixed("head.tie_embeddings", True),
        # BartModel checkpoints (bart-base's) have no final_logits_bias: transformers reads it as zeros, and so does
        # zoo, without a buffer to carry
        holds("logits bias", "head.logits_bias", "final_logits_bias"),
        shared_table(),
        Refused(
            "is_decoder",
            lambda v: not v,
            "BartForConditionalGeneration is an encoder-decoder (not BartForCausalLM)",
        ),
        Unread("activation_dropout", "dropout after the FFN activation, in training only; inference is unaffected"),
        Unread("classifier_dropout", "BartForSequenceClassification's head, a class zoo does not import"),
        Unread("encoder_layerdrop", LAYERDROP),
        Unread("decoder_layerdrop", LAYERDROP),
        Unread("forced_eos_token_id", "a generation setting (generation_config.json), not part of the network"),
        Unread("init_std", "the std of a fresh initialisation; imported weights replace it"),
    ),
)
