"""RoBERTa (``RobertaModel``, ``RobertaForMaskedLM``, ``RobertaForSequenceClassification``,
``RobertaForTokenClassification``): BERT's network with fairseq's positions and its own head names.

Positions are numbered from the token ids: the k-th token that is not ``pad_token_id`` reads row
``pad_token_id + k`` of ``position_embeddings``, every padding token row ``pad_token_id`` (zoo's
``positional: {type: learned, offset: pad_token_id + 1, padding_idx: pad_token_id}``), so a table of
``max_position_embeddings`` rows holds ``max_position_embeddings - pad_token_id - 1`` positions (roberta-base:
514 rows, 512 positions, ``max_len``). The masked-LM head (``lm_head``) always applies the exact GELU, whatever
``hidden_act`` says; the sequence classifier (``classifier.dense``, ``classifier.out_proj``) is zoo's
classification head with a tanh pooler on the first token.
"""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from . import bert
from .mapping import Family, Rule

BODY = tuple(
    Rule(r.hf.replace("bert.", "roberta.", 1), r.zoo, r.transform, r.when)
    for r in bert.RULES
    if isinstance(r.hf, str) and r.hf.startswith("bert.") and not r.zoo_names[0].startswith("head.pooler.")
)
"""BERT's rows of the embeddings, the blocks and the bare model's pooler, under ``roberta.``."""


def _head(kind: str):
    return lambda recipe: recipe.head.type == kind


def _mlm_bias(*, spare: bool):
    return lambda recipe: recipe.head.type == "mlm" and recipe.head.spare_bias == spare


RULES = (
    *BODY,
    # RobertaForMaskedLM: dense, GELU, LayerNorm, then the decoder (tied to the word embeddings unless untied).
    Rule("lm_head.dense.weight", "head.transform.weight"),
    Rule("lm_head.dense.bias", "head.transform.bias"),
    Rule("lm_head.layer_norm.weight", "head.norm.weight"),
    Rule("lm_head.layer_norm.bias", "head.norm.bias"),
    Rule("lm_head.decoder.weight", "head.proj.weight", when=_head("mlm")),
    Rule("lm_head.bias", "head.proj.bias", when=_mlm_bias(spare=False)),
    Rule("lm_head.decoder.bias", "head.proj.bias", when=_mlm_bias(spare=True)),
    Rule("lm_head.bias", "head.bias", when=_mlm_bias(spare=True)),
    # RobertaForSequenceClassification: dense + tanh on the first token, then out_proj.
    Rule("classifier.dense.weight", "head.pooler.dense.weight"),
    Rule("classifier.dense.bias", "head.pooler.dense.bias"),
    Rule("classifier.out_proj.weight", "head.proj.weight", when=_head("classification")),
    Rule("classifier.out_proj.bias", "head.proj.bias", when=_head("classification")),
    # RobertaForTokenClassification: a classifier on every token.
    Rule("classifier.weight", "head.proj.weight", when=_head("token_classification")),
    Rule("classifier.bias", "head.proj.bias", when=_head("token_classification")),
)

IGNORED = (
    "roberta.embeddings.position_ids",  # buffers of older checkpoints
    "roberta.embeddings.token_type_ids",
    "lm_head.decoder.weight",  # the tied copy of the word embeddings
    "lm_head.decoder.bias",  # tied embeddings: the same tensor as lm_head.bias
    "roberta.pooler.dense.weight",  # the heads have no pooler: HF drops it from pre-training checkpoints too
    "roberta.pooler.dense.bias",
)

DEFAULTS: dict[str, Any] = {
    **bert.DEFAULTS,
    "vocab_size": 50265,
    "pad_token_id": 1,
}

HEADS = {
    "RobertaModel": "pooler",
    "RobertaForMaskedLM": "mlm",
    "RobertaForSequenceClassification": "classification",
    "RobertaForTokenClassification": "token_classification",
}
CLASSES = {kind: name for name, kind in HEADS.items()}


