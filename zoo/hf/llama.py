"""Llama (``LlamaForCausalLM``): an RMSNorm pre-norm decoder with RoPE (half rotation, zoo's default),
grouped-query attention and a SwiGLU FFN. ``hidden_act: gelu_pytorch_tanh`` is zoo's ``geglu`` with
``approximate: tanh``; a ``sliding_window`` on a Llama config is refused (LlamaForCausalLM would ignore it).
Most decoders derive from Llama's table (Mistral, Mixtral, Qwen2, Helium, ...).
"""

from __future__ import annotations

from .mapping import Rule
from .rows import ACTIVATION, ACTS, GATED, PRE_NORM_DECODER, gated_ffn, hidden_act
from .table import Key, Refused, Unread, family

__all__ = ["ACTS", "GATED", "LLAMA", "hidden_act"]

LAYER, BLOCK = "model.layers.{i}", "blocks.{i}"

ATTENTION = tuple(
    Rule(f"{LAYER}.self_attn.{p}_proj.{kind}", f"{BLOCK}.attention.{p}_proj.{kind}")
    for p in "qkvo"
    for kind in ("weight", "bias")
)

COMMON = (
    Rule("model.embed_tokens.weight", "embedding.token.weight"),
    Rule(f"{LAYER}.input_layernorm.weight", f"{BLOCK}.attention_norm.weight"),
    *ATTENTION,
    Rule(f"{LAYER}.post_attention_layernorm.weight", f"{BLOCK}.ffn_norm.weight"),
    Rule("model.norm.weight", "final_norm.weight"),
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied
)

LLAMA_RULES = (
    *COMMON,
    *(
        Rule(f"{LAYER}.mlp.{p}_proj.{kind}", f"{BLOCK}.ffn.{p}_proj.{kind}")
        for p in ("gate", "up", "down")
        for kind in ("weight", "bias")
    ),
)

IGNORED = (
    "model.layers.{i}.self_attn.rotary_emb.inv_freq",  # a buffer of older checkpoints
    "lm_head.weight",  # the tied copy of embed_tokens some checkpoints store
)


LLAMA = family(
    "llama",
    classes=("LlamaForCausalLM",),
    rules=LLAMA_RULES,
    ignored=IGNORED,
    recipes=("llama-3.2-1b", "llama-3-70b"),
    rows=(
        *PRE_NORM_DECODER,
        Key("attention_bias", "attention.bias", False, read=bool),
        Key("attention_dropout", "attention.dropout", 0.0),
        gated_ffn(),
        ACTIVATION,
        Key("mlp_bias", "ffn.bias", False, read=bool),
        Refused(
            "sliding_window",
            lambda v: v is None,
            "LlamaForCausalLM ignores it and attends to every key, so the checkpoint was likely trained with a "
            "window it does not apply; import it as model_type mistral (MistralForCausalLM applies the window)",
        ),
        Unread("pretraining_tp", "how Meta sliced the projections across devices to pretrain: the same matmuls"),
    ),
)
