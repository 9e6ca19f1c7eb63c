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

from typing import Any

from zoo.architectures import decoder_start
from zoo.errors import HFImportError

from ._common import defaults_except
from ._llama_legacy import token_embedding
from .mapping import (
    ACTIVATIONS,
    HF_ACTIVATIONS,
    UNSQUEEZE,
    Family,
    Option,
    Rule,
    activation_option,
    default_head_dim,
    dtype_name,
    no_layer_overrides,
)
from .opt import padding_is_pad, stack_norms

POSITION_OFFSET = 2
"""BART's position ``p`` reads row ``p + 2`` of each ``embed_positions`` (a fairseq leftover, as in OPT)."""


def fairseq_layers(prefix: str = "model") -> tuple[Rule, ...]:
    """The rows of the fairseq-style blocks BART and M2M-100 share: ``self_attn`` (+ ``encoder_attn`` in the
    decoder), ``fc1`` / ``fc2``, a LayerNorm after (post-norm) or before (pre-norm) each sub-layer."""
    parts = [
        ("self_attn_layer_norm", "attention_norm"),
        ("self_attn.q_proj", "attention.q_proj"),
        ("self_attn.k_proj", "attention.k_proj"),
        ("self_attn.v_proj", "attention.v_proj"),
        ("self_attn.out_proj", "attention.o_proj"),
        ("final_layer_norm", "ffn_norm"),
        ("fc1", "ffn.up_proj"),
        ("fc2", "ffn.down_proj"),
    ]
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


RULES = (
    Rule("model.shared.weight", "embedding.token.weight"),
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
    Rule("final_logits_bias", "head.logits_bias", UNSQUEEZE),
)

IGNORED = (
    "model.encoder.embed_tokens.weight",  # copies of model.shared.weight
    "model.decoder.embed_tokens.weight",
    "lm_head.weight",
)

DEFAULTS: dict[str, Any] = {
    "vocab_size": 50265,
    "max_position_embeddings": 1024,
    "d_model": 1024,
    "encoder_layers": 12,
    "decoder_layers": 12,
    "encoder_attention_heads": 16,
    "decoder_attention_heads": 16,
    "encoder_ffn_dim": 4096,
    "decoder_ffn_dim": 4096,
    "activation_function": "gelu",
    "dropout": 0.1,
    "attention_dropout": 0.0,
    "scale_embedding": False,
    "pad_token_id": 1,
    "decoder_start_token_id": 2,
    "tie_word_embeddings": True,
}

SHARED_TABLE_WHY = (
    "zoo's encoder-decoder has one token table for the encoder, the decoder and the head; an untied BART has "
    "three (shared, encoder and decoder embed_tokens) besides lm_head"
)

OPTIONS = (
    activation_option("activation_function", "BART"),
    Option("tie_word_embeddings", lambda v: v is not False, SHARED_TABLE_WHY),
    Option("is_decoder", lambda v: not v, "BartForConditionalGeneration is an encoder-decoder (not BartForCausalLM)"),
)

UNREAD = {
    "activation_dropout": "dropout after the FFN activation, in training only; inference is unaffected",
    "classifier_dropout": "BartForSequenceClassification's head, a class zoo does not import",
    "encoder_layerdrop": "LayerDrop skips whole layers at random in training only; inference runs every layer",
    "decoder_layerdrop": "LayerDrop skips whole layers at random in training only; inference runs every layer",
    "forced_eos_token_id": "a generation setting (generation_config.json), not part of the network",
    "init_std": "the std of a fresh initialisation; imported weights replace it",
}


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


def seq2seq_recipe(config: dict[str, Any], *, pre_norm: bool, positional: dict[str, Any]) -> dict[str, Any]:
    """The recipe of a fairseq-style encoder-decoder config (BART's and M2M-100's keys)."""
    out: dict[str, Any] = {
        "architecture": "encoder-decoder",
        "vocab_size": config["vocab_size"],
        "pad_token_id": config["pad_token_id"],
        "d_model": config["d_model"],
        "num_layers": config["encoder_layers"],
        "num_decoder_layers": config["decoder_layers"],
        "max_len": config["max_position_embeddings"],
        "norm_position": "pre" if pre_norm else "post",
        "embed_norm": not pre_norm,
        "final_norm": pre_norm,
        "embedding": {**token_embedding(config), "scale": bool(config["scale_embedding"])},
        "positional": positional,
        "attention": {
            "type": "mha",
            "num_heads": config["encoder_attention_heads"],
            "dropout": config["attention_dropout"],
        },
        "norm": {"type": "layernorm", "eps": 1e-5},
        "ffn": {
            "type": "mlp",
            "hidden": config["encoder_ffn_dim"],
            "activation": ACTIVATIONS[config["activation_function"]],
        },
        "head": {"type": "lm", "tie_embeddings": True},
        "dropout": config["dropout"],
    }
    start = config["decoder_start_token_id"]
    if start is not None:
        out["decoder_start_token_id"] = start
    return out


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    same_stacks(config, "BART")
    out = seq2seq_recipe(config, pre_norm=False, positional={"type": "learned", "offset": POSITION_OFFSET})
    # BartModel checkpoints (bart-base's) have no final_logits_bias: transformers reads it as zeros, and so
    # does zoo, without a buffer to carry.
    out["head"]["logits_bias"] = names is None or "final_logits_bias" in names
    return out


