"""DBRX (``DbrxForCausalLM``, dbrx-base / dbrx-instruct): a pre-norm decoder of bias-free LayerNorms, grouped-query
attention through one fused ``Wqkv`` (all queries, then keys, then values), clamped to ``±clip_qkv`` (zoo's
attention ``clip_qkv``), RoPE, and a mixture of SwiGLU experts whose top-k softmax probabilities are divided by
their ``moe_normalize_expert_weights``-norm (1: renormalised, zoo's ``normalize``; None: as they are). Its keys
nest: ``attn_config`` (``kv_n_heads``, ``clip_qkv``, ``attn_pdrop``, ``rope_theta``) and ``ffn_config``
(``ffn_hidden_size``, ``moe_num_experts``, ``moe_top_k``, ``ffn_act_fn``, ``moe_loss_weight``; ``moe_jitter_eps``
is noise on the router's input in training only).

transformers 5 rotates by ``rope_parameters`` (by default a base of 10000) and ignores ``attn_config.rope_theta``
(DBRX's 500000), which its attention nevertheless requires: a config whose two bases differ is refused by name
(state the base in ``rope_parameters``); zoo writes both. Each layer's experts are stacked on disk as three
(X·H, E) tensors, ``ffn.experts.mlp.w1`` (gate), ``v1`` (up) and ``w2`` (down, transposed), imported one expert at
a time and written back stacked.
"""

from __future__ import annotations

from typing import Any

import torch

from zoo.errors import HFImportError

from ._common import stacked_qkv
from .gpt2 import QKV_WEIGHTS
from .mapping import Rule, default_head_dim
from .qwen2_moe import fits_experts
from .rope import ROPE_OPTIONS, rope_theta
from .rows import GATED, PAD, PRE_NORM_DECODER, ROPE, hidden_act
from .table import Computed, Fixed, Key, Refused, Require, Unread, family

LAYER, BLOCK = "transformer.blocks.{i}", "blocks.{i}"
PARTS = {"w1": "gate", "v1": "up", "w2": "down"}
RULES = (
    Rule("transformer.wte.weight", "embedding.token.weight"),
    Rule(f"{LAYER}.norm_attn_norm.norm_1.weight", f"{BLOCK}.attention_norm.weight"),
    Rule(f"{LAYER}.norm_attn_norm.attn.Wqkv.weight", QKV_WEIGHTS, stacked_qkv),
    Rule(f"{LAYER}.norm_attn_norm.attn.out_proj.weight", f"{BLOCK}.attention.o_proj.weight"),
    Rule(f"{LAYER}.norm_attn_norm.norm_2.weight", f"{BLOCK}.ffn_norm.weight"),
    Rule(f"{LAYER}.ffn.router.layer.weight", f"{BLOCK}.ffn.router.weight"),
    *(
        Rule(f"{LAYER}.ffn.experts.{{e}}.{p}_proj.weight", f"{BLOCK}.ffn.experts.{{e}}.{p}_proj.weight")
        for p in PARTS.values()
    ),
    Rule("transformer.norm_f.weight", "final_norm.weight"),
    Rule("lm_head.weight", "head.proj.weight"),
)


