"""OPT (``OPTForCausalLM``): learned positions read two rows on (``embed_positions`` has ``max_len + 2`` rows;
zoo's ``positional: {type: learned, offset: 2}``), biased MHA, LayerNorm, a two-layer ReLU MLP, a tied head.

``do_layer_norm_before`` (true in all sizes but 350m) is a pre-norm block with a final LayerNorm
(``_remove_final_layer_norm`` drops it: ``final_norm: false``); false (OPT-350m) a post-norm block without
one. ``word_embed_proj_dim`` below ``hidden_size`` (OPT-350m: 512 of 1024) is a narrower token table with
bias-free ``project_in`` / ``project_out`` around the stack: zoo's ``embedding.proj_dim`` and ``head.proj_dim``.
``enable_bias: false`` takes the biases off the attention and the MLP (never off the LayerNorms), and
``layer_norm_elementwise_affine: false`` every LayerNorm's scale and shift. OPT's LayerNorms keep PyTorch's
eps (1e-5): its config has no key for it.
"""

from __future__ import annotations

from typing import Any

from ._common import BIAS_FIELDS, attention_biases, defaults_except
from ._llama_legacy import token_embedding
from .mapping import (
    ACTIVATIONS,
    HF_ACTIVATIONS,
    Family,
    Rule,
    activation_option,
    default_head_dim,
    dtype_name,
    no_layer_overrides,
)

DECODER, LAYER, BLOCK = "model.decoder", "model.decoder.layers.{i}", "blocks.{i}"

POSITION_OFFSET = 2
"""OPT's position ``p`` reads row ``p + 2`` of ``embed_positions`` (a fairseq leftover)."""

RULES = (
    Rule(f"{DECODER}.embed_tokens.weight", "embedding.token.weight"),
    Rule(f"{DECODER}.project_in.weight", "embedding.project_in.weight"),  # word_embed_proj_dim != hidden_size
    Rule(f"{DECODER}.embed_positions.weight", "positional.embedding.weight"),
    *(
        Rule(f"{LAYER}.{hf}.{kind}", f"{BLOCK}.{zoo}.{kind}")
        for hf, zoo in (
            ("self_attn_layer_norm", "attention_norm"),  # before the attention (pre-norm) or after its add (post)
            ("self_attn.q_proj", "attention.q_proj"),
            ("self_attn.k_proj", "attention.k_proj"),
            ("self_attn.v_proj", "attention.v_proj"),
            ("self_attn.out_proj", "attention.o_proj"),
            ("final_layer_norm", "ffn_norm"),  # the layer's: before the MLP (pre-norm) or after its add (post)
            ("fc1", "ffn.up_proj"),
            ("fc2", "ffn.down_proj"),
        )
        for kind in ("weight", "bias")
    ),
    Rule(f"{DECODER}.final_layer_norm.weight", "final_norm.weight"),
    Rule(f"{DECODER}.final_layer_norm.bias", "final_norm.bias"),
    Rule(f"{DECODER}.project_out.weight", "head.project_out.weight"),
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied
)

IGNORED = ("lm_head.weight",)  # the tied copy of embed_tokens some checkpoints store

DEFAULTS: dict[str, Any] = {
    "vocab_size": 50272,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "ffn_dim": 3072,
    "max_position_embeddings": 2048,
    "do_layer_norm_before": True,
    "_remove_final_layer_norm": False,
    "word_embed_proj_dim": None,  # None: hidden_size
    "dropout": 0.1,
    "attention_dropout": 0.0,
    "num_attention_heads": 12,
    "activation_function": "relu",
    "enable_bias": True,
    "layer_norm_elementwise_affine": True,
    "tie_word_embeddings": True,
    "pad_token_id": 1,
}

OPTIONS = (activation_option("activation_function", "OPT"),)


def stack_norms(recipe: Any) -> tuple[bool, bool]:
    """(embedding norm, final norm) as the recipe builds them: unset, they follow the block layout."""
    pre = recipe.block.pre_norm
    embed = recipe.embed_norm if recipe.embed_norm is not None else not pre
    final = recipe.final_norm if recipe.final_norm is not None else pre
    return embed, final


def padding_is_pad(recipe: Any) -> str | None:
    """A requirement: the token table's padding row is ``pad_token_id`` (HF builds ``nn.Embedding(...,
    padding_idx=pad_token_id)``), none without one."""
    pad = recipe.pad_token_id
    wanted = pad if pad is not None and pad < recipe.vocab_size else None
    if recipe.embedding.padding_idx != wanted:
        return f"embedding.padding_idx is {recipe.embedding.padding_idx!r}, needs pad_token_id ({wanted!r})"
    return None


def opt_norms(recipe: Any) -> str | None:
    """A requirement: no embedding norm; a final norm only in a pre-norm stack (or none: _remove_final_layer_norm)."""
    embed, final = stack_norms(recipe)
    if embed:
        return "embed_norm is on, needs false (OPT does not normalise its embeddings)"
    if final and not recipe.block.pre_norm:
        return "final_norm is on in a post-norm stack, needs false (OPT-350m's layout has no final LayerNorm)"
    return None


