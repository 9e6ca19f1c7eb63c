"""Rows that the GPT-NeoX line of families shares (``zoo/hf/table.py``): GPT-NeoX, GPT-J, Falcon, Phi, StableLM,
OPT and BLOOM. LayerNorm decoders whose token table has no padding row, RoPE over a leading share of each head
read from either transformers' config layout and written back as ``rope_parameters`` alone, one config flag for
the biases of every projection, a parallel block from one shared norm, an untied LM head with a bias; and the
weight rows of their modules, a fused ``query_key_value`` among them.
"""

from __future__ import annotations

from dataclasses import replace
from operator import attrgetter
from typing import Any

from zoo.components.positional import rotary_dims
from zoo.errors import HFImportError

from ._common import grouped_qkv
from .gpt2 import QKV_BIASES, QKV_WEIGHTS
from .mapping import Requirement, Rule, default_head_dim
from .rope import (
    hf_partial_rope,
    hf_rope_parameters,
    partial_rope,
    rope_spec,
    rotary_fraction,
    same_rotary_dims,
    scaling_fits,
    scaling_parameters,
)
from .rows import BIAS_FIELDS, biases
from .rows_classic import PRE_NORM, width
from .table import Computed, Fixed, Key, Refused, Row

DECODER: tuple[Row, ...] = (Fixed("architecture", "decoder"), *PRE_NORM, Fixed("type_vocab_size", 0, imported=False))
"""A pre-norm decoder stack: each block normalises its input, a final norm closes the stack."""


def sizes(vocab: int, width: int, layers: int, positions: int) -> tuple[Row, ...]:
    """The stack's sizes under transformers' usual keys, with the family's defaults."""
    return (
        Key("vocab_size", "vocab_size", vocab),
        Key("hidden_size", "d_model", width),
        Key("num_hidden_layers", "num_layers", layers),
        Key("max_position_embeddings", "max_len", positions),
    )


TOKENS = Computed(
    "pad",  # in place of rows.PAD, whose padding row these tables do not have
    keys={"pad_token_id": None},
    paths=("pad_token_id", "embedding.type"),
    read=lambda config, recipe: {"pad_token_id": config["pad_token_id"], "embedding.type": "token"},
    write=lambda recipe, weights: {"pad_token_id": recipe.pad_token_id},
    requires={"embedding.type": "token"},
)
"""A plain ``nn.Embedding`` token table (no padding row, whatever ``pad_token_id`` says) and the pad id."""


def decoder(vocab: int, width: int, layers: int, positions: int) -> tuple[Row, ...]:
    """``DECODER`` of ``TOKENS``, its sizes under transformers' usual keys (GPT-NeoX's, Falcon's)."""
    return (*DECODER, *sizes(vocab, width, layers, positions), TOKENS)


PARALLEL_SHARED: tuple[Row, ...] = (Fixed("block.parallel", True), Fixed("block.shared_norm", True))
"""Attention and MLP read one norm of the block's input in parallel (GPT-J's and Phi's only block)."""


def parallel_flag(key: str, default: bool, family: str) -> Computed:
    """One config flag ``key`` for a parallel block reading one shared norm (StableLM's ``use_parallel_residual``),
    else a sequential one: a parallel block of two norms is refused."""

    def one_norm(recipe: Any) -> str | None:
        if recipe.block.parallel and not recipe.block.shared_norm:
            return f"block.shared_norm is False, needs True in a parallel block ({family}'s has one norm)"
        return None

    return flag("parallel", key, default, "block.parallel", "block.shared_norm", check=one_norm)


def mha(key: str, default: int) -> Computed:
    """Multi-head attention of ``key`` heads of hidden_size / heads features (the config has no key/value-head
    count nor head width): rows.HEADS in its place says those."""
    return Computed(
        "heads",
        keys={key: default},
        paths=("attention.num_heads", "attention.head_dim"),
        read=lambda config, recipe: {"attention.type": "mha", "attention.num_heads": config[key]},
        write=lambda recipe, weights: {key: recipe.attention.num_heads},
        requires={"attention.type": "mha", "attention.head_dim": default_head_dim},
    )


