"""Rows that many family tables share (``zoo/hf/table.py``): the attention heads, the token embedding and its
padding row, RoPE, a gated FFN's activation and width, the pre-norm decoder stack around them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

import torch

from zoo.errors import HFImportError

from .mapping import ACTIVATIONS, GATED_FFNS, HF_ACTIVATIONS, Option, Requirement, default_head_dim, no_layer_overrides
from .rope import (
    ROPE_OPTIONS,
    hf_partial_rope,
    hf_rope_parameters,
    partial_rope,
    rope_spec,
    same_rotary_dims,
    scaling_fits,
)
from .table import Computed, Fixed, Key, Require, Row

GATED: dict[str, dict[str, Any]] = {
    **{act: {"type": ffn} for act, ffn in GATED_FFNS.items()},
    "gelu_pytorch_tanh": {"type": "geglu", "approximate": "tanh"},
}
"""A gated FFN's HF activation (Llama's ``hidden_act``) -> the zoo gated FFN that computes it exactly."""

ACTS = {ffn: act for act, ffn in GATED_FFNS.items()}
"""zoo gated FFN -> its HF activation."""


def hidden_act(ffn: Any) -> str:
    """The ``hidden_act`` of a zoo gated FFN (a config or a spec dict): the way back of ``GATED``."""
    spec = ffn if isinstance(ffn, dict) else ffn.model_dump()
    if spec["type"] == "geglu" and spec.get("approximate", "none") == "tanh":
        return "gelu_pytorch_tanh"
    return ACTS[spec["type"]]


def heads(*, head_dim: bool | Literal["unless implied"] = True) -> Computed:
    """Query heads, key/value heads (MHA when equal, else GQA) and, with ``head_dim``, the head width (without it,
    the config has no such key: heads of ``hidden_size / num_attention_heads``; ``"unless implied"``: the family's
    config has no such field but its attention reads one a config.json gives, so it is written only when the
    heads do not make up ``hidden_size``)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        count = config["num_attention_heads"]
        kv_heads = config["num_key_value_heads"] or count
        out: dict[str, Any] = {"attention.type": "mha", "attention.num_heads": count}
        if kv_heads != count:
            out.update({"attention.type": "gqa", "attention.num_kv_heads": kv_heads})
        if head_dim and config["head_dim"] is not None:
            out["attention.head_dim"] = config["head_dim"]
        return out

    def write(recipe: Any, weights: Mapping[str, torch.Tensor]) -> dict[str, Any]:
        attention = recipe.attention
        out = {"num_attention_heads": attention.num_heads, "num_key_value_heads": attention.num_kv_heads}
        width = attention.head_dim_for(recipe.d_model)
        if head_dim is True or (head_dim and width * attention.num_heads != recipe.d_model):
            out["head_dim"] = width
        return out

    keys = {"num_attention_heads": 32, "num_key_value_heads": None, **({"head_dim": None} if head_dim else {})}
    requires: dict[str, Requirement] = {"attention.type": ("mha", "gqa", "mqa")}
    if not head_dim:
        requires["attention.head_dim"] = default_head_dim
    return Computed(
        "heads",
        keys=keys,
        paths=("attention.num_heads", "attention.num_kv_heads", "attention.head_dim"),
        read=read,
        write=write,
        requires=requires,
        legacy=("head_dim",) if head_dim == "unless implied" else (),  # written only where the heads need it
    )


HEADS = heads()
"""Query heads, key/value heads (MHA when equal, else GQA) and the head width."""