def opt_projections(recipe: Any) -> str | None:
    """A requirement: the head projects to the token table's width (word_embed_proj_dim), which differs from d_model."""
    table, head = recipe.embedding.proj_dim, recipe.head.proj_dim
    if table != head:
        return f"head.proj_dim is {head!r}, needs embedding.proj_dim ({table!r}): OPT has one word_embed_proj_dim"
    if table == recipe.d_model:
        return f"embedding.proj_dim equals d_model ({table}): OPT projects only a narrower table; leave it out"
    return None


def same_biases(recipe: Any) -> str | None:
    """A requirement: the MLP biased exactly when the attention is (OPT's one ``enable_bias``)."""
    attention = recipe.attention.biases()["q"]
    if recipe.ffn.bias != attention:
        return f"ffn.bias is {recipe.ffn.bias}, needs the attention's ({attention}): OPT has one enable_bias"
    return None


REQUIREMENTS = {
    "architecture": "decoder",
    "block.norm_position": ("pre", "post"),
    "block.*": defaults_except("block", "norm_position"),
    "stack norms": opt_norms,
    "type_vocab_size": 0,
    "layers": no_layer_overrides,
    "embedding.type": "token",
    "embedding.*": defaults_except("embedding", "padding_idx", "proj_dim"),
    "embedding.padding_idx": padding_is_pad,
    "positional.type": "learned",
    "positional.offset": POSITION_OFFSET,
    "positional.*": defaults_except("positional", "offset"),
    "attention.type": "mha",
    "attention.head_dim": default_head_dim,
    "attention.*": defaults_except("attention", "num_heads", "head_dim", "dropout", *BIAS_FIELDS),
    "attention.biases": attention_biases(o_like_qkv=True),
    "norm.type": "layernorm",
    "norm.*": defaults_except("norm", "affine"),  # eps 1e-5: OPT's config has no key for it
    "ffn.type": "mlp",
    "ffn.activation": tuple(HF_ACTIVATIONS),
    "ffn.*": defaults_except("ffn", "hidden", "activation", "bias"),
    "ffn.bias": same_biases,
    "head.type": "lm",
    "head.*": defaults_except("head", "tie_embeddings", "proj_dim"),
    "head.proj_dim": opt_projections,
}


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    d_model = config["hidden_size"]
    width = config["word_embed_proj_dim"] or d_model
    pre = bool(config["do_layer_norm_before"])
    bias = bool(config["enable_bias"])
    embedding = token_embedding(config)
    head: dict[str, Any] = {"type": "lm", "tie_embeddings": bool(config["tie_word_embeddings"])}
    if width != d_model:
        embedding["proj_dim"] = head["proj_dim"] = width
    return {
        "architecture": "decoder",
        "vocab_size": config["vocab_size"],
        "pad_token_id": config["pad_token_id"],
        "d_model": d_model,
        "num_layers": config["num_hidden_layers"],
        "max_len": config["max_position_embeddings"],
        "norm_position": "pre" if pre else "post",
        "embed_norm": False,
        "final_norm": pre and not config["_remove_final_layer_norm"],
        "embedding": embedding,
        "positional": {"type": "learned", "offset": POSITION_OFFSET},
        "attention": {
            "type": "mha",
            "num_heads": config["num_attention_heads"],
            "bias": bias,
            "dropout": config["attention_dropout"],
        },
        "norm": {"type": "layernorm", "affine": bool(config["layer_norm_elementwise_affine"])},
        "ffn": {
            "type": "mlp",
            "hidden": config["ffn_dim"],
            "activation": ACTIVATIONS[config["activation_function"]],
            "bias": bias,
        },
        "head": head,
        "dropout": config["dropout"],
    }


def config(recipe, weights) -> dict[str, Any]:
    pre = recipe.block.pre_norm
    _, final = stack_norms(recipe)
    return {
        "vocab_size": recipe.vocab_size,
        "hidden_size": recipe.d_model,
        "num_hidden_layers": recipe.num_layers,
        "ffn_dim": weights["blocks.0.ffn.up_proj.weight"].shape[0],
        "max_position_embeddings": recipe.max_len,
        "do_layer_norm_before": pre,
        "_remove_final_layer_norm": pre and not final,
        "word_embed_proj_dim": recipe.embedding.proj_dim or recipe.d_model,
        "dropout": recipe.dropout,
        "attention_dropout": recipe.attention.dropout,
        "num_attention_heads": recipe.attention.num_heads,
        "activation_function": HF_ACTIVATIONS[recipe.ffn.activation],
        "layerdrop": 0.0,
        "enable_bias": recipe.attention.biases()["q"],
        "layer_norm_elementwise_affine": recipe.norm.affine,
        "tie_word_embeddings": recipe.head.tie_embeddings,
        "pad_token_id": recipe.pad_token_id,
        "bos_token_id": None,
        "eos_token_id": None,
        "dtype": dtype_name(weights),
    }


OPT = Family(
    name="opt",
    model_type="opt",
    classes=("OPTForCausalLM",),
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("opt-125m",),
    unread={
        "init_std": "the std of a fresh initialisation; imported weights replace it",
        "layerdrop": "LayerDrop skips whole layers at random in training only; inference runs every layer, as zoo does",
    },
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "OPTForCausalLM",
)
