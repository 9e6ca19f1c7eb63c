"""BERT (``BertModel``, ``BertForMaskedLM``, ``BertForSequenceClassification``, ``BertForTokenClassification``):
post-norm encoder.

Word, position and token-type embeddings are summed and normalised (zoo's ``embed_norm``); each block
normalises after its residual adds. The head follows the HF class: ``BertModel`` -> zoo's ``pooler``
head (its ``logits`` are HF's ``pooler_output``), ``BertForMaskedLM`` -> ``mlm``,
``BertForSequenceClassification`` -> ``classification`` with a pooler, ``BertForTokenClassification`` ->
``token_classification``.

An untied ``BertForMaskedLM`` of transformers 5 holds two output biases: the decoder's (``cls.predictions.
decoder.bias``, the one applied) and ``cls.predictions.bias`` (tied to it only when the embeddings are tied);
zoo keeps the second as the mlm head's ``spare_bias``, so both come back bit for bit. transformers 5's BERT
never reads ``position_embedding_type``: a config that carries ``relative_key`` imports when its weights are
the absolute kind, and weights of relative positions (``distance_embedding``) are refused by name.
"""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from .mapping import (
    ACTIVATIONS,
    CLASSIC_BLOCK,
    HF_ACTIVATIONS,
    Family,
    Option,
    Rule,
    activation_option,
    dtype_name,
    no_layer_overrides,
    num_labels,
)

LAYER = "bert.encoder.layer.{i}"


def _head(kind: str):
    return lambda recipe: recipe.head.type == kind


def _mlm_bias(*, spare: bool):
    """Whether a recipe's mlm head keeps the spare bias (transformers 5's untied layout) or has one bias."""
    return lambda recipe: recipe.head.type == "mlm" and recipe.head.spare_bias == spare


RULES = (
    Rule("bert.embeddings.word_embeddings.weight", "embedding.token.weight"),
    Rule("bert.embeddings.token_type_embeddings.weight", "embedding.token_type.weight"),
    Rule("bert.embeddings.position_embeddings.weight", "positional.embedding.weight"),
    Rule("bert.embeddings.LayerNorm.weight", "embed_norm.weight"),
    Rule("bert.embeddings.LayerNorm.bias", "embed_norm.bias"),
    Rule(f"{LAYER}.attention.self.query.weight", "blocks.{i}.attention.q_proj.weight"),
    Rule(f"{LAYER}.attention.self.query.bias", "blocks.{i}.attention.q_proj.bias"),
    Rule(f"{LAYER}.attention.self.key.weight", "blocks.{i}.attention.k_proj.weight"),
    Rule(f"{LAYER}.attention.self.key.bias", "blocks.{i}.attention.k_proj.bias"),
    Rule(f"{LAYER}.attention.self.value.weight", "blocks.{i}.attention.v_proj.weight"),
    Rule(f"{LAYER}.attention.self.value.bias", "blocks.{i}.attention.v_proj.bias"),
    Rule(f"{LAYER}.attention.output.dense.weight", "blocks.{i}.attention.o_proj.weight"),
    Rule(f"{LAYER}.attention.output.dense.bias", "blocks.{i}.attention.o_proj.bias"),
    Rule(f"{LAYER}.attention.output.LayerNorm.weight", "blocks.{i}.attention_norm.weight"),
    Rule(f"{LAYER}.attention.output.LayerNorm.bias", "blocks.{i}.attention_norm.bias"),
    Rule(f"{LAYER}.intermediate.dense.weight", "blocks.{i}.ffn.up_proj.weight"),
    Rule(f"{LAYER}.intermediate.dense.bias", "blocks.{i}.ffn.up_proj.bias"),
    Rule(f"{LAYER}.output.dense.weight", "blocks.{i}.ffn.down_proj.weight"),
    Rule(f"{LAYER}.output.dense.bias", "blocks.{i}.ffn.down_proj.bias"),
    Rule(f"{LAYER}.output.LayerNorm.weight", "blocks.{i}.ffn_norm.weight"),
    Rule(f"{LAYER}.output.LayerNorm.bias", "blocks.{i}.ffn_norm.bias"),
    # BertModel: the pooler is zoo's pooler head.
    Rule("bert.pooler.dense.weight", "head.dense.weight"),
    Rule("bert.pooler.dense.bias", "head.dense.bias"),
    # BertForSequenceClassification: pooler, then classifier.
    Rule("bert.pooler.dense.weight", "head.pooler.dense.weight"),
    Rule("bert.pooler.dense.bias", "head.pooler.dense.bias"),
    Rule("classifier.weight", "head.proj.weight", when=_head("classification")),
    Rule("classifier.bias", "head.proj.bias", when=_head("classification")),
    # BertForTokenClassification: a classifier on every token.
    Rule("classifier.weight", "head.proj.weight", when=_head("token_classification")),
    Rule("classifier.bias", "head.proj.bias", when=_head("token_classification")),
    # BertForMaskedLM: transform, then the decoder (tied to the word embeddings unless untied).
    Rule("cls.predictions.transform.dense.weight", "head.transform.weight"),
    Rule("cls.predictions.transform.dense.bias", "head.transform.bias"),
    Rule("cls.predictions.transform.LayerNorm.weight", "head.norm.weight"),
    Rule("cls.predictions.transform.LayerNorm.bias", "head.norm.bias"),
    Rule("cls.predictions.decoder.weight", "head.proj.weight", when=_head("mlm")),
    Rule("cls.predictions.bias", "head.proj.bias", when=_mlm_bias(spare=False)),  # tied: one bias
    Rule("cls.predictions.decoder.bias", "head.proj.bias", when=_mlm_bias(spare=True)),  # untied: the applied one
    Rule("cls.predictions.bias", "head.bias", when=_mlm_bias(spare=True)),  # and the one never added
)

