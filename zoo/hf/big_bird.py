"""BigBird (``BigBirdModel``, ``BigBirdForMaskedLM``, ``BigBirdForSequenceClassification``,
``BigBirdForTokenClassification``): BERT's post-norm network under BERT's names, with block-sparse attention.

``attention_type: original_full`` is BERT's full attention. ``block_sparse`` is zoo's block-sparse attention
(``attention: {sparse_block_size: block_size, random_blocks: num_random_blocks}``): a query sees its block and
the two beside it, the first and last (global) blocks and random blocks. Both attend fully to sequences of at most
``(5 + 2 * num_random_blocks) * block_size`` tokens, where the two give the same outputs; on longer ones the
random blocks differ (transformers draws them from numpy's random state in training and uses none in
evaluation; zoo's are a fixed choice of ``random_seed``), so the sparse outputs are zoo's own there.

Every BigBird class holds ``BigBirdModel``'s pooler (``bert.pooler``, a dense layer with tanh), which only the
bare model applies; the heads keep it as ``spare_pooler`` so that checkpoints come back bit for bit, and the
masked-LM head of ``BigBirdForPreTraining`` keeps its next-sentence classifier (``cls.seq_relationship``) as
``spare_nsp``: its ``prediction_logits`` are zoo's logits. The masked
LM's transform and the sequence classifier's dense layer apply ``hidden_act`` (``gelu_new`` as published), and
``rescale_embeddings`` multiplies the token embeddings by sqrt(hidden_size).
"""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from . import bert
from .mapping import ACTIVATIONS, Family, Option, Rule

BODY = tuple(
    r for r in bert.RULES if isinstance(r.hf, str) and r.hf.startswith("bert.") and not r.hf.startswith("bert.pooler.")
)
"""BERT's rows of the embeddings and the blocks: BigBird's names are BERT's."""


def _head(*kinds: str):
    return lambda recipe: recipe.head.type in kinds


def _mlm_bias(*, spare: bool):
    return lambda recipe: recipe.head.type == "mlm" and recipe.head.spare_bias == spare


RULES = (
    *BODY,
    # BigBirdModel: the pooler (a bare nn.Linear) is zoo's pooler head; the other classes keep it unused.
    Rule("bert.pooler.weight", "head.dense.weight"),
    Rule("bert.pooler.bias", "head.dense.bias"),
    Rule("bert.pooler.weight", "head.spare_pooler.weight"),
    Rule("bert.pooler.bias", "head.spare_pooler.bias"),
    # BigBirdForMaskedLM: BERT's cls.predictions.
    Rule("cls.predictions.transform.dense.weight", "head.transform.weight"),
    Rule("cls.predictions.transform.dense.bias", "head.transform.bias"),
    Rule("cls.predictions.transform.LayerNorm.weight", "head.norm.weight"),
    Rule("cls.predictions.transform.LayerNorm.bias", "head.norm.bias"),
    Rule("cls.predictions.decoder.weight", "head.proj.weight", when=_head("mlm")),
    Rule("cls.predictions.bias", "head.proj.bias", when=_mlm_bias(spare=False)),
    Rule("cls.predictions.decoder.bias", "head.proj.bias", when=_mlm_bias(spare=True)),
    Rule("cls.predictions.bias", "head.bias", when=_mlm_bias(spare=True)),
    Rule("cls.seq_relationship.weight", "head.spare_nsp.weight"),  # BigBirdForPreTraining's next-sentence head
    Rule("cls.seq_relationship.bias", "head.spare_nsp.bias"),
    # BigBirdForSequenceClassification: dense + hidden_act on the first token, then out_proj.
    Rule("classifier.dense.weight", "head.pooler.dense.weight"),
    Rule("classifier.dense.bias", "head.pooler.dense.bias"),
    Rule("classifier.out_proj.weight", "head.proj.weight", when=_head("classification")),
    Rule("classifier.out_proj.bias", "head.proj.bias", when=_head("classification")),
    # BigBirdForTokenClassification
    Rule("classifier.weight", "head.proj.weight", when=_head("token_classification")),
    Rule("classifier.bias", "head.proj.bias", when=_head("token_classification")),
)

IGNORED = (
    "bert.embeddings.position_ids",
    "bert.embeddings.token_type_ids",
    "cls.predictions.decoder.weight",  # the tied copy of the word embeddings
    "cls.predictions.decoder.bias",  # tied embeddings: the same tensor as cls.predictions.bias
    "cls.seq_relationship.weight",  # the next-sentence head, where a checkpoint of another class holds it
    "cls.seq_relationship.bias",
)

DEFAULTS: dict[str, Any] = {
    **bert.DEFAULTS,
    "vocab_size": 50358,
    "hidden_act": "gelu_new",
    "max_position_embeddings": 4096,
    "attention_type": "block_sparse",
    "use_bias": True,
    "rescale_embeddings": False,
    "block_size": 64,
    "num_random_blocks": 3,
}

OPTIONS = (
    *bert.OPTIONS,
    Option(
        "attention_type",
        lambda v: v in ("original_full", "block_sparse"),
        "BigBird attends fully (original_full) or block-sparse (block_sparse)",
    ),
)

