"""Phi-1, Phi-1.5 and Phi-2 (``PhiForCausalLM``): GPT-NeoX's network with one shared norm for attention and MLP in
parallel, RoPE over the first ``partial_rotary_factor`` of each head, MHA or GQA (of ``head_dim`` where a config
gives one), optional LayerNorms of the queries and keys over each head (``qk_layernorm``: one norm shared by all
heads, zoo's ``qk_norm``), and an untied LM head with a bias."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from zoo.errors import HFImportError

from .gpt_neox import GPT_NEOX
from .mapping import Rule, activation_option
from .rows import HEADS, PAD, biases
from .rows_neox import PARALLEL_SHARED, biased_head, dropout, linear_rules, qk_layernorm, rope

LAYER = ("input_layernorm attention_norm", "self_attn.dense attention.o_proj", "mlp.fc1 ffn.up_proj")
QKV = (*(f"self_attn.{p}_proj attention.{p}_proj" for p in "qkv"), "mlp.fc2 ffn.down_proj")
QK_NORMS = ("self_attn.q_layernorm attention.q_norm", "self_attn.k_layernorm attention.k_norm")  # with qk_layernorm


def implied(config: dict[str, Any]) -> int:
    return config["hidden_size"] // config["num_attention_heads"]


def read_heads(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """HEADS, leaving out a ``head_dim`` equal to hidden_size / heads (PhiConfig has no such field, but
    PhiAttention reads one a config.json gives)."""
    out = HEADS.read(config, recipe)
    return {k: v for k, v in out.items() if k != "attention.head_dim" or v != implied(config)}


def check_qk_norm(config: dict[str, Any]) -> None:
    """Phi's q/k LayerNorms are hidden_size / heads wide, whatever the heads' width (which then fails)."""
    if (config["head_dim"] or implied(config)) != implied(config):
        raise HFImportError(
            f"qk_layernorm with head_dim={config['head_dim']} is not supported: Phi's query/key norms are "
            f"hidden_size / heads = {implied(config)} wide (transformers fails too)"
        )


PHI = GPT_NEOX.derive(
    "phi",
    classes=("PhiForCausalLM",),
    rules=(
        Rule("model.embed_tokens.weight", "embedding.token.weight"),
        *linear_rules("model.layers.{i}.", "blocks.{i}.", *LAYER, *QKV, *QK_NORMS),
        *linear_rules("", "", "model.final_layernorm final_norm", "lm_head head.proj"),
    ),
    ignored=("model.layers.{i}.self_attn.rotary_emb.inv_freq",),  # a buffer of older checkpoints
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    recipes=("phi-2",),
    drop=("use_parallel_residual", "tie_word_embeddings", "classifier_dropout", "is_decoder"),
    rows=(
        replace(HEADS, read=read_heads),
        PAD,
        *PARALLEL_SHARED,
        biases(True, True),
        qk_layernorm(
            False,
            lambda recipe: recipe.attention.head_dim_for(recipe.d_model) * recipe.attention.num_heads == recipe.d_model,
            "the norm's over heads of d_model / num_heads (Phi's)",
            check=check_qk_norm,
        ),
        rope(share=0.5, head_dim=True),
        activation_option("hidden_act", "Phi"),
        dropout("resid_pdrop", "embd_pdrop"),
        *biased_head("Phi"),
    ),
    defaults={"vocab_size": 51200, "hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 32}
    | {"intermediate_size": 8192, "hidden_act": "gelu_new"},
)
