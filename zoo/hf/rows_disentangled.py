"""Rows of DeBERTa's disentangled attention (``zoo/hf/table.py``): the relative table of ``deberta_relative`` and
the attention's position terms; a token table narrower than the blocks (``embedding_size``, projected without a
bias); the masked LM's two layouts and the classifiers of ``ContextPooler``."""

from collections.abc import Mapping
from typing import Any

from zoo.errors import HFImportError

from .mapping import ACTIVATIONS, HF_ACTIVATIONS, Option, num_labels
from .rows_classic import labels
from .table import Computed

TERMS = ("c2p", "p2c")
POOLER_ACTIVATIONS = {k: v for k, v in ACTIVATIONS.items() if v in ("gelu", "gelu_tanh", "relu", "silu")}
POOLER_ACTIVATIONS["tanh"] = "tanh"
"""HF ``pooler_hidden_act`` -> the classification head's ``pooler_activation`` that computes the same."""
HF_POOLER_ACTIVATIONS = {zoo: HF_ACTIVATIONS.get(zoo, zoo) for zoo in POOLER_ACTIVATIONS.values()}


def position_terms(value: Any) -> list[str]:
    """``pos_att_type`` as a list of terms: a config may hold ``"p2c|c2p"`` (the class splits it) or a list."""
    if value is None:
        return []
    terms = value.lower().split("|") if isinstance(value, str) else list(value)
    return [t.strip() for t in terms]


