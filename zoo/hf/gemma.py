"""Gemma (``GemmaForCausalLM``), and what Gemma 2 and Gemma 3 (``zoo/hf/gemma2.py``, ``gemma3.py``) share with it.

Gemma is Llama's table with three differences, each a zoo option:

- its RMSNorm stores ``w`` for a scale of ``1 + w``, computed in float32 before the cast (``norm.offset: 1.0``);
- the token embeddings are multiplied by ``sqrt(hidden_size)`` rounded to the weights' dtype
  (``embedding: {scale: true, round_scale: true}``);
- the FFN is GeGLU with the tanh GELU. Gemma's config may say ``hidden_act: gelu``: transformers reads that as
  the tanh approximation (a legacy value of the first releases), and so does zoo.

Gemma 2 and 3 add sandwich norms, a score scale of ``query_pre_attn_scalar ** -0.5``, soft-caps, and local
(sliding-window) and global layers: a recipe's ``layers:`` overrides give the layers of the less common kind
their attention (:func:`local_global`), and the export writes ``layer_types`` back from them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from zoo.errors import HFImportError

from .llama import BLOCK, LAYER, LLAMA, LLAMA_RULES
from .mapping import Option, Rule
from .rows import gated_ffn, selector
from .table import Computed, Fixed, Require

CAUSAL = Option(
    "use_bidirectional_attention",
    lambda v: not v,
    "zoo's decoder is causal; a bidirectional Gemma is an encoder, which this family does not import",
)

GATED_FFN = gated_ffn()


def _legacy_gelu(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """Quirk: transformers' GemmaConfig reads Gemma 1's ``hidden_act: gelu`` as the tanh GELU (Gemma 2, 3 do not)."""
    act = config["hidden_act"]
    return GATED_FFN.read({**config, "hidden_act": "gelu_pytorch_tanh" if act == "gelu" else act}, recipe)


def tanh_gelu(recipe: Any) -> str | None:
    """A requirement of Gemma 1: a GeGLU's GELU is the tanh one (its config's ``gelu`` means tanh)."""
    if recipe.ffn.type == "geglu" and recipe.ffn.approximate != "tanh":
        return "ffn.approximate is 'none', needs 'tanh' (Gemma's hidden_act 'gelu' is read as the tanh GELU)"
    return None


GEMMA = LLAMA.derive(
    "gemma",
    classes=("GemmaForCausalLM",),
    recipes=("gemma-2b",),
    drop=("mlp_bias", "pretraining_tp", "sliding_window"),
    rows=(
        Fixed("embedding.scale", True),
        Fixed("embedding.round_scale", True),
        Fixed("norm.offset", 1.0),
        replace(GATED_FFN, read=_legacy_gelu),
        Require("ffn.approximate", tanh_gelu),
        Fixed("ffn.bias", False),
        CAUSAL,
    ),
    defaults={
        "vocab_size": 256000,
        "hidden_size": 3072,
        "intermediate_size": 24576,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "head_dim": 256,
        "hidden_act": "gelu_pytorch_tanh",
        "max_position_embeddings": 8192,
        "pad_token_id": 0,
        "tie_word_embeddings": True,
    },
)

# ---------------------------------------------------------------------------------------------- Gemma 2 and 3

SANDWICH_RULES = (
    Rule("model.embed_tokens.weight", "embedding.token.weight"),
    Rule(f"{LAYER}.input_layernorm.weight", f"{BLOCK}.attention_norm.weight"),
    *(r for r in LLAMA_RULES if ".self_attn." in r.hf_names[0]),
    Rule(f"{LAYER}.self_attn.q_norm.weight", f"{BLOCK}.attention.q_norm.weight"),  # Gemma 3
    Rule(f"{LAYER}.self_attn.k_norm.weight", f"{BLOCK}.attention.k_norm.weight"),
    Rule(f"{LAYER}.post_attention_layernorm.weight", f"{BLOCK}.attention_post_norm.weight"),
    Rule(f"{LAYER}.pre_feedforward_layernorm.weight", f"{BLOCK}.ffn_norm.weight"),
    *(r for r in LLAMA_RULES if ".mlp." in r.hf_names[0]),
    Rule(f"{LAYER}.post_feedforward_layernorm.weight", f"{BLOCK}.ffn_post_norm.weight"),
    Rule("model.norm.weight", "final_norm.weight"),
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied
)
"""Gemma 2 and 3: a norm before and after each sub-layer (``post_attention_layernorm`` is the one *after*
attention here, where in Gemma and Llama it is the FFN's input norm)."""


def renamed(row: Computed, **names: str) -> Computed:
    """``row`` reading and writing config keys under other names (``hidden_activation="hidden_act"``: Gemma 2's
    key for what Gemma's row calls ``hidden_act``)."""
    theirs = {old: new for new, old in names.items()}

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        return row.read({**config, **{old: config[new] for new, old in names.items()}}, recipe)

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        return {theirs.get(k, k): v for k, v in row.write(recipe, weights).items()}

    return replace(row, keys={theirs.get(k, k): v for k, v in row.keys.items()}, read=read, write=write)


LOCAL, GLOBAL = "sliding_attention", "full_attention"
"""transformers' ``layer_types``: a local (sliding-window) and a global layer."""


def layer_types_option(family: str) -> Option:
    return Option(
        "layer_types",
        lambda v: v is None or (isinstance(v, list) and all(t in (LOCAL, GLOBAL) for t in v)),
        f"{family}'s layers are {LOCAL} or {GLOBAL}",
    )


def attention_scale(config: dict[str, Any]) -> float | None:
    """The score scale ``query_pre_attn_scalar ** -0.5``; None where that is zoo's default 1/sqrt(head_dim)."""
    scalar = config["query_pre_attn_scalar"]
    head_dim = config["head_dim"] or config["hidden_size"] // config["num_attention_heads"]
    return None if scalar == head_dim else float(scalar) ** -0.5


def query_pre_attn_scalar(recipe: Any) -> int:
    """The integer ``query_pre_attn_scalar`` of a recipe's score scale (the way back of ``attention_scale``)."""
    scale = recipe.attention.scale
    return recipe.attention.head_dim_for(recipe.d_model) if scale is None else round(scale**-2)


def integer_scalar(recipe: Any) -> str | None:
    """A requirement: the score scale is ``q ** -0.5`` for an integer ``q`` (the config holds the integer)."""
    scale = recipe.attention.scale
    if scale is not None and float(query_pre_attn_scalar(recipe)) ** -0.5 != scale:
        return f"attention.scale is {scale}, needs query_pre_attn_scalar ** -0.5 for an integer query_pre_attn_scalar"
    return None


SCALE = Computed(
    "scale",
    keys={"query_pre_attn_scalar": 256},
    paths=("attention.scale",),
    read=lambda config, recipe: {} if attention_scale(config) is None else {"attention.scale": attention_scale(config)},
    write=lambda recipe, weights: {"query_pre_attn_scalar": query_pre_attn_scalar(recipe)},
    requires={"attention.scale": integer_scalar},
)


def layer_types(config: dict[str, Any], pattern: int) -> list[str]:
    """Each layer's kind: ``layer_types``, else every ``pattern``-th layer global (transformers' default)."""
    n = config["num_hidden_layers"]
    types = config.get("layer_types") or [GLOBAL if (i + 1) % pattern == 0 else LOCAL for i in range(n)]
    if len(types) != n:
        raise HFImportError(f"layer_types has {len(types)} entries for num_hidden_layers={n}")
    if LOCAL in types and config["sliding_window"] is None:
        raise HFImportError(f"sliding_window=None with {LOCAL} layers: transformers cannot run this config either")
    return list(types)


def local_global(
    types: list[str], attention: dict[str, Any], window: int | None, ropes: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The recipe's ``positional``, ``attention`` and ``layers`` for local and global layers of ``types``.

    The more common kind (global on a tie) is the recipe's attention and positional; the layers of the other
    kind override the attention, with the ``window`` on local layers and their own ``rotary`` where their rope
    (``ropes[kind]``) differs.
    """
    counts = Counter(types)
    base = LOCAL if counts[LOCAL] > counts[GLOBAL] else GLOBAL
    other = GLOBAL if base == LOCAL else LOCAL

    def spec(kind: str) -> dict[str, Any]:
        out = dict(attention, window=window) if kind == LOCAL else dict(attention)
        if kind != base and ropes[kind] != ropes[base]:
            out["rotary"] = ropes[kind]
        return out

    indices = [i for i, t in enumerate(types) if t == other]
    layers = [{"select": selector(indices, len(types)), "attention": spec(other)}] if indices else []
    return {"positional": ropes[base], "attention": spec(base), "layers": layers}


def layer_ropes(recipe: Any) -> list[Any]:
    """Each decoder layer's rope config: its attention's ``rotary``, else the stack's positional."""
    out = []
    for placed in recipe.layer_plan("decoder"):
        rotary = placed["attention"][0].rotary
        out.append(recipe.positional if rotary is None else rotary)
    return out


def plan_problems(recipe: Any, *, one_rope: bool) -> str | None:
    """A requirement: the layers differ in their attention's window (and, unless ``one_rope``, rotary) only,
    every local layer has the same window, and the layers of each kind the same rope."""
    if "window" not in type(recipe.attention).model_fields:
        return None  # not Gemma's attention (a plugin's mixer): the attention.type requirement says so
    base = recipe.attention.model_dump(exclude={"window", "rotary"})
    plan = recipe.layer_plan("decoder")
    for i, placed in enumerate(plan):
        if placed["norm"][0] != recipe.norm or placed["ffn"][0] != recipe.ffn:
            return f"layers: layer {i} has its own norm or ffn; Gemma's layers differ only in their attention window"
        if placed["attention"][0].model_dump(exclude={"window", "rotary"}) != base:
            return f"layers: layer {i}'s attention differs from attention in more than window and rotary"
    windows = {placed["attention"][0].window for placed in plan} - {None}
    if len(windows) > 1:
        return f"layers: local windows {sorted(windows)}; Gemma has one sliding_window"
    ropes = layer_ropes(recipe)
    for rope in ropes:
        if rope.type != "rope" or rope.interleaved or rope.rotary_fraction != 1.0:
            return "layers: every layer's rotary is a rope of full, non-interleaved rotation in Gemma"
    if one_rope and any(r != recipe.positional for r in ropes):
        return "layers: a layer has its own rotary; Gemma 2 has one rope for all layers"
    kinds = {LOCAL: set(), GLOBAL: set()}
    for placed, rope in zip(plan, ropes, strict=True):
        kinds[LOCAL if placed["attention"][0].window else GLOBAL].add(rope.model_dump_json())
    if any(len(r) > 1 for r in kinds.values()):
        return "layers: the local (or the global) layers have different ropes; Gemma 3 has one rope of each"
    return None


def hf_layers(recipe: Any) -> dict[str, Any]:
    """``layer_types`` and ``sliding_window`` of a recipe that fits (``plan_problems`` found nothing)."""
    windows = [placed["attention"][0].window for placed in recipe.layer_plan("decoder")]
    window = next((w for w in windows if w is not None), None)
    return {
        "layer_types": [LOCAL if w is not None else GLOBAL for w in windows],
        "sliding_window": window if window is not None else (recipe.max_len or 4096),  # unused: no layer slides
    }