def _pad(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """``nn.Embedding(vocab_size, hidden_size, padding_idx=pad_token_id)``, as HF builds the token table."""
    pad = config["pad_token_id"]
    out: dict[str, Any] = {"pad_token_id": pad, "embedding.type": "token"}
    if pad is not None and 0 <= pad < config["vocab_size"]:
        out["embedding.padding_idx"] = pad
    return out


PAD = Computed(
    "pad",
    keys={"pad_token_id": None},
    paths=("pad_token_id", "embedding.padding_idx"),
    read=_pad,
    write=lambda recipe, weights: {"pad_token_id": recipe.pad_token_id},
    requires={"embedding.type": "token"},
)
"""The pad id, and the embedding's zero-gradient row it names (when it is a row of the table)."""


def rope(*, interleaved: bool = False, partial: bool = False) -> Computed:
    """RoPE with its frequency scaling (``zoo/hf/rope.py``): over every head dim, or with ``partial`` over the
    leading ``partial_rotary_factor`` of each head (GLM, Persimmon); ``interleaved`` pairs adjacent dims (GPT-J's
    layout) where the default rotates halves (Llama's)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        if partial:
            head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
            spec = partial_rope(config, head_dim)
        else:
            spec = rope_spec(config)
        return {"positional": {**spec, "interleaved": True} if interleaved else spec}

    def write(recipe: Any, weights: Mapping[str, torch.Tensor]) -> dict[str, Any]:
        rotary = recipe.positional
        params = hf_partial_rope(rotary) if partial else hf_rope_parameters(rotary)
        return {"rope_parameters": params, "rope_theta": rotary.theta}

    keys = {"rope_theta": 10000.0, "rope_parameters": None, "rope_scaling": None}
    return Computed(
        "rope",
        keys={**keys, "partial_rotary_factor": 1.0} if partial else keys,
        paths=("positional.*",),
        read=read,
        write=write,
        requires={
            "positional.type": "rope",
            "positional.scaling": scaling_fits,
            "positional.interleaved": interleaved,
            "positional.rotary_fraction": same_rotary_dims if partial else 1.0,
        },
        legacy=("rope_scaling", "partial_rotary_factor") if partial else ("rope_scaling",),  # transformers 4's
    )


ROPE = rope()

FULL_ROTATION = Option(
    "rope_parameters.partial_rotary_factor",
    lambda v: v in (None, 1.0),
    "this family's attention rotates every head dim",
)


def gated_ffn(path: str = "ffn", weight: str = "blocks.0.ffn.up_proj.weight", key: str = "intermediate_size") -> Row:
    """A gated FFN at ``path`` (``hidden_act`` and its width ``key``); the width exported is the rows of ``weight``
    (the recipe may leave it to a rule such as ``multiple_of``)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        return {**{f"{path}.{k}": v for k, v in GATED[config["hidden_act"]].items()}, f"{path}.hidden": config[key]}

    def write(recipe: Any, weights: Mapping[str, torch.Tensor]) -> dict[str, Any]:
        return {
            "hidden_act": hidden_act(recipe.ffn if path == "ffn" else recipe.ffn.expert),
            key: weights[weight].shape[0],
        }

    return Computed(
        f"gated {path}",
        keys={"hidden_act": "silu", key: 11008},
        paths=(f"{path}.approximate", f"{path}.hidden", f"{path}.multiple_of"),
        read=read,
        write=write,
        requires={f"{path}.type": tuple(ACTS)} if path == "ffn" else {},
    )


BIAS_FIELDS = ("attention.bias", "attention.q_bias", "attention.k_bias", "attention.v_bias", "attention.o_bias")


def biases(qkv: str | bool, o: str | bool) -> Computed:
    """Which attention projections have biases: ``qkv`` (the query, key and value projections alike) and ``o``
    (the output one) are each a config key or a fixed value; the same key for both is one flag for all four."""

    def value(config: dict[str, Any], flag: str | bool) -> bool:
        return bool(config[flag]) if isinstance(flag, str) else flag

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        bias, out = value(config, qkv), value(config, o)
        return {"attention.bias": bias} if bias == out else {"attention.bias": bias, "attention.o_bias": out}

    def write(recipe: Any, weights: Mapping[str, torch.Tensor]) -> dict[str, Any]:
        on = recipe.attention.biases()
        return {key: on[p] for key, p in ((qkv, "q"), (o, "o")) if isinstance(key, str)}

    def check(recipe: Any) -> str | None:
        on = recipe.attention.biases()
        shown = "/".join(str(on[p]) for p in "qkvo")
        if not on["q"] == on["k"] == on["v"] or (qkv == o and on["o"] != on["q"]):
            return f"attention biases q/k/v/o are {shown}, needs {'q/k/v/o' if qkv == o else 'q/k/v'} alike"
        for flag, p in ((qkv, "q"), (o, "o")):
            if not isinstance(flag, str) and on[p] != flag:
                return f"attention biases q/k/v/o are {shown}, needs {'q/k/v' if p == 'q' else 'o'} {flag}"
        return None

    keys = {key: False for key in (qkv, o) if isinstance(key, str)}
    return Computed(
        "biases", keys=keys, paths=BIAS_FIELDS, read=read, write=write, requires={"attention.biases": check}
    )


ONE_BIAS = biases("attention_bias", "attention_bias")
"""One ``attention_bias`` for the query, key, value and output projections."""


def plain_mlp(weight: str = "blocks.0.ffn.up_proj.weight", *, acts: Mapping[str, str] = HF_ACTIVATIONS) -> Computed:
    """A two-layer MLP, ``down(act(up(x)))`` (Arcee, Apertus): ``hidden_act`` and ``intermediate_size``; ``acts``:
    zoo activation -> the ``hidden_act`` written (StarCoder2 writes torch's tanh GELU as published)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        act = ACTIVATIONS[config["hidden_act"]]
        return {"ffn.type": "mlp", "ffn.activation": act, "ffn.hidden": config["intermediate_size"]}

    def write(recipe: Any, weights: Mapping[str, torch.Tensor]) -> dict[str, Any]:
        return {"hidden_act": acts[recipe.ffn.activation], "intermediate_size": weights[weight].shape[0]}

    return Computed(
        "gated ffn",  # in place of Llama's gated FFN
        keys={"hidden_act": "relu2", "intermediate_size": 11008},
        paths=("ffn.activation", "ffn.hidden"),
        read=read,
        write=write,
        requires={"ffn.type": "mlp", "ffn.activation": tuple(HF_ACTIVATIONS)},
    )


def qk_norm(scope: Literal["head", "projection"] = "head", *, family: str | None = None) -> Computed:
    """QK-norm by the recipe's own RMSNorm (``rms_norm_eps``), over each head's features (Qwen3) or over a whole
    projection's (OLMo 2): the config says only that it is there. With ``family``, the norms are sized for heads of
    hidden_size / heads whatever ``head_dim`` says (OLMoE's): heads of another width, which fail in HF, are refused."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        width = config["hidden_size"] // config["num_attention_heads"]
        if family is not None and config["head_dim"] not in (None, width):
            raise HFImportError(
                f"head_dim={config['head_dim']!r}: {family}'s QK-norm needs hidden_size / heads ({width})"
            )
        norm = {"type": "rmsnorm", "eps": config["rms_norm_eps"]}
        return (
            {"attention.qk_norm": norm}
            if scope == "head"
            else {"attention.qk_norm": norm, "attention.qk_norm_scope": scope}
        )

    def check(recipe: Any) -> str | None:
        attention = recipe.attention
        if attention.qk_norm != recipe.norm or attention.qk_norm_scope != scope:
            shown = None if attention.qk_norm is None else attention.qk_norm.model_dump()
            return (
                f"attention.qk_norm is {shown!r} over {attention.qk_norm_scope!r}, needs the recipe's norm "
                f"({recipe.norm.model_dump()}) over each {scope} (q_norm and k_norm)"
            )
        return None

    return Computed(
        "qk norm",
        keys={},
        paths=("attention.qk_norm", "attention.qk_norm_scope"),
        read=read,
        write=lambda recipe, weights: {},
        requires={"attention.qk_norm": check},
    )


def head_qk_norm(
    why: str, *, offset: float = 0.0, position: str = "before_rope", writes: Mapping[str, Any] = {}
) -> Computed:
    """QK-norm by an affine RMSNorm of ``rms_norm_eps`` over each head, of weight ``offset + w`` (Gemma 3: 1.0), before
    RoPE or at ``position`` (HunYuan: after_rope); the config says only that it is there. ``why`` is the refusal, its
    ``{shown}``, ``{scope}`` and ``{eps}`` filled in. It owns the scope (before RoPE) or the position; ``writes``: the
    config keys it sets on export (Gemma 3: no score cap)."""
    field, value = ("qk_norm_scope", "head") if position == "before_rope" else ("qk_norm_position", position)
    placed = {} if position == "before_rope" else {"attention.qk_norm_position": position}

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        norm = {"type": "rmsnorm", "eps": config["rms_norm_eps"], **({"offset": offset} if offset else {})}
        return {"attention.qk_norm": norm, **placed}

    def check(recipe: Any) -> str | None:
        attention, norm = recipe.attention, recipe.attention.qk_norm
        want = {"type": "rmsnorm", "affine": True, "offset": offset, "eps": recipe.norm.eps}
        if norm is None or {k: getattr(norm, k, None) for k in want} != want or getattr(attention, field) != value:
            shown = None if norm is None else norm.model_dump()
            return why.format(shown=shown, scope=attention.qk_norm_scope, eps=recipe.norm.eps)
        return None

    return Computed(
        "qk norm",
        keys={},
        paths=("attention.qk_norm", f"attention.{field}"),
        read=read,
        write=lambda recipe, weights: dict(writes),
        requires={"attention.qk_norm": check},
    )


PLAIN_ACTIVATION = Option(
    "hidden_act",
    lambda v: v in ACTIVATIONS,
    f"zoo's MLP applies {', '.join(ACTIVATIONS)} exactly",
)

ACTIVATION = Option(
    "hidden_act",
    lambda v: v in GATED,
    f"zoo's gated FFNs apply {', '.join(GATED)} exactly (swiglu, geglu, reglu, geglu with approximate: tanh)",
)

PRE_NORM_DECODER: tuple[Row, ...] = (
    Fixed("architecture", "decoder"),
    Fixed("block.norm_position", "pre"),
    Fixed("embed_norm", None, also=(False,), imported=False),
    Fixed("final_norm", None, also=(True,), imported=False),
    Fixed("type_vocab_size", 0, imported=False),
    Require("layers", no_layer_overrides),
    Key("vocab_size", "vocab_size", 32000),
    Key("hidden_size", "d_model", 4096),
    Key("num_hidden_layers", "num_layers", 32),
    Key("max_position_embeddings", "max_len", 2048),
    PAD,
    HEADS,
    ROPE,
    *ROPE_OPTIONS,
    FULL_ROTATION,
    Fixed("norm.type", "rmsnorm"),
    Key("rms_norm_eps", "norm.eps", 1e-6),
    Fixed("head.type", "lm"),
    Key("tie_word_embeddings", "head.tie_embeddings", False, read=bool),
)
"""Llama's stack: token embedding, pre-norm blocks of RoPE attention and RMSNorm, an LM head (tied or not)."""


# ---------------------------------------------------------------------------------------------- per-layer attention


def per_layer_attention(recipe: dict[str, Any], changes: list[dict[str, Any]]) -> dict[str, Any]:
    """The recipe paths that give layer ``i``'s attention the fields ``changes[i]``: changes every layer shares go
    on the recipe's attention, the others become one ``layers:`` override per distinct change."""
    if all(change == changes[0] for change in changes):
        return {f"attention.{field}": value for field, value in changes[0].items()}
    groups: dict[str, tuple[dict[str, Any], list[int]]] = {}
    for i, change in enumerate(changes):
        groups.setdefault(repr(sorted(change.items())), (change, []))[1].append(i)
    overrides = [
        {"select": selector(layers, len(changes)), "attention": {**recipe["attention"], **change}}
        for change, layers in groups.values()
        if change
    ]
    return {"layers": overrides}


def selector(indices: list[int], n: int) -> int | str | list[int]:
    """A ``layers:`` selector for ``indices`` of ``n`` layers: an index, a slice ('3::4') or the list."""
    if len(indices) == 1:
        return indices[0]
    start, step = indices[0], indices[1] - indices[0]
    return f"{start}::{step}" if indices == list(range(start, n, step)) else indices


def layer_attentions(recipe: Any) -> list[Any]:
    """The attention config of every layer of a (validated) decoder recipe, overrides applied."""
    return [placed["attention"][0] for placed in recipe.layer_plan("decoder")]


def only_attention_differs(*fields: str) -> Requirement:
    """A requirement: ``layers:`` overrides change nothing but these fields of the attention."""

    def check(recipe: Any) -> str | None:
        blank = dict.fromkeys(fields)
        base = recipe.attention.model_copy(update=blank)
        for j, override in enumerate(recipe.layers):
            if override.norm is not None or override.ffn is not None:
                return f"layers.{j}: overrides a norm or an FFN; only the attention's {', '.join(fields)} may differ"
            attention = override.attention
            if attention is not None and attention.model_copy(update=blank) != base:
                return f"layers.{j}.attention differs from attention in more than its {', '.join(fields)}"
        return None

    return check


def uses_rope(attention: Any) -> bool:
    """Whether a layer's attention rotates (a NoPE layer's ``rotary`` is ``{type: none}``)."""
    return attention.rotary is None or attention.rotary.type != "none"


# ---------------------------------------------------------------------------------------------- stacked experts


def stacked_experts(
    module: str, gate_up: str, down: str, *, inputs_first: bool, interleaved: bool = False, biases: bool = False
) -> tuple[Any, Any]:
    """``(layout, hf_layout)`` of a family whose checkpoint stacks each layer's gated experts in two tensors:
    ``{layer}.{module}.{gate_up}``, every expert's gate then up projection, (X, 2H, E), and ``{down}``, every
    expert's down projection, (X, E, H) (Granite-MoE); with ``inputs_first`` (X, E, 2H) and (X, H, E) (Llama 4).
    ``interleaved``: the gate and up rows alternate (gpt-oss); ``biases``: ``{gate_up}_bias`` (X, 2H) and
    ``{down}_bias`` (X, E) too. ``layout`` names them one expert at a time as ``nn.Linear`` holds them,
    ``{layer}.{module}.experts.{e}.gate_proj.weight`` (the names a table's rows use); ``hf_layout`` stacks them back."""
    one = re.compile(rf"(.+)\.{module}\.experts\.(\d+)\.(gate|up|down)_proj\.(weight|bias)")
    leaves = {
        gate_up: "weight",
        down: "weight",
        **({f"{gate_up}_bias": "bias", f"{down}_bias": "bias"} if biases else {}),
    }

    def split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # one expert's (2H, ...) gate and up
        return (x[::2], x[1::2]) if interleaved else tuple(x.chunk(2))

    def layout(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        out = {}
        for name, t in state.items():
            layer, found, leaf = name.partition(f".{module}.")
            if not found or leaf not in leaves:
                out[name] = t
                continue
            kind = leaves[leaf]
            t = t.transpose(1, 2) if inputs_first and kind == "weight" else t  # (X, 2H, E) or (X, E, H)
            for e, w in enumerate(t):
                parts = dict(zip(("gate", "up"), split(w), strict=True)) if leaf.startswith(gate_up) else {"down": w}
                out.update({f"{layer}.{module}.experts.{e}.{p}_proj.{kind}": x for p, x in parts.items()})
        return out

    def hf_layout(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        by: dict[tuple[str, str], dict[str, dict[int, torch.Tensor]]] = {}
        for name, t in state.items():
            match = one.fullmatch(name)
            if match is None:
                out[name] = t
                continue
            layer, e, p, kind = match.groups()
            by.setdefault((layer, kind), {}).setdefault(p, {})[int(e)] = t
        for (layer, kind), parts in by.items():
            gate, up, w2 = (torch.stack([w for _, w in sorted(parts[p].items())]) for p in ("gate", "up", "down"))
            w1 = torch.stack([gate, up], dim=2).flatten(1, 2) if interleaved else torch.cat([gate, up], dim=1)
            suffix = "_bias" if kind == "bias" else ""
            for leaf, w in ((gate_up, w1), (down, w2)):
                w = w.transpose(1, 2) if inputs_first and kind == "weight" else w
                out[f"{layer}.{module}.{leaf}{suffix}"] = w.contiguous()
        return out

    return layout, hf_layout