def layernorm(eps: str) -> tuple[Row, ...]:
    """LayerNorm (with biases) everywhere, its epsilon the config key ``eps``."""
    return (Fixed("norm.type", "layernorm"), Key(eps, "norm.eps", 1e-5))


def rope(
    theta: str = "rope_theta",
    fraction: str | None = "partial_rotary_factor",
    share: float = 0.25,
    *,
    head_dim: bool = False,
) -> Computed:
    """RoPE over the leading ``fraction`` (4.x key, default ``share``) of each head, its base ``theta`` (4.x key) or
    both in ``rope_parameters`` (5.x), with its scaling; written back as ``rope_parameters`` alone. ``fraction``
    None: whole heads (Falcon, which has no such key). The heads are hidden_size / heads wide, or with
    ``head_dim`` the config's ``head_dim`` where it gives one (Phi)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        if fraction is None:
            params = scaling_parameters(config)
            params.setdefault("rope_theta", config[theta])
            return {"positional": rope_spec(config, params)}
        width = (config["head_dim"] if head_dim else None) or config["hidden_size"] // config["num_attention_heads"]
        return {"positional": partial_rope(config, width, theta=theta, fraction=fraction)}

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        rotary = recipe.positional
        return {"rope_parameters": hf_rope_parameters(rotary) if fraction is None else hf_partial_rope(rotary)}

    keys = {theta: 10000.0, "rope_parameters": None, "rope_scaling": None}
    return Computed(
        "rope",
        keys=keys if fraction is None else {**keys, fraction: share},
        paths=("positional.*",),
        read=read,
        write=write,
        requires={
            "positional.type": "rope",
            "positional.scaling": scaling_fits,
            "positional.interleaved": False,
            "positional.rotary_fraction": 1.0 if fraction is None else same_rotary_dims,
        },
        legacy=(theta, "rope_scaling") if fraction is None else (theta, "rope_scaling", fraction),  # 4.x keys
    )


def bias_flag(key: str, default: bool) -> Computed:
    """One config flag ``key`` for the biases of the query, key, value and output projections."""
    return replace(biases(key, key), keys={key: default})


def flag(name: str, key: str, default: bool, *fields: str, owns: tuple[str, ...] = (), check: Requirement) -> Computed:
    """One boolean config ``key`` that sets the recipe ``fields`` alike (StableLM's ``use_parallel_residual``: a
    parallel block and its shared norm; StarCoder2's ``use_bias``), written from the first. ``owns``: the fields the
    row answers for, if more; ``check``: how the recipe's fields must agree (a requirement named as the row)."""
    return Computed(
        name,
        keys={key: default},
        paths=owns or fields,
        read=lambda config, recipe: dict.fromkeys(fields, bool(config[key])),
        write=lambda recipe, weights: {key: attrgetter(fields[0])(recipe)},
        requires={name: check},
    )


def every_bias(key: str, default: bool) -> Computed:
    """One config flag ``key`` for the biases of every projection, the attention's and the MLP's, which must all
    agree (StarCoder2's ``use_bias``)."""

    def alike(recipe: Any) -> str | None:
        on = {**{f"attention.{p}": b for p, b in recipe.attention.biases().items()}, "ffn": recipe.ffn.bias}
        if len(set(on.values())) != 1 or recipe.attention.bias != recipe.ffn.bias:
            return f"biases are {on}, need all or none ({key})"
        return None

    return flag("biases", key, default, "attention.bias", "ffn.bias", owns=(*BIAS_FIELDS, "ffn.bias"), check=alike)


def wider(key: str, d_model: str) -> Computed:
    """The MLP's width ``key``, or (None) 4 times the model's width ``d_model``."""
    return width(key, None, read=lambda config, recipe: {"ffn.hidden": config[key] or 4 * config[d_model]})


def one_bias(key: str, default: bool, family: str) -> tuple[Row, ...]:
    """One config flag ``key`` for the biases of every projection: the attention's four and the MLP's two."""

    def same(recipe: Any) -> str | None:
        attention = recipe.attention.biases()["q"]
        if recipe.ffn.bias != attention:
            return f"ffn.bias is {recipe.ffn.bias}, needs the attention's ({attention}): {family} has one {key}"
        return None

    return (
        bias_flag(key, default),
        Computed(
            "mlp bias",
            keys={},
            paths=("ffn.bias",),
            read=lambda config, recipe: {"ffn.bias": bool(config[key])},
            write=lambda recipe, weights: {},  # the attention's flag, written by bias_flag
            requires={"ffn.bias": same},
        ),
    )


def qk_layernorm(default: bool, *, family: str | None = None) -> Computed:
    """``qk_layernorm``: a LayerNorm (of ``layer_norm_eps``) over each head's queries and keys, zoo's ``qk_norm``,
    or none (Persimmon's, Phi's). To export, a recipe's qk_norm is none or its own norm. With ``family``, the config
    may give a ``head_dim`` but the norms are hidden_size / heads wide (Phi's): heads of another width are refused,
    as transformers cannot build them."""

    def whole_heads(recipe: Any) -> bool:
        return (
            family is None
            or recipe.attention.head_dim_for(recipe.d_model) * recipe.attention.num_heads == recipe.d_model
        )

    def same_norm(recipe: Any) -> str | None:
        qk_norm = recipe.attention.qk_norm
        if qk_norm is None or (qk_norm == recipe.norm and whole_heads(recipe)):
            return None
        heads = " over heads of d_model / num_heads" if family else ""
        return f"attention.qk_norm is {qk_norm.model_dump()}, needs the recipe's norm{heads}, or none"

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        if not config["qk_layernorm"]:
            return {}
        implied = config["hidden_size"] // config["num_attention_heads"]
        if family is not None and (config["head_dim"] or implied) != implied:
            raise HFImportError(
                f"qk_layernorm with head_dim={config['head_dim']} is not supported: {family}'s query/key norms are "
                f"hidden_size / heads = {implied} wide (transformers fails too)"
            )
        return {"attention.qk_norm": {"type": "layernorm", "eps": config["layer_norm_eps"]}}

    return Computed(
        "qk_layernorm",
        keys={"qk_layernorm": default},
        paths=("attention.qk_norm",),
        read=read,
        write=lambda recipe, weights: {"qk_layernorm": recipe.attention.qk_norm is not None},
        requires={"attention.qk_norm": same_norm},
    )


def lm_head(tied: bool) -> tuple[Row, ...]:
    """An LM head, tied to the token table by ``tie_word_embeddings`` (default ``tied``) or not."""
    return (Fixed("head.type", "lm"), Key("tie_word_embeddings", "head.tie_embeddings", tied, read=bool))


def rotary_dim(why: str) -> tuple[Row, ...]:
    """RoPE over the first ``rotary_dim`` dims of each head, in adjacent pairs, base 10000 (fixed in the code: no
    config key), GPT-J's and CodeGen's. ``rotary_dim`` None is the whole of a single head; with several heads the
    cos/sin table is then n_embd wide and fits no head: refused, saying ``why`` (formatted with ``heads``,
    ``n_embd`` and ``head_dim``)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        heads, head_dim, rotated = config["n_head"], config["n_embd"] // config["n_head"], config["rotary_dim"]
        if rotated is None and heads != 1:
            raise HFImportError(why.format(heads=heads, n_embd=config["n_embd"], head_dim=head_dim))
        return {"positional.rotary_fraction": rotary_fraction(head_dim if rotated is None else rotated, head_dim)}

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        width = recipe.attention.head_dim_for(recipe.d_model)
        return {"rotary_dim": rotary_dims(width, recipe.positional.rotary_fraction)}

    return (
        Fixed("positional.type", "rope"),
        Fixed("positional.theta", 10000.0),
        Fixed("positional.interleaved", True),
        Computed("rotary_dim", {"rotary_dim": 64}, ("positional.rotary_fraction",), read, write),
    )


def biased_head(family: str, why: str | None = None) -> tuple[Row, ...]:
    """An untied LM head with a bias (GPT-J's, Phi's, CodeGen's): tying is refused (``why``, by default that zoo's
    tied head has no bias)."""
    why = why or f"{family}'s LM head has a bias, and zoo's tied head has none (tie_embeddings excludes bias)"
    return (
        Fixed("head.type", "lm"),
        Fixed("head.tie_embeddings", False),
        Fixed("head.bias", True),
        Refused("tie_word_embeddings", lambda v: not v, why, export=False),
    )


def head_bias(key: str, family: str) -> Computed:
    """An LM head with a bias where the config flag ``key`` says so (PhiMoE's ``lm_head_bias``); a tied head with a
    bias is refused, as zoo's tied head has none."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        if config[key] and config["tie_word_embeddings"]:
            raise HFImportError(
                f"{key}=True with tie_word_embeddings=True is not supported: {family}'s tied head keeps a bias of "
                "its own, and zoo's tied head has none (tie_embeddings excludes bias)"
            )
        return {"head.bias": bool(config[key])}

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        return {key: recipe.head.bias}

    return Computed("head bias", keys={key: False}, paths=("head.bias",), read=read, write=write)


def dropout(key: str, *also: str, default: float = 0.0) -> Computed:
    """zoo's one dropout: read from ``key`` (the residual branches'), written to it and to the keys ``also`` names
    (GPT-J's and Phi's embeddings' dropout)."""
    return Computed(
        "dropout",
        keys=dict.fromkeys((key, *also), default),
        paths=("dropout",),
        read=lambda config, recipe: {"dropout": config[key]},
        write=lambda recipe, weights: dict.fromkeys((key, *also), recipe.dropout),
    )


def sublayer_dropout(key: str, embedding: str, *, same: bool = False) -> tuple[Row, ...]:
    """zoo's one dropout where the MLP has none besides it (``ffn.dropout`` stays 0: Phi-3's has none, StarCoder2's
    is the residual one): read from ``key`` (after each sub-layer), written to it and to ``embedding`` (after the
    embedding); with ``same``, the two must agree on import."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        residual, embedded = config[key], config[embedding]
        if same and residual != embedded:
            raise HFImportError(
                f"{key}={residual!r} and {embedding}={embedded!r} differ: zoo has one dropout for the "
                "sub-layer outputs and the embedded input (these only matter when training)"
            )
        return {"dropout": residual}

    return Fixed("ffn.dropout", 0.0, imported=False), replace(dropout(key, embedding), read=read)


# ---------------------------------------------------------------------------------------------- weight rows


def linear_rules(hf: str, zoo: str, *modules: str) -> tuple[Rule, ...]:
    """The weight and bias rows of each ``"<HF module> <zoo module>"`` pair, under the prefixes ``hf`` and ``zoo``."""
    pairs = [module.split() for module in modules]
    return tuple(Rule(f"{hf}{a}.{kind}", f"{zoo}{b}.{kind}") for a, b in pairs for kind in ("weight", "bias"))


NORM_BIASES = (
    Rule("model.layers.{i}.input_layernorm.bias", "blocks.{i}.attention_norm.bias"),
    Rule("model.layers.{i}.post_attention_layernorm.bias", "blocks.{i}.ffn_norm.bias"),  # a sequential block's
    Rule("model.norm.bias", "final_norm.bias"),
)
"""The biases of Llama's norms where a family makes them LayerNorms (StableLM, PhiMoE)."""


def fused_qkv(module: str) -> tuple[Rule, ...]:
    """A fused ``query_key_value`` (weight and bias) laid out per key/value head (``grouped_qkv``), split into
    zoo's q, k and v."""
    return (Rule(f"{module}.weight", QKV_WEIGHTS, grouped_qkv), Rule(f"{module}.bias", QKV_BIASES, grouped_qkv))
