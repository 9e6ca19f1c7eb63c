"""BigBird (``BigBirdModel``, ``ForMaskedLM``, ``ForSequenceClassification``, ``ForTokenClassification``): BERT's
network and names, its attention full (``original_full``) or zoo's block-sparse (``block_sparse``), which attends
fully up to ``(5 + 2 * num_random_blocks) * block_size`` tokens; past that its random blocks are zoo's own
(``random_seed``; transformers draws them in training and uses none in evaluation). Every class holds
``BigBirdModel``'s pooler, which only the bare model applies (kept as ``spare_pooler``, as is
``BigBirdForPreTraining``'s next-sentence head, ``spare_nsp``), so that checkpoints come back bit for bit."""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from .bert import BERT, MLM
from .mapping import ACTIVATIONS, Rule
from .rows import BIAS_FIELDS
from .rows_classic import CLASSIFIERS, bert_body, bert_classes, by_head, encoder_heads, named
from .table import Computed, Key, Refused, Unread

RULES = (
    *bert_body("bert", pooler=False),
    # BigBirdModel: the pooler (a bare nn.Linear) is zoo's pooler head; the other classes keep it unused.
    Rule("bert.pooler.weight", "head.dense.weight"),
    Rule("bert.pooler.bias", "head.dense.bias"),
    Rule("bert.pooler.weight", "head.spare_pooler.weight"),
    Rule("bert.pooler.bias", "head.spare_pooler.bias"),
    *MLM,
    Rule("cls.seq_relationship.weight", "head.spare_nsp.weight"),  # BigBirdForPreTraining's next-sentence head
    Rule("cls.seq_relationship.bias", "head.spare_nsp.bias"),
    *CLASSIFIERS,
)

HEADS = bert_classes("BigBird", pretraining=True)
CLASSES = by_head(HEADS)


def head_quirks(config: dict[str, Any], hf_class: str, head: dict[str, Any]) -> dict[str, Any]:
    """BERT's heads with BigBird's differences: the masked LM's transform and the classifier's dense layer apply
    hidden_act; every class but the bare model keeps its pooler, BigBirdForPreTraining its next-sentence head."""
    activation = ACTIVATIONS[config["hidden_act"]]
    if head["type"] == "mlm":
        head["activation"] = activation
    if head["type"] == "classification":
        head["pooler_activation"] = activation
    if head["type"] != "pooler":
        head["spare_pooler"] = True
    if hf_class == "BigBirdForPreTraining":
        head["spare_nsp"] = True
    return head


def fits_head(recipe: Any) -> str | None:
    """A requirement: a head of a BigBird class, as that class builds it."""
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


def block_sparse(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    if config["attention_type"] != "block_sparse":
        return {}
    block, random = config["block_size"], config["num_random_blocks"]
    if not isinstance(block, int) or block < 1 or not isinstance(random, int) or random < 0:
        raise HFImportError(f"block_size={block!r}, num_random_blocks={random!r}: need integers >= 1 and >= 0")
    return {"attention.sparse_block_size": block, "attention.random_blocks": random}


def hf_block_sparse(recipe: Any, weights: Any) -> dict[str, Any]:
    attention = recipe.attention
    if attention.sparse_block_size is None:
        return {"attention_type": "original_full", "block_size": 64, "num_random_blocks": 3}
    return {
        "attention_type": "block_sparse",
        "block_size": attention.sparse_block_size,
        "num_random_blocks": attention.random_blocks,
    }


def qkv_alike_and_o(recipe: Any) -> str | None:
    on = recipe.attention.biases()
    if not (on["q"] == on["k"] == on["v"]) or not on["o"]:
        return f"attention biases q/k/v/o are {'/'.join(str(on[p]) for p in 'qkvo')}, needs q/k/v alike and o"
    return None


BIG_BIRD = BERT.derive(
    "big_bird",
    classes=tuple(HEADS),
    rules=RULES,
    ignored=tuple(
        name for name in BERT.ignored if ".pooler." not in name
    ),  # BERT's but the pooler: BigBird's heads keep it
    recipes=("bigbird-roberta-base",),
    hf_class=lambda recipe: (
        "BigBirdForPreTraining" if getattr(recipe.head, "spare_nsp", False) else CLASSES[recipe.head.type]
    ),
    base_class="BigBirdModel",
    layout=None,
    rows=(
        encoder_heads(HEADS, "cls.predictions.decoder.bias", fits_head, head_quirks),
        named("big_bird"),
        Computed(
            "block sparse",
            keys={"attention_type": "block_sparse", "block_size": 64, "num_random_blocks": 3},
            # random_seed: zoo's fixed choice of the random blocks (transformers draws them), which no key says
            paths=("attention.sparse_block_size", "attention.random_blocks", "attention.random_seed"),
            read=block_sparse,
            write=hf_block_sparse,
        ),
        Computed(
            "biases",  # use_bias: the query, key and value projections'; the output projection is biased
            keys={"use_bias": True},
            paths=BIAS_FIELDS,
            read=lambda config, recipe: {"attention.bias": bool(config["use_bias"]), "attention.o_bias": True},
            write=lambda recipe, weights: {"use_bias": recipe.attention.biases()["q"]},
            requires={"attention.biases": qkv_alike_and_o},
        ),
        Key("rescale_embeddings", "embedding.scale", False, read=bool),
        Refused(
            "attention_type",
            lambda v: v in ("original_full", "block_sparse"),
            "BigBird attends fully (original_full) or block-sparse (block_sparse)",
        ),
        Unread("sep_token_id", "a tokenizer setting (the [SEP] id), not part of the network"),
    ),
    defaults={"vocab_size": 50358, "hidden_act": "gelu_new", "max_position_embeddings": 4096},
)