IGNORED = (
    "bert.embeddings.position_ids",  # buffers of older checkpoints
    "bert.embeddings.token_type_ids",
    "cls.predictions.decoder.weight",  # the tied copy of the word embeddings
    "cls.predictions.decoder.bias",  # tied embeddings: the same tensor as cls.predictions.bias
    "bert.pooler.dense.weight",  # BertForMaskedLM has no pooler: HF drops it from pre-training checkpoints too
    "bert.pooler.dense.bias",
    "cls.seq_relationship.weight",  # the next-sentence head of pre-training checkpoints, which HF drops too
    "cls.seq_relationship.bias",
)

DEFAULTS: dict[str, Any] = {
    "vocab_size": 30522,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-12,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",  # read only to name it: transformers 5 always adds absolute positions
    "is_decoder": False,
    "add_cross_attention": False,
    "tie_word_embeddings": True,
    "classifier_dropout": None,
}

OPTIONS = (
    Option("is_decoder", lambda v: not v, "zoo's encoder is bidirectional; a causal BERT is not supported"),
    Option("add_cross_attention", lambda v: not v, "zoo's encoder has no cross-attention"),
    Option("type_vocab_size", lambda v: isinstance(v, int) and v >= 1, "BERT needs token-type embeddings"),
    activation_option("hidden_act", "BERT"),
)

HEADS = {
    "BertModel": "pooler",
    "BertForMaskedLM": "mlm",
    "BertForPreTraining": "mlm",
    "BertForSequenceClassification": "classification",
    "BertForTokenClassification": "token_classification",
}
CLASSES = {
    "pooler": "BertModel",
    "mlm": "BertForMaskedLM",
    "classification": "BertForSequenceClassification",
    "token_classification": "BertForTokenClassification",
}


def _fits_head(recipe) -> str | None:
    head = recipe.head
    if head.type not in CLASSES:
        return f"head.type is {head.type!r}, needs one of {', '.join(map(repr, CLASSES))}"
    if getattr(head, "spare_pooler", False):
        return "head.spare_pooler is True, needs False (BERT's heads keep no unused pooler; BigBird's do)"
    if getattr(head, "spare_nsp", False):
        return "head.spare_nsp is True, needs False (only BigBirdForPreTraining keeps an unused next-sentence head)"
    if head.type in ("pooler", "classification") and head.pool != "cls":
        return f"head.pool is {head.pool!r}, needs 'cls' (BERT pools the [CLS] token)"
    if head.type == "classification" and not head.pooler:
        return "head.pooler is False, needs True (BertForSequenceClassification has a pooler)"
    if head.type == "classification" and head.pooler_activation != "tanh":
        return f"head.pooler_activation is {head.pooler_activation!r}, needs 'tanh' (BERT's pooler)"
    if head.type == "mlm" and head.spare_bias == head.tie_embeddings:
        needs = "False (a tied head has one bias)" if head.tie_embeddings else "True (transformers 5's untied head"
        needs += "" if head.tie_embeddings else " holds cls.predictions.bias beside the decoder's bias)"
        return f"head.spare_bias is {head.spare_bias}, needs {needs}"
    if head.type == "mlm" and recipe.ffn.type == "mlp" and head.activation != recipe.ffn.activation:
        return (
            f"head.activation is {head.activation!r}, needs ffn.activation ({recipe.ffn.activation!r}): one hidden_act"
        )
    if head.type == "mlm" and not (head.transform_bias and head.norm_bias and head.bias):
        return "head.transform_bias, norm_bias and bias must be True (BERT's masked-LM head is biased throughout)"
    if head.type == "mlm" and recipe.norm.type == "layernorm" and head.eps != recipe.norm.eps:
        return f"head.eps is {head.eps}, needs norm.eps ({recipe.norm.eps}) (HF shares layer_norm_eps)"
    return None


REQUIREMENTS = {
    "architecture": "encoder",
    "block.norm_position": "post",
    "embed_norm": (None, True),
    "final_norm": (None, False),
    "type_vocab_size": lambda r: None if r.type_vocab_size >= 1 else "type_vocab_size is 0, needs >= 1",
    "layers": no_layer_overrides,
    "embedding.type": "token",
    "embedding.scale": False,
    **CLASSIC_BLOCK,
    "head": _fits_head,
}


def relative_positions(config: dict[str, Any], names: frozenset[str] | None) -> None:
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


