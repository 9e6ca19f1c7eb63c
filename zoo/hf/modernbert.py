"""ModernBERT (``ModernBertForMaskedLM``, ``ModernBertForSequenceClassification``,
``ModernBertForTokenClassification``): a pre-norm encoder with rotary positions, local and global layers, GeGLU
and no biases.

The token embeddings are normalised (zoo's ``embed_norm``) and read as they are by the first layer, which has no
attention norm (``block.first_attention_norm: false``); every other layer normalises before its attention and
its MLP, and a final LayerNorm closes the stack. ``layer_types`` says which layers are global (every key) and
which local: a local query sees keys at most ``local_attention // 2`` away on either side (zoo's bidirectional
``window`` of ``local_attention // 2 + 1``). Each kind rotates with its own base (``rope_parameters``: global
160,000, local 10,000 in the published models); the recipe's attention and positional are those of the more
common kind and the other layers override them (as Gemma 3's). The fused ``Wqkv`` splits into q, k and v, the
fused ``Wi`` into the GeGLU's gate (its first half) and up projection. Every head starts with ModernBERT's
prediction head (dense, activation, LayerNorm): the masked LM's then decodes with the tied table, the sequence
classifier's reads the first token or the masked mean (``classifier_pooling``), the token classifier's every
token. The bare ``ModernBertModel`` has no head zoo's encoder could end in, so it does not import.
"""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from ._common import SPLIT_GATE_UP, defaults_except
from .layer_kinds import GLOBAL, LOCAL, layer_types_option, local_global
from .mapping import ACTIVATIONS, SPLIT_QKV, Option, Rule, num_labels
from .rows import BIAS_FIELDS, GATED, hidden_act
from .rows_classic import UP, bert_classes, by_head, is_head, labels, no_spares, pad
from .table import Computed, Fixed, Key, Refused, Require, Unread, family

LAYER, BLOCK = "model.layers.{i}", "blocks.{i}"
HEAD_ACTIVATIONS = {**ACTIVATIONS, "tanh": "tanh"}
"""``classifier_activation`` -> the zoo activation of the prediction head."""
HF_HEAD_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh", "relu": "relu", "silu": "silu", "tanh": "tanh"}


RULES = (
    Rule("model.embeddings.tok_embeddings.weight", "embedding.token.weight"),
    *(Rule(f"model.embeddings.norm.{k}", f"embed_norm.{k}") for k in ("weight", "bias")),
    *(
        Rule(f"{LAYER}.{hf}.{k}", f"{BLOCK}.{zoo}.{k}")
        for hf, zoo in (("attn_norm", "attention_norm"), ("attn.Wo", "attention.o_proj"), ("mlp_norm", "ffn_norm"))
        for k in ("weight", "bias")
    ),
    *(
        Rule(f"{LAYER}.attn.Wqkv.{k}", tuple(f"{BLOCK}.attention.{p}_proj.{k}" for p in "qkv"), SPLIT_QKV)
        for k in ("weight", "bias")
    ),
    *(
        Rule(f"{LAYER}.mlp.Wi.{k}", (f"{BLOCK}.ffn.gate_proj.{k}", f"{BLOCK}.ffn.up_proj.{k}"), SPLIT_GATE_UP)
        for k in ("weight", "bias")
    ),
    *(Rule(f"{LAYER}.mlp.Wo.{k}", f"{BLOCK}.ffn.down_proj.{k}") for k in ("weight", "bias")),
    *(Rule(f"model.final_norm.{k}", f"final_norm.{k}") for k in ("weight", "bias")),
    # The prediction head, in each task's zoo head.
    *(Rule(f"head.dense.{k}", f"head.transform.{k}", when=is_head("mlm")) for k in ("weight", "bias")),
    *(Rule(f"head.norm.{k}", f"head.norm.{k}", when=is_head("mlm")) for k in ("weight", "bias")),
    *(Rule(f"head.dense.{k}", f"head.pooler.dense.{k}") for k in ("weight", "bias")),
    *(Rule(f"head.norm.{k}", f"head.pooler.norm.{k}") for k in ("weight", "bias")),
    *(Rule(f"head.dense.{k}", f"head.transform.dense.{k}") for k in ("weight", "bias")),
    *(Rule(f"head.norm.{k}", f"head.transform.norm.{k}") for k in ("weight", "bias")),
    Rule("decoder.weight", "head.proj.weight", when=is_head("mlm")),  # only when untied
    Rule("decoder.bias", "head.proj.bias", when=is_head("mlm")),
    *(
        Rule(f"classifier.{k}", f"head.proj.{k}", when=is_head("classification", "token_classification"))
        for k in ("weight", "bias")
    ),
)

