"""Rows that the classic families share (``zoo/hf/table.py``): the two-layer MLP, learned positions and multi-head
attention of GPT-2, BERT and ViT; the post-norm encoder of BERT and DistilBERT; BERT's heads and their weight
rows, which RoBERTa and BigBird share under their own names; a classifier's labels; a recipe naming its family.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from zoo.errors import HFImportError

from .mapping import (
    ACTIVATIONS,
    HF_ACTIVATIONS,
    Requirement,
    Rule,
    activation_option,
    default_head_dim,
    no_layer_overrides,
    num_labels,
)
from .rows import BIAS_FIELDS, PAD
from .rows_flags import unwritten
from .table import Computed, Fixed, Key, Require, Row

UP = "blocks.0.ffn.up_proj.weight"
"""The first block's up projection: its rows are the FFN width a config states."""


def width(key: str, default: Any, weight: str = UP, read: Callable | None = None, owns: tuple = ()) -> Computed:
    """The FFN width ``key`` (``ffn.hidden``); the width exported is the rows of ``weight``, as a recipe may leave
    it to d_model (``owns``: other fields that only set the width)."""
    return Computed(
        "width",
        keys={key: default},
        paths=("ffn.hidden", *owns),
        read=read or (lambda config, recipe: {"ffn.hidden": config[key]}),
        write=lambda recipe, weights: {key: weights[weight].shape[0]},
    )


def mlp(key: str, default: str, family: str) -> tuple[Row, ...]:
    """A two-layer MLP whose activation is ``key`` (HF's name <-> zoo's; refused where zoo's would differ)."""
    return (
        Fixed("ffn.type", "mlp"),
        Key(key, "ffn.activation", default, read=ACTIVATIONS.__getitem__, write=HF_ACTIVATIONS.__getitem__),
        Require("ffn.activation", tuple(HF_ACTIVATIONS)),
        activation_option(key, family),
    )


def mha(heads: str, default: int, dropout: str, dropout_default: float) -> tuple[Row, ...]:
    """Multi-head attention of ``heads`` heads of d_model / heads features (the config has no head width), with
    its ``dropout`` on the attention weights."""
    return (
        Fixed("attention.type", "mha"),
        Key(heads, "attention.num_heads", default),
        Require("attention.head_dim", default_head_dim),
        Key(dropout, "attention.dropout", dropout_default),
    )


def biases(on: bool) -> Computed:
    """The four attention projections all biased (zoo's default) or none; the config states neither."""

    def check(recipe: Any) -> str | None:
        found = recipe.attention.biases()
        shown = "/".join(str(found[p]) for p in "qkvo")
        wanted = "all four" if on else "none"
        return None if set(found.values()) == {on} else f"attention biases q/k/v/o are {shown}, needs {wanted}"

    return Computed(
        "biases",
        keys={},
        paths=BIAS_FIELDS,
        read=lambda config, recipe: {} if on else {"attention.bias": False},
        write=lambda recipe, weights: {},
        requires={"attention.biases": check},
    )


BIASED = biases(True)

LEARNED = Fixed("positional.type", "learned")


def past_pad(family: str, fixed: int | None = None, **table: int) -> Computed:
    """Positions numbered past the padding, as fairseq numbers them (RoBERTa's, M2M-100's): the k-th token that is
    not ``pad_token_id`` reads row ``pad_token_id + k``, every padding token row ``pad_token_id`` (zoo's ``offset:
    pad + 1, padding_idx: pad``). ``fixed``: the pad id the family's code numbers from whatever ``pad_token_id``
    says (MPNet's 1). ``table``: the config key of a learned table's rows and its default (RoBERTa's
    ``max_position_embeddings=514`` rows hold 512 positions, ``max_len``); without it the positions are computed."""
    said = "pad_token_id" if fixed is None else f"{family}'s pad id {fixed}"

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        pad = config["pad_token_id"] if fixed is None else fixed
        if fixed is None and (not isinstance(pad, int) or pad < 0):
            raise HFImportError(f"pad_token_id={pad!r}: {family} numbers its positions from the pad id; it needs one")
        if fixed is None and pad >= config["vocab_size"]:
            raise HFImportError(
                f"pad_token_id={pad} is not supported: it must be below vocab_size ({config['vocab_size']})"
            )
        out = {"positional.offset": pad + 1, "positional.padding_idx": pad}
        for key in table:
            if config[key] <= pad + 1:
                first = "pad_token_id + 1" if fixed is None else pad + 1
                raise HFImportError(
                    f"{key}={config[key]} with {said.replace('pad_token_id', f'pad_token_id={pad}')}: the table "
                    f"holds no position (positions start at row {first})"
                )
            out["max_len"] = config[key] - pad - 1
        return out

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        return {key: recipe.max_len + recipe.positional.offset for key in table}

    def check(recipe: Any) -> str | None:
        pad, positional = (recipe.pad_token_id if fixed is None else fixed), recipe.positional
        if pad is None:
            return f"pad_token_id is absent, needs the pad id {family} numbers its positions from"
        if positional.padding_idx != pad or positional.offset != pad + 1:
            return (
                f"positional.padding_idx is {positional.padding_idx!r} and offset {positional.offset}, needs "
                f"{pad} and {pad + 1} ({family} numbers positions from {said})"
            )
        return None

    paths = ("positional.offset", "positional.padding_idx", *(("max_len",) if table else ()))
    return Computed("positions", table, paths, read, write, requires={"positional.padding_idx": check})