def classifier_head(config: dict[str, Any], head_type: str, **pooler: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(head, extra recipe fields) of a sequence or token classifier: dropout ``classifier_dropout`` (else
    ``hidden_dropout_prob``) and ``num_classes``; a sequence classifier pools [CLS] through a pooler."""
    dropout = config["classifier_dropout"]
    head: dict[str, Any] = {
        "type": head_type,
        "dropout": dropout if dropout is not None else config["hidden_dropout_prob"],
    }
    if head_type == "classification":
        head.update(pool="cls", pooler=True, **pooler)
    return head, {"num_classes": num_labels(config)}


def mlm_head(config: dict[str, Any], names: frozenset[str] | None, decoder_bias: str) -> dict[str, Any]:
    """The mlm head: tied or not; untied with the spare bias where the checkpoint has the decoder's own bias
    ``decoder_bias`` beside the head's (transformers 5; config only: assumed)."""
    tied = bool(config["tie_word_embeddings"])
    spare = not tied and (names is None or decoder_bias in names)
    return {"type": "mlm", "tie_embeddings": tied, "eps": config["layer_norm_eps"], "spare_bias": spare}


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    head_type = HEADS[hf_class]
    relative_positions(config, names)
    head: dict[str, Any] = {"type": head_type}
    extra: dict[str, Any] = {}
    if head_type == "pooler":
        head["pool"] = "cls"
    elif head_type == "mlm":
        head = mlm_head(config, names, "cls.predictions.decoder.bias")
        if config["hidden_act"] != "gelu":  # the transform applies hidden_act too
            head["activation"] = ACTIVATIONS[config["hidden_act"]]
    else:
        head, extra = classifier_head(config, head_type)
    return {**body(config), "head": head, **extra}


def body(config: dict[str, Any]) -> dict[str, Any]:
    """The recipe of BERT's embeddings and blocks (no head), which RoBERTa shares."""
    pad = config["pad_token_id"]
    embedding: dict[str, Any] = {"type": "token"}
    if pad is not None and 0 <= pad < config["vocab_size"]:
        embedding["padding_idx"] = pad
    return {
        "architecture": "encoder",
        "vocab_size": config["vocab_size"],
        "type_vocab_size": config["type_vocab_size"],
        "pad_token_id": pad,
        "d_model": config["hidden_size"],
        "num_layers": config["num_hidden_layers"],
        "max_len": config["max_position_embeddings"],
        "norm_position": "post",
        "embedding": embedding,
        "attention": {
            "type": "mha",
            "num_heads": config["num_attention_heads"],
            "dropout": config["attention_probs_dropout_prob"],
        },
        "positional": {"type": "learned"},
        "norm": {"type": "layernorm", "eps": config["layer_norm_eps"]},
        "ffn": {"type": "mlp", "hidden": config["intermediate_size"], "activation": ACTIVATIONS[config["hidden_act"]]},
        "dropout": config["hidden_dropout_prob"],
    }


def config(recipe, weights) -> dict[str, Any]:
    out: dict[str, Any] = {
        "vocab_size": recipe.vocab_size,
        "hidden_size": recipe.d_model,
        "num_hidden_layers": recipe.num_layers,
        "num_attention_heads": recipe.attention.num_heads,
        "intermediate_size": weights["blocks.0.ffn.up_proj.weight"].shape[0],
        "hidden_act": HF_ACTIVATIONS[recipe.ffn.activation],
        "hidden_dropout_prob": recipe.dropout,
        "attention_probs_dropout_prob": recipe.attention.dropout,
        "max_position_embeddings": recipe.max_len,
        "type_vocab_size": recipe.type_vocab_size,
        "layer_norm_eps": recipe.norm.eps,
        "pad_token_id": recipe.pad_token_id,
        "tie_word_embeddings": recipe.head.type != "mlm" or recipe.head.tie_embeddings,
        "dtype": dtype_name(weights),
    }
    out.update(classifier_config(recipe))
    return out


def classifier_config(recipe) -> dict[str, Any]:
    """The labels and classifier dropout of a (sequence or token) classification head; {} for other heads."""
    if recipe.head.type not in ("classification", "token_classification"):
        return {}
    return {
        "id2label": {str(i): f"LABEL_{i}" for i in range(recipe.num_classes)},
        "label2id": {f"LABEL_{i}": i for i in range(recipe.num_classes)},
        "classifier_dropout": recipe.head.dropout,
    }


def rename_tf_layer_norms(state: dict) -> dict:
    """Checkpoints converted from the original TensorFlow BERT name LayerNorm parameters gamma / beta."""
    renamed = {}
    for name, tensor in state.items():
        if ".LayerNorm." in name and name.endswith((".gamma", ".beta")):
            name = name.removesuffix(".gamma") + ".weight" if name.endswith(".gamma") else name[:-5] + ".bias"
        renamed[name] = tensor
    return renamed


BERT = Family(
    name="bert",
    model_type="bert",
    classes=tuple(HEADS),
    base_prefix="bert.",
    head_prefixes=("cls.", "classifier."),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("bert-base",),
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: CLASSES[recipe.head.type],
    base_class="BertModel",
    layout=rename_tf_layer_norms,
)
