"""Falcon (``FalconForCausalLM``): LayerNorm pre-norm decoders with RoPE over whole heads (rotate-half pairs),
a GELU MLP, one ``bias`` flag for every projection and, by default, a tied head. Three layouts of a block:

- Falcon-7B (``new_decoder_architecture: false``, ``parallel_attn: true``): attention and MLP read one shared
  norm in parallel; ``multi_query`` gives one key/value head (MQA), else one per query head (MHA);
- ``parallel_attn: false``: the sequential block (``input_layernorm``, then ``post_attention_layernorm``);
- Falcon-40B/180B (``new_decoder_architecture: true``): ``num_kv_heads`` key/value heads (GQA) and in
  parallel two norms (``ln_attn``, ``ln_mlp``), or one shared with ``num_ln_in_parallel_attn: 1``.

The fused ``query_key_value`` holds, per key/value head, its query heads, its key and its value (zoo's
``grouped_qkv``: Falcon-7B's ``[q (H*D) | k (D) | v (D)]`` is the one-group case). ALiBi models are refused.
"""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from .mapping import Rule, default_head_dim
from .rope import ROPE_OPTIONS
from .rows_classic import mlp
from .rows_neox import decoder, dropout, fused_qkv, layernorm, linear_rules, lm_head, one_bias, rope, wider
from .table import Computed, Refused, Require, Unread, family

LAYER, BLOCK = "transformer.h.{i}", "blocks.{i}"


def _norm(hf: str, zoo: str, when) -> tuple[Rule, ...]:
    return tuple(Rule(f"{LAYER}.{hf}.{k}", f"{BLOCK}.{zoo}.{k}", when=when) for k in ("weight", "bias"))


RULES = (
    Rule("transformer.word_embeddings.weight", "embedding.token.weight"),
    # Which norms a layer has is its block layout: the rows of the other layouts are not in force.
    *_norm("input_layernorm", "attention_norm", lambda r: not r.block.parallel or r.block.shared_norm),
    *_norm("post_attention_layernorm", "ffn_norm", lambda r: not r.block.parallel),
    *_norm("ln_attn", "attention_norm", lambda r: r.block.parallel and not r.block.shared_norm),
    *_norm("ln_mlp", "ffn_norm", lambda r: r.block.parallel and not r.block.shared_norm),
    *fused_qkv(f"{LAYER}.self_attention.query_key_value"),
    *linear_rules(f"{LAYER}.", f"{BLOCK}.", "self_attention.dense attention.o_proj", "mlp.dense_h_to_4h ffn.up_proj"),
    *linear_rules(f"{LAYER}.", f"{BLOCK}.", "mlp.dense_4h_to_h ffn.down_proj"),
    *linear_rules("transformer.", "", "ln_f final_norm"),
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied
)