HEADS = {
    "BigBirdModel": "pooler",
    "BigBirdForMaskedLM": "mlm",
    "BigBirdForPreTraining": "mlm",
    "BigBirdForSequenceClassification": "classification",
    "BigBirdForTokenClassification": "token_classification",
}
CLASSES = {
    "pooler": "BigBirdModel",
    "mlm": "BigBirdForMaskedLM",
    "classification": "BigBirdForSequenceClassification",
    "token_classification": "BigBirdForTokenClassification",
}


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    head_type = HEADS[hf_class]
    bert.relative_positions(config, names)
    activation = ACTIVATIONS[config["hidden_act"]]
    extra: dict[str, Any] = {}
    if head_type == "pooler":
        head: dict[str, Any] = {"type": "pooler", "pool": "cls"}
    elif head_type == "mlm":
        head = {**bert.mlm_head(config, names, "cls.predictions.decoder.bias"), "activation": activation}
    else:
        head, extra = bert.classifier_head(config, head_type, pooler_activation=activation)
    if head_type != "pooler":
        head["spare_pooler"] = True
    if hf_class == "BigBirdForPreTraining":
        head["spare_nsp"] = True
    out = {**bert.body(config), "hf_family": "big_bird", "head": head, **extra}
    out["attention"]["bias"] = bool(config["use_bias"])  # query, key, value; the output projection is biased
    out["attention"]["o_bias"] = True
    if config["attention_type"] == "block_sparse":
        block, random = config["block_size"], config["num_random_blocks"]
        if not isinstance(block, int) or block < 1 or not isinstance(random, int) or random < 0:
            raise HFImportError(f"block_size={block!r}, num_random_blocks={random!r}: need integers >= 1 and >= 0")
        out["attention"].update(sparse_block_size=block, random_blocks=random)
    if config["rescale_embeddings"]:
        out["embedding"]["scale"] = True
    return out


def config(recipe, weights) -> dict[str, Any]:
    out = bert.config(recipe, weights)
    attention = recipe.attention
    sparse = attention.sparse_block_size is not None
    out.update(
        attention_type="block_sparse" if sparse else "original_full",
        block_size=attention.sparse_block_size if sparse else DEFAULTS["block_size"],
        num_random_blocks=attention.random_blocks if sparse else DEFAULTS["num_random_blocks"],
        use_bias=attention.biases()["q"],
        rescale_embeddings=recipe.embedding.scale,
    )
    return out


def _fits_head(recipe) -> str | None:
    head = recipe.head
    if head.type not in CLASSES:
        return f"head.type is {head.type!r}, needs one of {', '.join(map(repr, CLASSES))}"
    if head.type != "pooler" and not head.spare_pooler:
        return "head.spare_pooler is False, needs True (every BigBird class keeps BigBirdModel's pooler)"
    activation = recipe.ffn.activation if recipe.ffn.type == "mlp" else None
    if head.type == "mlm":
        if head.activation != activation:
            return f"head.activation is {head.activation!r}, needs ffn.activation ({activation!r}): one hidden_act"
        if head.eps != recipe.norm.eps or head.spare_bias == head.tie_embeddings:
            return f"head.eps is {head.eps}, spare_bias {head.spare_bias}: needs norm.eps and spare_bias as in BERT"
        if not (head.transform_bias and head.norm_bias and head.bias):
            return "head.transform_bias, norm_bias and bias must be True (BigBird's masked-LM head)"
    if head.type == "classification":
        if head.pool != "cls" or not head.pooler or head.pooler_activation != activation or head.pooler_norm:
            return (
                f"head is pool {head.pool!r}, pooler {head.pooler}, pooler_activation {head.pooler_activation!r}; "
                f"needs 'cls', True, {activation!r} (BigBird's classifier applies hidden_act) and no pooler_norm"
            )
    if head.type == "token_classification" and head.transform:
        return "head.transform is True, needs False (BigBird's token classifier is one linear)"
    return None


def _attention(recipe) -> str | None:
    attention = recipe.attention
    on = attention.biases()
    if not (on["q"] == on["k"] == on["v"]) or not on["o"]:
        return f"attention biases q/k/v/o are {'/'.join(str(on[p]) for p in 'qkvo')}, needs q/k/v alike and o"
    return None


REQUIREMENTS = {
    **{
        k: v
        for k, v in bert.REQUIREMENTS.items()
        if k not in ("head", "attention.bias", "attention.sparse_block_size", "embedding.scale")
    },
    "embedding.scale": (False, True),
    "attention.biases": _attention,
    "head": _fits_head,
}

BIG_BIRD = Family(
    name="big_bird",
    model_type="big_bird",
    classes=tuple(HEADS),
    base_prefix="bert.",
    head_prefixes=("cls.", "classifier."),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("bigbird-roberta-base",),
    unread={"sep_token_id": "a tokenizer setting (the [SEP] id), not part of the network"},
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: (
        "BigBirdForPreTraining" if getattr(recipe.head, "spare_nsp", False) else CLASSES[recipe.head.type]
    ),
    base_class="BigBirdModel",
)