def _relative(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    terms = position_terms(config["pos_att_type"])
    norms = [n.strip() for n in str(config["norm_rel_ebd"]).lower().split("|")]
    relative = config["max_relative_positions"]
    return {
        "attention.pos_att_type": [t for t in TERMS if t in terms],
        "attention.share_att_key": bool(config["share_att_key"]),
        "positional": {
            "type": "deberta_relative",
            "position_buckets": max(config["position_buckets"], 0),
            "max_relative_positions": relative if relative >= 1 else None,
            "norm": "layer_norm" in norms,
            "eps": config["layer_norm_eps"],
            "absolute": bool(config["position_biased_input"]),
        },
    }


def _relative_config(recipe: Any, weights: Any) -> dict[str, Any]:
    positional, attention = recipe.positional, recipe.attention
    return {
        "relative_attention": True,
        "pos_att_type": list(attention.pos_att_type),
        "share_att_key": attention.share_att_key,
        "position_buckets": positional.position_buckets or -1,
        "max_relative_positions": positional.max_relative_positions or -1,
        "norm_rel_ebd": "layer_norm" if positional.norm else "none",
        "position_biased_input": positional.absolute,
    }


def _same_eps(recipe: Any) -> str | None:
    table, blocks = recipe.positional.eps, getattr(recipe.norm, "eps", None)
    return None if table == blocks else f"positional.eps is {table}, needs norm.eps ({blocks}): one layer_norm_eps"


RELATIVE = Computed(
    "relative attention",
    keys={
        "pos_att_type": None,
        "share_att_key": False,
        "position_buckets": -1,
        "max_relative_positions": -1,
        "norm_rel_ebd": "none",
        "position_biased_input": True,
    },
    paths=("attention.pos_att_type", "attention.share_att_key", "positional.*"),
    read=_relative,
    write=_relative_config,
    requires={"positional.type": "deberta_relative", "positional.eps": _same_eps},
)
"""``relative_attention``'s table and terms: ``deberta_relative`` positions, the attention's pos_att_type."""


def _narrow(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    size = config["embedding_size"]
    if size is None or size == config["hidden_size"]:
        return {}
    if config["type_vocab_size"] > 0 or config["position_biased_input"]:
        raise HFImportError(
            f"embedding_size={size} with token types (type_vocab_size={config['type_vocab_size']}) or absolute "
            f"positions (position_biased_input={config['position_biased_input']}) is not supported: DeBERTa adds them "
            "before projecting to hidden_size, zoo after"
        )
    return {"embedding.proj_dim": size}


NARROW = Computed(
    "embedding size",
    keys={"embedding_size": None},
    paths=("embedding.proj_dim",),
    read=_narrow,
    write=lambda recipe, weights: {"embedding_size": recipe.embedding.proj_dim or recipe.d_model},
)
"""``embedding_size``: a token table that narrow, projected to hidden_size without a bias (``embed_proj``)."""


def lm_layout(state: Mapping[str, Any]) -> dict[str, Any]:
    """DebertaV2ForMaskedLM's two layouts: ``legacy: false`` names its head ``lm_predictions.lm_head`` (the decoder:
    the word embeddings); read as the legacy ``cls.predictions`` names, the layout zoo writes."""
    moved = {
        "lm_predictions.lm_head.dense.": "cls.predictions.transform.dense.",
        "lm_predictions.lm_head.LayerNorm.": "cls.predictions.transform.LayerNorm.",
        "lm_predictions.lm_head.bias": "cls.predictions.bias",
    }
    out = {}
    for name, tensor in state.items():
        for old, new in moved.items():
            if name.startswith(old):
                name = new + name[len(old) :]
        out[name] = tensor
    return out


def _fits(recipe: Any) -> str | None:
    """The head as DeBERTa's classes build it: the masked LM's transform of hidden_act and layer_norm_eps, tied,
    narrowing to a narrow table; the sequence classifier's ContextPooler ([CLS], dense, pooler_hidden_act)."""
    head, eps = recipe.head, getattr(recipe.norm, "eps", None)
    wanted: dict[str, Any] = {}
    if head.type == "mlm":
        wanted = {"tie_embeddings": True, "spare_bias": False, "activation": getattr(recipe.ffn, "activation", None)}
        wanted |= {"eps": eps, "proj_dim": recipe.embedding.proj_dim, "spare_pooler": False, "spare_nsp": False}
        wanted |= dict.fromkeys(("transform_bias", "norm_bias", "bias"), True)
    elif head.type == "classification":
        wanted = {"pool": "cls", "pooler": True, "pooler_bias": True, "pooler_norm": False, "distillation": False}
        wanted |= {"spare_pooler": False}
    elif head.type == "token_classification":
        wanted = {"transform": False, "spare_pooler": False}
    else:
        return f"head.type is {head.type!r}, needs 'mlm', 'classification' or 'token_classification'"
    off = [f"head.{k} is {getattr(head, k)!r}, needs {v!r}" for k, v in wanted.items() if getattr(head, k) != v]
    if head.type == "classification" and head.pooler_activation not in HF_POOLER_ACTIVATIONS:
        wanted_acts = ", ".join(HF_POOLER_ACTIVATIONS)
        off.append(f"head.pooler_activation is {head.pooler_activation!r}, needs one of {wanted_acts}")
    return "; ".join(off) or None


POOLER_ACTIVATION = Option(
    "pooler_hidden_act",
    lambda v: v in POOLER_ACTIVATIONS,
    f"the pooler's activation must be one zoo computes identically ({', '.join(POOLER_ACTIVATIONS)})",
)


def deberta_heads(classes: Mapping[str, str]) -> Computed:
    """The head of each class (``classes``: HF class -> zoo head type): the masked LM, or a sequence (``cls_dropout``,
    else hidden_dropout_prob) or token classifier; ``legacy`` written as the layout zoo exports."""

    def read(config: dict[str, Any], recipe: dict[str, Any], hf_class: str, names: Any) -> dict[str, Any]:
        kind = classes[hf_class]
        pooler = config["pooler_hidden_size"]
        if kind == "classification" and pooler is not None and pooler != config["hidden_size"]:
            raise HFImportError(f"pooler_hidden_size={pooler} is not supported: the pooler keeps hidden_size")
        if kind == "mlm":
            act, eps = ACTIVATIONS[config["hidden_act"]], config["layer_norm_eps"]
            return {"head": {"type": "mlm", "tie_embeddings": True, "activation": act, "eps": eps}}
        dropout = config["cls_dropout"] if kind == "classification" else None
        head = {"type": kind, "dropout": config["hidden_dropout_prob"] if dropout is None else dropout}
        if kind == "classification":
            head |= {
                "pool": "cls",
                "pooler": True,
                "pooler_activation": POOLER_ACTIVATIONS[config["pooler_hidden_act"]],
            }
        return {"head": head, "num_classes": num_labels(config)}

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        head, out = recipe.head, {"legacy": True, "pooler_hidden_size": recipe.d_model}
        if head.type != "mlm":
            out |= labels(recipe.num_classes)
        if head.type == "classification":
            out |= {"cls_dropout": head.dropout, "pooler_hidden_act": HF_POOLER_ACTIVATIONS[head.pooler_activation]}
        return out

    return Computed(
        "head",
        keys={"legacy": True, "pooler_hidden_size": None, "pooler_hidden_act": "gelu", "cls_dropout": None},
        paths=("head.*", "num_classes"),
        read=read,
        write=write,
        requires={"head": _fits},
        checkpoint=True,
        conditional=("cls_dropout", "pooler_hidden_act"),
    )
