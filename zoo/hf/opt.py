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

from .mapping import Rule, no_layer_overrides
from .rows_classic import LEARNED, mha, mlp, pad, width
from .rows_neox import dropout, linear_rules, lm_head, one_bias, sizes
from .table import Computed, Fixed, Key, Require, Unread, family

DECODER, LAYER, BLOCK = "model.decoder.", "model.decoder.layers.{i}.", "blocks.{i}."

RULES = (
    Rule(f"{DECODER}embed_tokens.weight", "embedding.token.weight"),
    Rule(f"{DECODER}project_in.weight", "embedding.project_in.weight"),  # word_embed_proj_dim != hidden_size
    Rule(f"{DECODER}embed_positions.weight", "positional.embedding.weight"),
    # Each layer's norms sit before their sub-layer (pre-norm) or after its residual add (post-norm).
    *linear_rules(LAYER, BLOCK, "self_attn_layer_norm attention_norm", "final_layer_norm ffn_norm"),
    *linear_rules(LAYER, BLOCK, *(f"self_attn.{p}_proj attention.{p}_proj" for p in "qkv")),
    *linear_rules(LAYER, BLOCK, "self_attn.out_proj attention.o_proj", "fc1 ffn.up_proj", "fc2 ffn.down_proj"),
    *linear_rules(DECODER, "", "final_layer_norm final_norm"),
    Rule(f"{DECODER}project_out.weight", "head.project_out.weight"),
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied
)


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


def read_projections(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    width = config["word_embed_proj_dim"] or config["hidden_size"]
    return {} if width == config["hidden_size"] else {"embedding.proj_dim": width, "head.proj_dim": width}


OPT = family(
    "opt",
    classes=("OPTForCausalLM",),
    rules=RULES,
    ignored=("lm_head.weight",),  # the tied copy of embed_tokens some checkpoints store
    recipes=("opt-125m",),
    constants={"bos_token_id": None, "eos_token_id": None, "layerdrop": 0.0},
    rows=(
        Fixed("architecture", "decoder"),
        Key(
            "do_layer_norm_before",
            "block.norm_position",
            True,
            read=lambda pre: "pre" if pre else "post",
            write=lambda p: p == "pre",
        ),
        Require("block.norm_position", ("pre", "post")),
        Computed(
            "stack norms",
            keys={"_remove_final_layer_norm": False},
            paths=("embed_norm", "final_norm"),
            read=lambda config, recipe: {
                "embed_norm": False,
                "final_norm": bool(config["do_layer_norm_before"]) and not config["_remove_final_layer_norm"],
            },
            write=lambda recipe, weights: {
                "_remove_final_layer_norm": recipe.block.pre_norm and not stack_norms(recipe)[1]
            },
            requires={"stack norms": opt_norms},
        ),
        Fixed("type_vocab_size", 0, imported=False),
        Require("layers", no_layer_overrides),
        *sizes(50272, 768, 12, 2048),
        pad(1),
        Require("embedding.padding_idx", padding_is_pad),
        Computed(
            "word_embed_proj_dim",
            keys={"word_embed_proj_dim": None},  # None: hidden_size
            paths=("embedding.proj_dim", "head.proj_dim"),
            read=read_projections,
            write=lambda recipe, weights: {"word_embed_proj_dim": recipe.embedding.proj_dim or recipe.d_model},
            requires={"head.proj_dim": opt_projections},
        ),
        LEARNED,
        Fixed("positional.offset", 2),  # position p reads row p + 2 of embed_positions (a fairseq leftover)
        *mha("num_attention_heads", 12, "attention_dropout", 0.0),
        *one_bias("enable_bias", True, "OPT"),
        Fixed("norm.type", "layernorm"),
        Key("layer_norm_elementwise_affine", "norm.affine", True, read=bool),
        *mlp("activation_function", "relu", "OPT"),
        width("ffn_dim", 3072),
        *lm_head(tied=True),
        dropout("dropout", default=0.1),
        Unread("init_std", "the std of a fresh initialisation; imported weights replace it"),
        Unread(
            "layerdrop",
            "LayerDrop skips whole layers at random in training only; inference runs every layer, as zoo does",
        ),
    ),
)