def unstack(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``ffn.experts.mlp.{w1,v1,w2}`` (X·H, E) one expert at a time, as ``nn.Linear`` holds them (w2 transposed)."""
    out = {}
    for name, t in state.items():
        head, found, leaf = name.partition(".ffn.experts.mlp.")
        if not found:
            out[name] = t
            continue
        count = t.shape[0] // weights_rows(state, head)
        for e, w in enumerate(t.unflatten(0, (count, -1))):
            out[f"{head}.ffn.experts.{e}.{PARTS[leaf]}_proj.weight"] = w.t() if leaf == "w2" else w
    return out


def weights_rows(state: dict[str, torch.Tensor], head: str) -> int:
    """An expert's hidden width H: the rows of the layer's router are its experts, X, and w1 holds X·H rows."""
    return state[f"{head}.ffn.experts.mlp.w1"].shape[0] // state[f"{head}.ffn.router.layer.weight"].shape[0]


def stack(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The way back of ``unstack``."""
    out, by = {}, {}
    for name, t in state.items():
        head, found, rest = name.partition(".ffn.experts.")
        if not found or rest.startswith("mlp."):
            out[name] = t
            continue
        e, p, _ = rest.split(".")
        by.setdefault(head, {}).setdefault(p.removesuffix("_proj"), {})[int(e)] = t
    for head, parts in by.items():
        for leaf, p in PARTS.items():
            ws = [w.t() if leaf == "w2" else w for _, w in sorted(parts[p].items())]
            out[f"{head}.ffn.experts.mlp.{leaf}"] = torch.cat(ws).contiguous()
    return out


ATTN = {"attn_pdrop": 0.0, "clip_qkv": None, "kv_n_heads": 1, "rope_theta": None}
FFN = {"ffn_act_fn": None, "ffn_hidden_size": 3584, "moe_num_experts": 4, "moe_top_k": 1, "moe_loss_weight": 0.01}
FFN |= {"moe_normalize_expert_weights": 1.0, "moe_jitter_eps": None}


def read_attention(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    attn = {**ATTN, **(config["attn_config"] or {})}
    theta = attn["rope_theta"]
    if theta is not None and float(theta) != rope_theta(config):
        raise HFImportError(
            f"attn_config.rope_theta={theta!r} differs from the base transformers 5 rotates by (rope_parameters', "
            "10000 unless given): state the base in rope_parameters too"
        )
    heads, kv = config["n_heads"], attn["kv_n_heads"]
    kind = {"attention.type": "mha"} if kv == heads else {"attention.type": "gqa", "attention.num_kv_heads": kv}
    return {
        **kind,
        "attention.num_heads": heads,
        "attention.clip_qkv": attn["clip_qkv"],
        "attention.dropout": attn["attn_pdrop"],
    }


def write_attention(recipe: Any, weights: Any) -> dict[str, Any]:
    a = recipe.attention
    return {
        "n_heads": a.num_heads,
        "attn_config": {
            "kv_n_heads": a.num_kv_heads,
            "clip_qkv": a.clip_qkv,
            "attn_pdrop": a.dropout,
            "rope_theta": recipe.positional.theta,
        },
    }


def read_ffn(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    ffn = {**FFN, **(config["ffn_config"] or {})}
    act = GATED[(ffn["ffn_act_fn"] or {"name": "silu"})["name"]]
    return {
        "ffn.type": "moe",
        "ffn.num_experts": ffn["moe_num_experts"],
        "ffn.top_k": ffn["moe_top_k"],
        "ffn.expert": {**act, "hidden": ffn["ffn_hidden_size"]},
        "ffn.normalize": ffn["moe_normalize_expert_weights"] is not None,
        "ffn.aux_loss_coef": ffn["moe_loss_weight"],
    }


def write_ffn(recipe: Any, weights: Any) -> dict[str, Any]:
    ffn = recipe.ffn
    return {
        "ffn_config": {
            "ffn_act_fn": {"name": hidden_act(ffn.expert)},
            "ffn_hidden_size": weights["blocks.0.ffn.experts.0.up_proj.weight"].shape[0],
            "moe_num_experts": ffn.num_experts,
            "moe_top_k": ffn.top_k,
            "moe_loss_weight": ffn.aux_loss_coef,
            "moe_normalize_expert_weights": 1.0 if ffn.normalize else None,
        }
    }


CLAMP_WHY = "transformers' DbrxAttention clamps to ±clip_qkv and cannot run without one (torch.clamp of None)"


def act_fits(v: Any) -> bool:
    return v is None or (isinstance(v, dict) and set(v) == {"name"} and v["name"] in GATED)


DBRX = family(
    "dbrx",
    classes=("DbrxForCausalLM",),
    rules=RULES,
    ignored=(),
    base_prefix="transformer.",
    layout=unstack,
    hf_layout=stack,
    recipes=("dbrx-base",),
    rows=(
        *PRE_NORM_DECODER[:6],  # a pre-norm decoder without per-layer overrides
        Key("vocab_size", "vocab_size", 32000),
        Key("d_model", "d_model", 2048),
        Key("n_layers", "num_layers", 24),
        Key("max_seq_len", "max_len", 2048),
        PAD,
        Computed(
            "attention",
            keys={"n_heads": 16, "attn_config": None},
            paths=(
                "attention.type",
                "attention.num_heads",
                "attention.num_kv_heads",
                "attention.clip_qkv",
                "attention.dropout",
            ),
            read=read_attention,
            write=write_attention,
            requires={"attention.type": ("mha", "gqa", "mqa"), "attention.head_dim": default_head_dim},
        ),
        Fixed("attention.bias", False),
        Refused("attn_config.clip_qkv", lambda v: v is not None, CLAMP_WHY),
        Require("attention.clip_qkv", lambda r: None if r.attention.clip_qkv else f"attention.clip_qkv: {CLAMP_WHY}"),
        ROPE,
        *ROPE_OPTIONS,
        Fixed("norm.type", "layernorm"),
        Fixed("norm.bias", False),
        Fixed("norm.eps", 1e-5),  # nn.LayerNorm's default: DBRX's config has no eps
        Fixed("head.type", "lm"),
        Fixed("head.tie_embeddings", False),
        Refused("tie_word_embeddings", lambda v: not v, "DbrxConfig refuses tied embeddings", export=False),
        Computed(
            "ffn",
            keys={"ffn_config": None},
            paths=tuple(f"ffn.{f}" for f in ("type", "num_experts", "top_k", "expert", "normalize", "aux_loss_coef")),
            read=read_ffn,
            write=write_ffn,
            requires={"ffn.type": "moe", "ffn.experts": fits_experts},
        ),
        Refused("ffn_config.ffn_act_fn", act_fits, "DBRX's experts take ffn_act_fn's name only (a gated FFN's)"),
        Refused(
            "ffn_config.moe_normalize_expert_weights",
            lambda v: v in (None, 1, 1.0),
            "zoo renormalises the top-k weights to sum to one (a 1-norm) or not at all",
        ),
        Unread("num_key_value_heads", "DbrxConfig copies it from attn_config.kv_n_heads, which zoo reads"),
        Unread("resid_pdrop", "dropout on the residual branches, in training only"),
        Unread("emb_pdrop", "dropout on the embeddings, in training only"),
        Unread("output_router_logits", "whether forward also returns the router logits: an output, not the network"),
    ),
)