IGNORED = ("decoder.weight",)  # the tied copy of the token table


DROPOUT_WHY = (
    "zoo's dropout falls on the embeddings and every sub-layer's output at one rate (attention.dropout on the "
    "weights only); ModernBERT's {} dropout has no zoo counterpart, so only 0 (as published) trains alike"
)


def _rope_options(kind: str) -> tuple[Option, ...]:
    return (
        Option(
            f"rope_parameters.{kind}.rope_type",
            lambda v: v in (None, "default"),
            "zoo imports ModernBERT's unscaled rotary positions only (rope_type default)",
        ),
        Option(
            f"rope_parameters.{kind}.partial_rotary_factor",
            lambda v: v in (None, 1.0),
            "ModernBERT's attention rotates every head dim",
        ),
    )


HEADS = bert_classes("ModernBert", bare=False)  # ModernBertModel has no head zoo's encoder could end in
CLASSES = by_head(HEADS)


def layer_types(config: dict[str, Any]) -> list[str]:
    """Each layer's kind: ``layer_types``, else every ``global_attn_every_n_layers``-th layer from 0 global."""
    n, every = config["num_hidden_layers"], config["global_attn_every_n_layers"]
    types = config["layer_types"] or [LOCAL if i % every else GLOBAL for i in range(n)]
    if len(types) != n:
        raise HFImportError(f"layer_types has {len(types)} entries for num_hidden_layers={n}")
    return list(types)