def read_layout(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """zoo's block and heads of a Falcon config: its three block layouts, and MQA, MHA or GQA.

    Raises:
        HFImportError: a combination FalconDecoderLayer cannot run (it fails in transformers too).
    """
    heads = config["num_attention_heads"]
    kv_heads = config["num_kv_heads"] or heads
    norms = config["num_ln_in_parallel_attn"]
    if config["new_decoder_architecture"]:
        if not config["parallel_attn"]:
            raise HFImportError(
                "new_decoder_architecture=True with parallel_attn=False is not supported: FalconDecoderLayer "
                "then has no norm for its MLP (transformers fails too)"
            )
        if norms not in (None, 1, 2):
            raise HFImportError(f"num_ln_in_parallel_attn={norms!r} is not supported: Falcon has 1 or 2 norms")
        block = {"block.parallel": True, "block.shared_norm": norms == 1}
    else:
        if config["parallel_attn"] and norms == 2:
            raise HFImportError(
                "num_ln_in_parallel_attn=2 without new_decoder_architecture is not supported: FalconDecoderLayer "
                "builds ln_attn and ln_mlp but reads input_layernorm (transformers fails too)"
            )
        if not config["multi_query"] and kv_heads != heads:
            raise HFImportError(
                f"num_kv_heads={kv_heads} with multi_query=False and the old decoder is not supported: that fused "
                f"query_key_value holds {heads} key/value heads (transformers fails too)"
            )
        kv_heads = 1 if config["multi_query"] else heads
        block = {"block.parallel": True, "block.shared_norm": True} if config["parallel_attn"] else {}
    derived = config["num_key_value_heads"]  # what transformers 5.25+ says the layers produce
    if derived is not None and derived != kv_heads:
        raise HFImportError(
            f"num_key_value_heads={derived} is not supported: num_kv_heads, multi_query and new_decoder_architecture "
            f"give {kv_heads} key/value heads, as FalconAttention builds them"
        )
    attention: dict[str, Any] = {"attention.type": "mha", "attention.num_heads": heads}
    if kv_heads == 1 and heads > 1:
        attention["attention.type"] = "mqa"
    elif kv_heads != heads:
        attention.update({"attention.type": "gqa", "attention.num_kv_heads": kv_heads})
    return {**block, **attention}


def write_layout(recipe: Any, weights: Any) -> dict[str, Any]:
    """The config keys that say which of Falcon's block layouts ``recipe`` has, and its heads."""
    heads, kv_heads = recipe.attention.num_heads, recipe.attention.num_kv_heads
    parallel, shared = recipe.block.parallel, recipe.block.shared_norm
    new = parallel and (not shared or kv_heads not in (1, heads))
    return {
        "num_attention_heads": heads,
        "new_decoder_architecture": new,
        "num_kv_heads": kv_heads,
        "num_ln_in_parallel_attn": (1 if shared else 2) if new else None,
        "parallel_attn": parallel,
        "multi_query": kv_heads == 1,
    }


def expressible(recipe: Any) -> str | None:
    """A requirement: a sequential block has one key/value head or one per query head (the old decoder's
    ``multi_query``); grouped heads come with the new decoder, which is always parallel."""
    heads, kv_heads = recipe.attention.num_heads, recipe.attention.num_kv_heads
    if not recipe.block.parallel and kv_heads not in (1, heads):
        return (
            f"attention has {kv_heads} key/value heads for {heads} query heads in a sequential block; Falcon "
            "groups key/value heads only in its parallel (new) decoder: set block.parallel or use 1 or "
            f"{heads} key/value heads"
        )
    return None


FALCON = family(
    "falcon",
    classes=("FalconForCausalLM",),
    rules=RULES,
    ignored=("lm_head.weight",),  # the tied copy some checkpoints store
    base_prefix="transformer.",
    recipes=("falcon-7b",),
    constants={"bos_token_id": None, "eos_token_id": None, "attention_dropout": 0.0},
    rows=(
        *decoder(65024, 4544, 32, 2048),
        Computed(
            "layout",
            keys={
                "num_attention_heads": 71,
                "num_kv_heads": None,
                "new_decoder_architecture": False,
                "multi_query": True,
                "parallel_attn": True,
                "num_ln_in_parallel_attn": None,
                "num_key_value_heads": None,
            },
            paths=("block.parallel", "block.shared_norm", "attention.num_heads", "attention.num_kv_heads"),
            read=read_layout,
            write=write_layout,
            legacy=("num_key_value_heads",),  # transformers 5.25 derives it from the keys above: read to check it
            requires={"attention.type": ("mha", "gqa", "mqa"), "attention.num_kv_heads": expressible},
        ),
        Require("attention.head_dim", default_head_dim),
        *one_bias("bias", False, "Falcon"),
        Refused(
            "alibi",
            lambda v: not v,
            "Falcon's ALiBi rounds its slopes to bfloat16 and scales the bias by 1/sqrt(head_dim) with the scores, "
            "over key positions counted from the first real token; zoo's alibi bias is exact and unscaled",
            export=False,
        ),
        rope("rope_theta", None),
        *ROPE_OPTIONS,
        Refused(
            "rope_parameters.partial_rotary_factor",
            lambda v: v in (None, 1.0),
            "Falcon's default rope rotates whole heads and its scaled ones this fraction: zoo imports whole heads only",
        ),
        *layernorm("layer_norm_epsilon"),
        *mlp("activation", "gelu", "Falcon"),
        wider("ffn_hidden_size", "hidden_size"),
        *lm_head(tied=True),
        dropout("hidden_dropout"),
        Unread(
            "attention_dropout",
            "Falcon's rotary attention drops no attention weights (its sequential block uses it on the attention "
            "output, in training only): zoo imports no attention dropout",
        ),
    ),
)