def seq2seq_config(recipe, weights) -> dict[str, Any]:
    """The config keys BART and M2M-100 share, from a fitting recipe."""
    heads = recipe.attention.num_heads
    hidden = weights["encoder.blocks.0.ffn.up_proj.weight"].shape[0]
    return {
        "vocab_size": recipe.vocab_size,
        "max_position_embeddings": recipe.max_len,
        "d_model": recipe.d_model,
        "encoder_layers": recipe.num_layers,
        "decoder_layers": recipe.stack_layers("decoder"),
        "encoder_attention_heads": heads,
        "decoder_attention_heads": heads,
        "encoder_ffn_dim": hidden,
        "decoder_ffn_dim": hidden,
        "activation_function": HF_ACTIVATIONS[recipe.ffn.activation],
        "dropout": recipe.dropout,
        "attention_dropout": recipe.attention.dropout,
        "activation_dropout": 0.0,
        "encoder_layerdrop": 0.0,
        "decoder_layerdrop": 0.0,
        "scale_embedding": recipe.embedding.scale,
        "pad_token_id": recipe.pad_token_id,
        "decoder_start_token_id": decoder_start(recipe),
        "bos_token_id": None,
        "eos_token_id": None,
        "forced_eos_token_id": None,
        "tie_word_embeddings": True,
        "is_encoder_decoder": True,
        "dtype": dtype_name(weights),
    }


def config(recipe, weights) -> dict[str, Any]:
    return seq2seq_config(recipe, weights)


def layout_norms(pre_norm: bool) -> Any:
    """A requirement: the stack norms of the layout (post-norm: on the embeddings; pre-norm: at the end)."""

    def check(recipe: Any) -> str | None:
        embed, final = stack_norms(recipe)
        if (embed, final) != (not pre_norm, pre_norm):
            wanted = "final_norm only" if pre_norm else "embed_norm only"
            return f"embed_norm is {embed} and final_norm is {final}, needs {wanted}"
        return None

    return check


def seq2seq_requirements(norm_position: str) -> dict[str, Any]:
    """What BART (post-norm) and M2M-100 (pre-norm) ask of a recipe, positions and head aside."""
    return {
        "architecture": "encoder-decoder",
        "block.norm_position": norm_position,
        "block.*": defaults_except("block", "norm_position"),
        "stack norms": layout_norms(norm_position == "pre"),
        "type_vocab_size": 0,
        "layers": no_layer_overrides,
        "embedding.type": "token",
        "embedding.*": defaults_except("embedding", "padding_idx", "scale"),
        "embedding.padding_idx": padding_is_pad,
        "attention.type": "mha",
        "attention.head_dim": default_head_dim,
        "attention.*": defaults_except("attention", "num_heads", "head_dim", "dropout"),
        "norm.type": "layernorm",
        "norm.*": defaults_except("norm"),  # eps 1e-5: the configs have no key for it
        "ffn.type": "mlp",
        "ffn.activation": tuple(HF_ACTIVATIONS),
        "ffn.*": defaults_except("ffn", "hidden", "activation"),
        "head.type": "lm",
    }


REQUIREMENTS = {
    **seq2seq_requirements("post"),
    "positional.type": "learned",
    "positional.offset": POSITION_OFFSET,
    "positional.*": defaults_except("positional", "offset"),
    "head.tie_embeddings": True,
    "head.*": defaults_except("head", "tie_embeddings", "logits_bias"),
}

BART = Family(
    name="bart",
    model_type="bart",
    classes=("BartForConditionalGeneration", "BartModel"),
    base_prefix="model.",
    head_prefixes=("lm_head.", "final_logits_bias"),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("bart-base",),
    unread=UNREAD,
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "BartForConditionalGeneration",
)