PRE_NORM: tuple[Row, ...] = (
    Fixed("block.norm_position", "pre"),
    Fixed("embed_norm", None, also=(False,), imported=False),
    Fixed("final_norm", None, also=(True,), imported=False),
    Require("layers", no_layer_overrides),
)
"""GPT-2's, ViT's and T5's stack: each block normalises its input, a final norm closes the stack."""

POST_NORM_ENCODER: tuple[Row, ...] = (
    Fixed("architecture", "encoder"),
    Fixed("block.norm_position", "post"),
    Fixed("embed_norm", None, also=(True,), imported=False),
    Fixed("final_norm", None, also=(False,), imported=False),
    Require("layers", no_layer_overrides),
)
"""BERT's stack: the embeddings normalised, each block after its residual adds, no final norm."""


def pad(default: int | None) -> Computed:
    """``rows.PAD`` (the pad id, and the token table's padding row it names) with the family's default pad id."""
    return replace(PAD, keys={"pad_token_id": default})


def fixed_pad(default: int, row: int) -> Computed:
    """``pad``, but the token table's zero-gradient row is ``row`` whatever the pad id (MPNet's code fixes it at 1)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        return {**PAD.read(config, recipe), "embedding.padding_idx": row}

    return replace(PAD, keys={"pad_token_id": default}, read=read)


def named(family: str) -> Computed:
    """The recipe names its family on import (its network is also another family's, which would export it)."""
    return unwritten("hf_family", "hf_family", lambda hf_class, names: family)


def defers_to(elder: str, family: str) -> Require:
    """A requirement of a family whose networks include the ``elder`` family's (CodeGen's GPT-J's, BioGPT's OPT's):
    a recipe that names no family and fits the elder exports as the elder, as it did before this family came."""

    def check(recipe: Any) -> str | None:
        from zoo.hf import FAMILIES  # looked up on export: the elder's module may import this one

        if recipe.hf_family is None and not FAMILIES[elder].misfits(recipe):
            return f"the recipe names no hf_family and fits {elder}, which exports it; name hf_family: {family}"
        return None

    return Require("precedence", check)


def marked(family: str, marks: str, mark: Callable[[Any], bool]) -> Require:
    """A requirement of a family whose networks include an elder's: a recipe that names no family exports as this
    one only where ``mark(recipe)`` holds (what only this family builds, ``marks``); else as the elder, or not."""

    def check(recipe: Any) -> str | None:
        if recipe.hf_family is None and not mark(recipe):
            return f"the recipe names no hf_family and has no {marks}; name hf_family: {family}"
        return None

    return Require("precedence", check)


def labels(count: int) -> dict[str, Any]:
    """A classifier's ``id2label`` and ``label2id`` (HF's default names)."""
    return {
        "id2label": {str(i): f"LABEL_{i}" for i in range(count)},
        "label2id": {f"LABEL_{i}": i for i in range(count)},
    }


def classifier_config(recipe: Any) -> dict[str, Any]:
    """The labels and classifier dropout of a (sequence or token) classification head; {} for other heads."""
    if recipe.head.type not in ("classification", "token_classification"):
        return {}
    return {**labels(recipe.num_classes), "classifier_dropout": recipe.head.dropout}


# ---------------------------------------------------------------------------------------------- BERT's heads


def bert_classes(prefix: str, bare: bool = True, pretraining: bool = False) -> dict[str, str]:
    """HF class -> zoo head of a BERT-like family's classes: the bare ``{prefix}Model`` (a pooler head), the masked
    LM (and the pre-training model: a masked LM), the sequence and the token classifiers."""
    kinds = {"Model": "pooler"} if bare else {}
    kinds.update(ForMaskedLM="mlm", **({"ForPreTraining": "mlm"} if pretraining else {}))
    kinds.update(ForSequenceClassification="classification", ForTokenClassification="token_classification")
    return {prefix + suffix: kind for suffix, kind in kinds.items()}


def by_head(classes: Mapping[str, str]) -> dict[str, str]:
    """zoo head -> the HF class it exports as: the first of ``classes`` (``bert_classes``) that has that head."""
    out: dict[str, str] = {}
    for name, kind in classes.items():
        out.setdefault(kind, name)
    return out


def is_head(*kinds: str) -> Callable[[Any], bool]:
    return lambda recipe: recipe.head.type in kinds


def _mlm_bias(*, spare: bool) -> Callable[[Any], bool]:
    """Whether a recipe's mlm head keeps the spare bias (transformers 5's untied layout) or has one bias."""
    return lambda recipe: recipe.head.type == "mlm" and recipe.head.spare_bias == spare


BERT_LAYER = (
    ("attention.self.query", "attention.q_proj"),
    ("attention.self.key", "attention.k_proj"),
    ("attention.self.value", "attention.v_proj"),
    ("attention.output.dense", "attention.o_proj"),
    ("attention.output.LayerNorm", "attention_norm"),
    ("intermediate.dense", "ffn.up_proj"),
    ("output.dense", "ffn.down_proj"),
    ("output.LayerNorm", "ffn_norm"),
)


def bert_body(prefix: str, pooler: bool = True) -> tuple[Rule, ...]:
    """BERT's embeddings and blocks under ``prefix`` (``bert``, ``roberta``), and the bare model's pooler."""
    return (
        Rule(f"{prefix}.embeddings.word_embeddings.weight", "embedding.token.weight"),
        Rule(f"{prefix}.embeddings.token_type_embeddings.weight", "embedding.token_type.weight"),
        Rule(f"{prefix}.embeddings.position_embeddings.weight", "positional.embedding.weight"),
        Rule(f"{prefix}.embeddings.LayerNorm.weight", "embed_norm.weight"),
        Rule(f"{prefix}.embeddings.LayerNorm.bias", "embed_norm.bias"),
        *(
            Rule(f"{prefix}.encoder.layer.{{i}}.{hf}.{kind}", f"blocks.{{i}}.{zoo}.{kind}")
            for hf, zoo in BERT_LAYER
            for kind in ("weight", "bias")
        ),
        *((Rule(f"{prefix}.pooler.dense.{k}", f"head.dense.{k}") for k in ("weight", "bias")) if pooler else ()),
    )


def mlm_rules(transform: str, norm: str, decoder: str, bias: str) -> tuple[Rule, ...]:
    """A masked LM's rows: dense ``transform``, LayerNorm ``norm``, then the ``decoder`` (tied to the word
    embeddings unless untied) and the output bias: one when tied; untied, the decoder's own (the one applied)
    and ``bias``, which zoo keeps as the head's spare bias."""
    return (
        Rule(f"{transform}.weight", "head.transform.weight"),
        Rule(f"{transform}.bias", "head.transform.bias"),
        Rule(f"{norm}.weight", "head.norm.weight"),
        Rule(f"{norm}.bias", "head.norm.bias"),
        Rule(f"{decoder}.weight", "head.proj.weight", when=is_head("mlm")),
        Rule(bias, "head.proj.bias", when=_mlm_bias(spare=False)),
        Rule(f"{decoder}.bias", "head.proj.bias", when=_mlm_bias(spare=True)),
        Rule(bias, "head.bias", when=_mlm_bias(spare=True)),
    )


CLASSIFIER = (
    # RoBERTa's and BigBird's sequence classifier: dense + activation on the first token, then out_proj.
    Rule("classifier.dense.weight", "head.pooler.dense.weight"),
    Rule("classifier.dense.bias", "head.pooler.dense.bias"),
    Rule("classifier.out_proj.weight", "head.proj.weight", when=is_head("classification")),
    Rule("classifier.out_proj.bias", "head.proj.bias", when=is_head("classification")),
)
TOKEN_CLASSIFIER = (
    Rule("classifier.weight", "head.proj.weight", when=is_head("token_classification")),
    Rule("classifier.bias", "head.proj.bias", when=is_head("token_classification")),
)

CLASSIFIERS = (*CLASSIFIER, *TOKEN_CLASSIFIER)
"""RoBERTa's and BigBird's sequence and token classifiers."""


def mlm_head(config: dict[str, Any], names: frozenset[str] | None, decoder_bias: str) -> dict[str, Any]:
    """The mlm head: tied or not; untied with the spare bias where the checkpoint has the decoder's own bias
    ``decoder_bias`` beside the head's (transformers 5; config only: assumed)."""
    tied = bool(config["tie_word_embeddings"])
    spare = not tied and (names is None or decoder_bias in names)
    return {"type": "mlm", "tie_embeddings": tied, "eps": config["layer_norm_eps"], "spare_bias": spare}


def classifier_head(config: dict[str, Any], head_type: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(head, extra recipe fields) of a sequence or token classifier: dropout ``classifier_dropout`` (else
    ``hidden_dropout_prob``) and ``num_classes``; a sequence classifier pools [CLS] through a pooler."""
    dropout = config["classifier_dropout"]
    head: dict[str, Any] = {
        "type": head_type,
        "dropout": dropout if dropout is not None else config["hidden_dropout_prob"],
    }
    if head_type == "classification":
        head.update(pool="cls", pooler=True)
    return head, {"num_classes": num_labels(config)}


def encoder_heads(
    classes: Mapping[str, str],
    decoder_bias: str,
    fits: Requirement,
    quirks: Callable[[dict[str, Any], str, dict[str, Any]], dict[str, Any]] | None = None,
) -> Computed:
    """BERT's heads, by the HF class (``classes``: class -> zoo head type): the bare model's pooler on [CLS], the
    masked LM, ELECTRA's replaced-token detector (``rtd``, of ``hidden_act``), a sequence or token classifier;
    ``quirks(config, hf_class, head)`` adds a family's own fields."""

    def read(config: dict[str, Any], recipe: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict:
        kind, extra = classes[hf_class], {}
        if kind == "pooler":
            head: dict[str, Any] = {"type": "pooler", "pool": "cls"}
        elif kind == "rtd":
            head = {"type": "rtd", "activation": ACTIVATIONS[config["hidden_act"]]}
        elif kind == "mlm":
            head = mlm_head(config, names, decoder_bias)
        else:
            head, extra = classifier_head(config, kind)
        return {"head": quirks(config, hf_class, head) if quirks else head, **extra}

    return Computed(
        "head",
        keys={"tie_word_embeddings": True, "classifier_dropout": None},
        paths=("head.*", "num_classes"),
        read=read,
        write=lambda recipe, weights: {
            "tie_word_embeddings": recipe.head.type != "mlm" or recipe.head.tie_embeddings,
            **classifier_config(recipe),
        },
        requires={"head": fits},
        checkpoint=True,
        conditional=("classifier_dropout",),
    )


def _absolute(config: dict[str, Any], recipe: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict:
    """Refuse weights of relative positions (transformers 4's ``relative_key``), which transformers 5 ignores.

    Raises:
        HFImportError: the checkpoint holds ``distance_embedding`` weights.
    """
    found = sorted(n for n in names or () if ".distance_embedding." in n)
    if found:
        raise HFImportError(
            f"position_embedding_type={config.get('position_embedding_type')!r}: the checkpoint holds weights of "
            f"relative positions ({', '.join(found[:2])}), which neither zoo nor transformers 5 applies; zoo imports "
            "absolute position embeddings only"
        )
    return {}


ABSOLUTE = Computed(
    "relative positions",
    keys={"position_embedding_type": "absolute"},
    paths=("positional.type",),
    read=_absolute,
    write=lambda recipe, weights: {},
    legacy=("position_embedding_type",),  # read only to name it: transformers 5 always adds absolute positions
    checkpoint=True,
)
"""A BERT config may carry ``relative_key``: it imports when the weights are the absolute kind."""


def factorized_width(config: Mapping[str, Any], key: str = "embedding_size") -> int | None:
    """A factorized embedding's width: ``key`` where it differs from ``hidden_size`` (else None)."""
    return config[key] if config[key] != config["hidden_size"] else None


def factorized(key: str = "embedding_size", default: int = 128, always: bool = False) -> Computed:
    """``embedding_size``: a factorized embedding (``embedding.width``; ELECTRA's) where it differs from
    ``hidden_size``, written back as the width (or d_model without one); ``always``: projected even at the blocks'
    width (ALBERT's), so an export needs the width."""

    def has_width(recipe: Any) -> str | None:
        return None if recipe.embedding.width else f"embedding.width is None, needs {key} (always projected)"

    return Computed(
        "embedding size",
        keys={key: default},
        paths=("embedding.width",),
        read=lambda config, recipe: (
            {"embedding.width": config[key]} if always or config[key] != config["hidden_size"] else {}
        ),
        write=lambda recipe, weights: {key: getattr(recipe.embedding, "width", None) or recipe.d_model},
        requires={"embedding.width": has_width} if always else {},
    )


def no_spares(head: Any, pooler: str = "only BigBird's heads keep an unused pooler") -> str | None:
    """A requirement on a head: no unused pooler nor next-sentence head (only BigBird's checkpoints hold them)."""
    if getattr(head, "spare_pooler", False):
        return f"head.spare_pooler is True, needs False ({pooler})"
    if getattr(head, "spare_nsp", False):
        return "head.spare_nsp is True, needs False (only BigBirdForPreTraining keeps an unused next-sentence head)"
    return None