def positions(pad: int | None, rows: int) -> dict[str, Any]:
    """The zoo positional spec and ``max_len`` of a table of ``rows`` rows numbered from ``pad``.

    Raises:
        HFImportError: no pad id (RoBERTa numbers positions from it), or a table too short to hold a position.
    """
    if pad is None or pad < 0:
        raise HFImportError(f"pad_token_id={pad!r}: RoBERTa numbers its positions from the pad id; it needs one")
    if rows <= pad + 1:
        raise HFImportError(
            f"max_position_embeddings={rows} with pad_token_id={pad}: the table holds no position (positions start "
            f"at row pad_token_id + 1)"
        )
    return {"positional": {"type": "learned", "offset": pad + 1, "padding_idx": pad}, "max_len": rows - pad - 1}


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    head_type = HEADS[hf_class]
    bert.relative_positions(config, names)
    extra: dict[str, Any] = {}
    if head_type == "pooler":
        head: dict[str, Any] = {"type": "pooler", "pool": "cls"}
    elif head_type == "mlm":
        head = bert.mlm_head(config, names, "lm_head.decoder.bias")
    else:
        head, extra = bert.classifier_head(config, head_type)
    out = {**bert.body(config), "head": head, **extra}
    out.update(positions(config["pad_token_id"], config["max_position_embeddings"]))
    return out


def config(recipe, weights) -> dict[str, Any]:
    out = bert.config(recipe, weights)
    out["max_position_embeddings"] = recipe.max_len + recipe.positional.offset
    return out


def _positions(recipe) -> str | None:
    """A requirement: positions numbered from the pad id, as RoBERTa numbers them."""
    pad, positional = recipe.pad_token_id, recipe.positional
    if pad is None:
        return "pad_token_id is absent, needs the pad id RoBERTa numbers its positions from"
    if positional.padding_idx != pad or positional.offset != pad + 1:
        return (
            f"positional.padding_idx is {positional.padding_idx!r} and offset {positional.offset}, needs "
            f"{pad} and {pad + 1} (RoBERTa numbers positions from pad_token_id)"
        )
    return None


def _fits_head(recipe) -> str | None:
    head = recipe.head
    if getattr(head, "spare_pooler", False):
        return "head.spare_pooler is True, needs False (only BigBird's heads keep an unused pooler)"
    if getattr(head, "spare_nsp", False):
        return "head.spare_nsp is True, needs False (only BigBirdForPreTraining keeps an unused next-sentence head)"
    if head.type == "mlm":  # RoBERTa's lm_head applies the exact GELU whatever hidden_act says
        if head.activation != "gelu" or not (head.transform_bias and head.norm_bias and head.bias):
            return "head.activation must be 'gelu' and its biases on (RoBERTa's lm_head)"
        if recipe.norm.type == "layernorm" and head.eps != recipe.norm.eps:
            return f"head.eps is {head.eps}, needs norm.eps ({recipe.norm.eps}) (HF shares layer_norm_eps)"
        if head.spare_bias == head.tie_embeddings:
            return f"head.spare_bias is {head.spare_bias}, needs {not head.tie_embeddings} (as BERT's)"
        return None
    return bert._fits_head(recipe)


REQUIREMENTS = {
    **{k: v for k, v in bert.REQUIREMENTS.items() if k not in ("positional.offset", "head")},
    "positional.offset": lambda recipe: None,  # checked with the padding id below
    "positional.padding_idx": _positions,
    "head": _fits_head,
}

ROBERTA = Family(
    name="roberta",
    model_type="roberta",
    classes=tuple(HEADS),
    base_prefix="roberta.",
    head_prefixes=("lm_head.", "classifier."),
    defaults=DEFAULTS,
    options=bert.OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("roberta-base",),
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: CLASSES[recipe.head.type],
    base_class="RobertaModel",
    layout=bert.rename_tf_layer_norms,
)
