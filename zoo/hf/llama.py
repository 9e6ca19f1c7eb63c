"""Llama (``LlamaForCausalLM``) and Mixtral (``MixtralForCausalLM``): RMSNorm pre-norm decoders with RoPE
(half rotation, zoo's default) and grouped-query attention; Llama's FFN is SwiGLU, Mixtral's a top-k
mixture of SwiGLU experts (``w1`` gate, ``w3`` up, ``w2`` down). ``hidden_act: gelu_pytorch_tanh`` is zoo's
``geglu`` with ``approximate: tanh``; Mixtral's ``sliding_window`` is the attention's ``window``, while a
``sliding_window`` on a Llama config is refused (LlamaForCausalLM would ignore it). Mistral, Qwen2 and Qwen3
derive from Llama's table.

Transformers 5 holds Mixtral's experts fused in memory (``mlp.experts.gate_up_proj``, ``down_proj``) but
``save_pretrained`` writes the per-expert layout; both import.
"""

from __future__ import annotations

from typing import Any

import torch

from .mapping import Rule
from .rows import ACTIVATION, ACTS, GATED, PRE_NORM_DECODER, gated_ffn, hidden_act
from .table import Fixed, Key, Refused, Require, Unread, family

__all__ = ["ACTS", "GATED", "LLAMA", "MIXTRAL", "hidden_act"]

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

MOE, EXPERT = f"{LAYER}.block_sparse_moe", f"{BLOCK}.ffn.experts.{{e}}"

MIXTRAL_RULES = (
    *COMMON,
    Rule(f"{MOE}.gate.weight", f"{BLOCK}.ffn.router.weight"),
    Rule(f"{MOE}.experts.{{e}}.w1.weight", f"{EXPERT}.gate_proj.weight"),
    Rule(f"{MOE}.experts.{{e}}.w3.weight", f"{EXPERT}.up_proj.weight"),
    Rule(f"{MOE}.experts.{{e}}.w2.weight", f"{EXPERT}.down_proj.weight"),
)

IGNORED = (
    "model.layers.{i}.self_attn.rotary_emb.inv_freq",  # a buffer of older checkpoints
    "lm_head.weight",  # the tied copy of embed_tokens some checkpoints store
)


def unfuse_experts(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Transformers 5's in-memory Mixtral layout -> the per-expert layout that ``save_pretrained`` writes.

    ``mlp.experts.gate_up_proj`` (X, 2H, E) holds each expert's w1 (gate) then w3 (up);
    ``mlp.experts.down_proj`` (X, E, H) each expert's w2; ``mlp.gate`` is the router.
    """
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        layer, _, leaf = name.partition(".mlp.experts.")
        experts = f"{layer}.block_sparse_moe.experts"
        if leaf == "gate_up_proj":
            for e, (w1, w3) in enumerate(zip(*tensor.chunk(2, dim=1), strict=True)):
                out[f"{experts}.{e}.w1.weight"], out[f"{experts}.{e}.w3.weight"] = w1, w3
        elif leaf == "down_proj":
            for e, w2 in enumerate(tensor.unbind(0)):
                out[f"{experts}.{e}.w2.weight"] = w2
        else:
            out[name.replace(".mlp.gate.", ".block_sparse_moe.gate.")] = tensor
    return out


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


def _fits_expert(recipe: Any) -> str | None:
    expert = recipe.ffn.expert
    if expert.type not in ACTS:
        return f"ffn.expert.type is {expert.type!r}, needs one of {', '.join(map(repr, ACTS))}"
    if getattr(expert, "bias", False):
        return "ffn.expert.bias is True, needs False (Mixtral's experts have no biases)"
    return None


MIXTRAL = LLAMA.derive(
    "mixtral",
    classes=("MixtralForCausalLM",),
    rules=MIXTRAL_RULES,
    layout=unfuse_experts,
    recipes=("mixtral-8x7b",),
    drop=("attention_bias", "mlp_bias", "pretraining_tp", "sliding_window", "gated ffn"),
    rows=(
        Fixed("attention.bias", False),
        Key("sliding_window", "attention.window", None),
        Fixed("ffn.type", "moe"),
        Key("num_local_experts", "ffn.num_experts", 8),
        Key("num_experts_per_tok", "ffn.top_k", 2),
        gated_ffn("ffn.expert", "blocks.0.ffn.experts.0.up_proj.weight"),
        Require("ffn.expert", _fits_expert),
        Key("router_aux_loss_coef", "ffn.aux_loss_coef", 0.001),
        Refused(
            "router_jitter_noise",
            lambda v: not v,
            "zoo's router does not multiply its input by training noise",
            export=0.0,
        ),
    ),
    defaults={
        "intermediate_size": 14336,
        "num_key_value_heads": 8,
        "max_position_embeddings": 4096 * 32,
        "rms_norm_eps": 1e-5,
        "rope_theta": 1e6,
    },
)