def ropes(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The zoo rope of each kind of layer: ``rope_parameters``, else transformers 4's two bases."""
    given = config["rope_parameters"] or {}
    bases = {GLOBAL: config["global_rope_theta"], LOCAL: config["local_rope_theta"]}
    return {
        kind: {"type": "rope", "theta": float((given.get(kind) or {}).get("rope_theta", bases[kind]))} for kind in bases
    }


def head_spec(config: dict[str, Any], recipe: dict[str, Any], hf_class: str, names: Any) -> dict[str, Any]:
    """The head of the class (and its ``num_classes``): the prediction head's activation, biases and eps in each
    task's zoo head."""
    head_type = HEADS[hf_class]
    activation = HEAD_ACTIVATIONS[config["classifier_activation"]]
    eps, norm_bias, bias = config["norm_eps"], bool(config["norm_bias"]), bool(config["classifier_bias"])
    if head_type == "mlm":
        head = {"type": "mlm", "tie_embeddings": bool(config["tie_word_embeddings"]), "eps": eps}
        head.update(activation=activation, transform_bias=bias, norm_bias=norm_bias, bias=bool(config["decoder_bias"]))
        return {"head": head}
    common = {"eps": eps, "norm_bias": norm_bias, "dropout": config["classifier_dropout"]}
    if head_type == "classification":
        head = {"type": "classification", "pool": config["classifier_pooling"], "pooler": True, **common}
        head.update(pooler_activation=activation, pooler_bias=bias, pooler_norm=True)
    else:
        head = {"type": "token_classification", "transform": True, "activation": activation, **common}
        head["transform_bias"] = bias
    return {"head": head, "num_classes": num_labels(config)}


def plan(recipe) -> list[tuple[int | None, Any]]:
    """(window, rope config) of every layer: its attention's window and rotary, else the stack's positional."""
    out = []
    for placed in recipe.layer_plan("encoder"):
        attention = placed["attention"][0]
        rope = recipe.positional if attention.rotary is None else attention.rotary
        out.append((attention.window, rope))
    return out


def hf_layers(recipe: Any, weights: Any) -> dict[str, Any]:
    """The way back of ``layer_types``, ``ropes`` and the attention: each kind's rope, the local window."""
    layers = plan(recipe)
    kinds = {LOCAL: recipe.positional, GLOBAL: recipe.positional}
    for window, rope in layers:
        kinds[LOCAL if window is not None else GLOBAL] = rope
    window = next((w for w, _ in layers if w is not None), None)
    return {
        "num_attention_heads": recipe.attention.num_heads,
        "attention_bias": recipe.attention.bias,
        "layer_types": [LOCAL if w is not None else GLOBAL for w, _ in layers],
        "rope_parameters": {kind: {"rope_type": "default", "rope_theta": rope.theta} for kind, rope in kinds.items()},
        "local_attention": 2 * (window - 1) if window is not None else 128,
    }


def read_layers(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    attention = {"type": "mha", "num_heads": config["num_attention_heads"], "bias": bool(config["attention_bias"])}
    window = config["local_attention"] // 2 + 1  # |query - key| <= local_attention // 2
    return local_global(layer_types(config), attention, window, ropes(config))


def hf_head(recipe: Any, weights: Any) -> dict[str, Any]:
    head = recipe.head
    if head.type == "classification":
        activation, bias = head.pooler_activation, head.pooler_bias
    else:
        activation, bias = head.activation, head.transform_bias
    return {
        "decoder_bias": head.bias if head.type == "mlm" else True,
        "classifier_pooling": head.pool if head.type == "classification" else "cls",
        "classifier_dropout": head.dropout if head.type != "mlm" else 0.0,
        "classifier_bias": bias,
        "classifier_activation": HF_HEAD_ACTIVATIONS[activation],
        "tie_word_embeddings": head.type != "mlm" or head.tie_embeddings,
        **(labels(recipe.num_classes) if head.type != "mlm" else {}),
    }


def _layers(recipe) -> str | None:
    """A requirement: the layers differ only in their attention's window and rotary; one window for the local
    layers, one rope for each kind, every rope a full unscaled rotation."""
    if "window" not in type(recipe.attention).model_fields:
        return None  # a plugin's mixer: the attention.type requirement says so
    base = recipe.attention.model_dump(exclude={"window", "rotary"})
    for i, placed in enumerate(recipe.layer_plan("encoder")):
        if placed["norm"][0] != recipe.norm or placed["ffn"][0] != recipe.ffn:
            return f"layers: layer {i} has its own norm or ffn; ModernBERT's layers differ only in their attention"
        if placed["attention"][0].model_dump(exclude={"window", "rotary"}) != base:
            return f"layers: layer {i}'s attention differs from attention in more than window and rotary"
    layers = plan(recipe)
    if len({w for w, _ in layers} - {None}) > 1:
        return "layers: the local layers have different windows; ModernBERT has one local_attention"
    kinds: dict[bool, set[str]] = {True: set(), False: set()}
    for window, rope in layers:
        if rope.type != "rope" or rope.model_dump(exclude={"theta"}) != type(rope)().model_dump(exclude={"theta"}):
            return "layers: every layer's rotary is a rope of full, unscaled, non-interleaved rotation in ModernBERT"
        kinds[window is not None].add(rope.model_dump_json())
    if any(len(r) > 1 for r in kinds.values()):
        return "layers: the local (or the global) layers have different ropes; ModernBERT has one rope of each"
    return None


def _fits_head(recipe) -> str | None:
    head, norm = recipe.head, recipe.norm
    if head.type not in CLASSES:
        return f"head.type is {head.type!r}, needs one of {', '.join(map(repr, CLASSES))}"
    spares = no_spares(head)
    if spares:
        return spares
    if head.eps != norm.eps or head.norm_bias != norm.bias:
        return f"head.eps / norm_bias are {head.eps} / {head.norm_bias}, needs norm's ({norm.eps} / {norm.bias})"
    if head.type == "mlm" and head.spare_bias:
        return "head.spare_bias is True, needs False (ModernBERT's decoder has one bias)"
    if head.type == "classification" and not (head.pooler and head.pooler_norm):
        return "head.pooler and pooler_norm must be True (ModernBERT's prediction head: dense, activation, norm)"
    if head.type == "token_classification" and not head.transform:
        return "head.transform is False, needs True (ModernBERT's prediction head on every token)"
    return None


def _biases(recipe) -> str | None:
    """A requirement: one attention_bias for the four projections."""
    on = recipe.attention.biases()
    if len(set(on.values())) > 1:
        return f"attention biases q/k/v/o are {'/'.join(str(on[p]) for p in 'qkvo')}, needs one attention_bias"
    return None


MODERNBERT = family(
    "modernbert",
    classes=tuple(HEADS),
    rules=RULES,
    ignored=IGNORED,
    head_prefixes=("head.", "decoder.", "classifier."),
    recipes=("modernbert-base",),
    hf_class=lambda recipe: CLASSES[recipe.head.type],
    constants={},
    rows=(
        Fixed("architecture", "encoder"),
        Fixed("block.norm_position", "pre"),
        Fixed("block.first_attention_norm", False),
        Fixed("embed_norm", True),
        Fixed("final_norm", True, also=(None,)),
        Fixed("type_vocab_size", 0, imported=False),
        Key("vocab_size", "vocab_size", 50368),
        Key("hidden_size", "d_model", 768),
        Key("num_hidden_layers", "num_layers", 22),
        Key("max_position_embeddings", "max_len", 8192),
        pad(50283),
        Computed(
            "layers",  # each layer's kind, window and rope: the recipe's attention and positional, and overrides
            keys={
                "num_attention_heads": 12,
                "attention_bias": False,
                "layer_types": None,
                "global_attn_every_n_layers": 3,  # transformers 4's key: every n-th layer (from 0) is global
                "rope_parameters": None,
                "global_rope_theta": 160000.0,  # transformers 4's keys of the two bases
                "local_rope_theta": 10000.0,
                "local_attention": 128,
            },
            paths=(
                "positional.*",
                "attention.num_heads",
                "attention.window",
                "attention.rotary",
                *BIAS_FIELDS,
                "layers",
            ),
            read=read_layers,
            write=hf_layers,
            requires={
                "positional.type": "rope",
                "positional.*": defaults_except("positional", "theta"),
                "attention.type": "mha",
                "attention.biases": _biases,
                "layers": _layers,
            },
            legacy=("global_attn_every_n_layers", "global_rope_theta", "local_rope_theta"),
        ),
        Require("attention.dropout", 0.0),  # on the weights; the output dropout has no zoo counterpart
        Fixed("norm.type", "layernorm"),
        Key("norm_eps", "norm.eps", 1e-5),
        Key("norm_bias", "norm.bias", False, read=bool),
        Computed(
            "gated ffn",  # act(first half of Wi) * second half
            keys={"hidden_activation": "gelu", "intermediate_size": 1152},
            paths=("ffn.hidden", "ffn.approximate"),
            read=lambda config, recipe: {
                **{f"ffn.{k}": v for k, v in GATED[config["hidden_activation"]].items()},
                "ffn.hidden": config["intermediate_size"],
            },
            write=lambda recipe, weights: {
                "hidden_activation": hidden_act(recipe.ffn),
                "intermediate_size": weights[UP].shape[0],
            },
            requires={"ffn.type": ("geglu", "swiglu", "reglu")},
        ),
        Key("mlp_bias", "ffn.bias", False),
        Require("ffn.dropout", 0.0),
        Computed(
            "head",
            keys={
                "classifier_pooling": "cls",
                "classifier_dropout": 0.0,
                "classifier_bias": False,
                "classifier_activation": "gelu",
                "decoder_bias": True,
                "tie_word_embeddings": True,
            },
            paths=("head.*", "num_classes"),
            read=head_spec,
            write=hf_head,
            requires={"head": _fits_head},
            checkpoint=True,
        ),
        Refused(
            "hidden_activation",
            lambda v: v in GATED,
            f"zoo's gated FFNs apply {', '.join(GATED)} exactly (ModernBERT's MLP is act(first half) * second half)",
        ),
        Refused(
            "classifier_activation",
            lambda v: v in HEAD_ACTIVATIONS,
            f"zoo's prediction head applies {', '.join(HEAD_ACTIVATIONS)} exactly",
        ),
        Refused("classifier_pooling", lambda v: v in ("cls", "mean"), "zoo pools the first token or the masked mean"),
        *(
            Refused(key, lambda v: not v, DROPOUT_WHY.format(key), export=0.0)
            for key in ("embedding_dropout", "mlp_dropout")
        ),
        Refused("attention_dropout", lambda v: not v, DROPOUT_WHY.format("attention output"), export=0.0),
        Refused("rope_scaling", lambda v: v is None, "zoo imports ModernBERT's unscaled rotary positions only"),
        *_rope_options(GLOBAL),
        *_rope_options(LOCAL),
        layer_types_option("ModernBERT"),
        Unread("initializer_cutoff_factor", "where a fresh initialisation truncates; imported weights replace it"),
        Unread("cls_token_id", "a tokenizer setting (the [CLS] id), not part of the network"),
        Unread("sep_token_id", "a tokenizer setting (the [SEP] id), not part of the network"),
        Unread("deterministic_flash_attn", "a flash-attention kernel setting; the attention computed is the same"),
        Unread(
            "sparse_prediction",
            "computes the training loss over the labelled positions only; the logits of every position are the same",
        ),
        Unread("sparse_pred_ignore_index", "the label that sparse_prediction skips, a training-loss setting"),
    ),
)
