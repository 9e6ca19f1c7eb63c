"""BERT-like encoders' heads as data (``zoo/hf/table.py``): a head variant says, per head type, which fields the
family's classes build at what value; the import sets them and the export requires them (BERT, RoBERTa, BigBird,
ELECTRA). Also: the HF class of a head, rules in force for one head type, a family renamed under other classes."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .mapping import ACTIVATIONS, Family, Requirement, Rule
from .rows_classic import bert_classes, by_head, encoder_heads, is_head
from .table import Computed

Spec = Mapping[str, Mapping[str, Any]]
"""Head type (or HF class, on import) -> {head field: value}; a value is a constant, a ``Same``, or (required only)
a function of the recipe."""


@dataclass(frozen=True)
class Same:
    """A head field that follows the network: ``config(config)`` on import, ``recipe(recipe)`` on export."""

    config: Callable[[Mapping[str, Any]], Any]
    recipe: Callable[[Any], Any]


def ffn_activation(recipe: Any) -> Any:
    """The FFN's activation (None without one): BERT's one ``hidden_act``, which its heads apply too."""
    return getattr(recipe.ffn, "activation", None)


HIDDEN_ACT = Same(lambda config: ACTIVATIONS[config["hidden_act"]], ffn_activation)
"""A head's activation that is the config's ``hidden_act``, the FFN's."""

CLS_POOLER = {"pool": "cls", "pooler": True}
"""A sequence classifier that pools [CLS] through a pooler (BERT's)."""

BERT_MLM = {
    "spare_bias": lambda recipe: not recipe.head.tie_embeddings,  # untied (transformers 5): cls.predictions.bias too
    "activation": ffn_activation,
    "transform_bias": True,
    "norm_bias": True,
    "bias": True,
    "eps": lambda recipe: getattr(recipe.norm, "eps", None),  # HF shares layer_norm_eps
    "proj_dim": None,  # the transform keeps the width (ELECTRA's and ALBERT's narrow to the table's)
}
"""BertForMaskedLM's head: biased throughout, its transform of hidden_act and layer_norm_eps."""

BERT_HEADS: Spec = {
    "pooler": {"pool": "cls"},
    "mlm": {"spare_pooler": False, "spare_nsp": False, **BERT_MLM},
    "classification": {**CLS_POOLER, "pooler_activation": "tanh", "pooler_norm": False, "distillation": False}
    | {"spare_pooler": False},
    "token_classification": {"spare_pooler": False, "transform": False},
}
"""BERT's heads, keeping no unused pooler nor next-sentence head (BigBird's do)."""


def head_fits(spec: Spec, strict: bool = False) -> Requirement:
    """A requirement: the recipe's head is of a type ``spec`` names, with the fields ``spec`` gives that type at
    their values; ``strict``: every other field at its default too, but those a config sets freely
    (``tie_embeddings``, ``dropout``, ``eps``): the head as the family's class builds it."""

    def value(wanted: Any, recipe: Any) -> Any:
        if isinstance(wanted, Same):
            return wanted.recipe(recipe)
        return wanted(recipe) if callable(wanted) else wanted

    def check(recipe: Any) -> str | None:
        head = recipe.head
        if head.type not in spec:
            return f"head.type is {head.type!r}, needs one of {', '.join(map(repr, spec))}"
        fields = {k: value(v, recipe) for k, v in spec[head.type].items()}
        if strict:
            free = {k: getattr(head, k) for k in ("type", "tie_embeddings", "dropout", "eps") if hasattr(head, k)}
            defaults = {k: f.get_default(call_default_factory=True) for k, f in type(head).model_fields.items()}
            fields = defaults | fields | free
        off = [f"head.{k} is {getattr(head, k)!r}, needs {v!r}" for k, v in fields.items() if getattr(head, k) != v]
        return "; ".join(off) or None

    return check


def head_fields(spec: Spec) -> Callable[[dict[str, Any], str, dict[str, Any]], dict[str, Any]]:
    """``encoder_heads``' quirks: the head gets the fields ``spec`` gives its type, then its HF class (a ``Same``:
    read from the config)."""

    def quirks(config: dict[str, Any], hf_class: str, head: dict[str, Any]) -> dict[str, Any]:
        for key in (head["type"], hf_class):
            head.update({k: v.config(config) if isinstance(v, Same) else v for k, v in spec.get(key, {}).items()})
        return head

    return quirks


def variant_heads(
    classes: Mapping[str, str], decoder_bias: str, required: Spec, built: Spec | None = None, strict: bool = False
) -> Computed:
    """``encoder_heads`` of a head variant: the import adds ``built``'s fields (``head_fields``), the export requires
    a head type ``required`` names, with ``built``'s and ``required``'s fields for it (``head_fits``)."""
    built = built or {}
    spec = {kind: {**fields, **built.get(kind, {})} for kind, fields in required.items()}  # built: as the class is
    return encoder_heads(classes, decoder_bias, head_fits(spec, strict), head_fields(built) if built else None)


def head_class(classes: Mapping[str, str], **flags: str) -> Callable[[Any], str]:
    """The HF class a recipe exports as: the class of the first head ``flags`` field set (``spare_nsp=...``), else
    the first of ``classes`` (HF class -> head type) with the recipe's head type."""
    kinds = by_head(classes)

    def hf_class(recipe: Any) -> str:
        flagged = [name for flag, name in flags.items() if getattr(recipe.head, flag, False)]
        return flagged[0] if flagged else kinds[recipe.head.type]

    return hf_class


def when_head(kind: str, rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    """``rules`` in force only for a recipe whose head is ``kind`` (a rule's own condition, where it has one)."""
    return tuple(replace(rule, when=rule.when or is_head(kind)) for rule in rules)


def renamed_encoder(
    parent: Family,
    heads: Callable[[Mapping[str, str]], Computed],
    model_type: str,
    prefix: str,
    rows: tuple[Any, ...] = (),
    **changes: Any,
) -> Family:
    """``parent``'s network and weight names under another ``model_type`` and class ``prefix`` (BERT's classes,
    ``bert_classes``; ``heads(classes)``: the parent's head row under them); ``rows`` and ``changes``: ``derive``'s
    other rows and arguments."""
    classes = bert_classes(prefix)
    return parent.derive(
        model_type,
        classes=tuple(classes),
        hf_class=head_class(classes),
        rows=(heads(classes), *rows),
        base_class=f"{prefix}Model",
        **changes,
    )


def hidden_dropout_heads(row: Computed) -> Computed:
    """A head row (``encoder_heads``) of a family whose config has no ``classifier_dropout``: its classifiers drop
    out at ``hidden_dropout_prob`` (MPNet's), which the import gives them and the export requires of them."""

    def read(config: dict[str, Any], recipe: dict[str, Any], *checkpoint: Any) -> dict[str, Any]:
        return row.read({**config, "classifier_dropout": None}, recipe, *checkpoint)

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        return {k: v for k, v in row.write(recipe, weights).items() if k != "classifier_dropout"}

    def same_dropout(recipe: Any) -> str | None:
        head = recipe.head
        if head.type in ("classification", "token_classification") and head.dropout != recipe.dropout:
            return f"head.dropout is {head.dropout}, needs dropout ({recipe.dropout}): the config has one dropout"
        return None

    keys = {k: v for k, v in row.keys.items() if k != "classifier_dropout"}
    requires = {**row.requires, "head.dropout": same_dropout}
    return replace(row, keys=keys, read=read, write=write, requires=requires, conditional=())
