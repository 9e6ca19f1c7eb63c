"""ELECTRA (``ElectraForPreTraining``, ``ForMaskedLM``, ``ForSequenceClassification``, ``ForTokenClassification``):
BERT's network under ``electra.``, factorized where ``embedding_size`` differs from ``hidden_size`` (``embedding.
width``); the discriminator's head is ``rtd``, the generator's masked LM narrows to the table's width with GELU."""

from dataclasses import replace
from typing import Any

from .bert import BERT
from .mapping import Rule
from .rows_classic import CLASSIFIERS, bert_body, built_heads, by_head, encoder_heads, factorized, is_head, mlm_rules
from .rows_neox import linear_rules
from .table import Require, Unread

KINDS = {"ElectraForPreTraining": "rtd", "ElectraForMaskedLM": "mlm"}
KINDS |= {"ElectraForSequenceClassification": "classification", "ElectraForTokenClassification": "token_classification"}
CLASSES = by_head(KINDS)
SUMMARY = ("summary_type", "summary_use_proj", "summary_activation", "summary_last_dropout")
RTD = tuple(
    Rule(f"discriminator_predictions.{hf}.{k}", f"head.{zoo}.{k}", when=is_head("rtd"))
    for hf, zoo in (("dense", "transform.dense"), ("dense_prediction", "proj"))
    for k in ("weight", "bias")
)
MLM = mlm_rules(
    "generator_predictions.dense", "generator_predictions.LayerNorm", "generator_lm_head", "generator_lm_head.bias"
)
MLM = tuple(replace(rule, when=rule.when or is_head("mlm")) for rule in MLM)  # the discriminator's are alike


def quirks(config: dict[str, Any], hf_class: str, head: dict[str, Any]) -> dict[str, Any]:
    wide = config["embedding_size"] != config["hidden_size"]  # the generator's dense goes to embedding_size
    mlm = {"activation": "gelu", "proj_dim": config["embedding_size"] if wide else None, "spare_bias": False}
    return head | {"mlm": mlm, "classification": {"pooler_activation": "gelu"}}.get(head["type"], {})


def own(recipe: Any) -> str | None:  # BERT's shapes export as BERT (refused as BERT) unless they name ELECTRA
    if recipe.hf_family is None and recipe.head.type != "rtd" and getattr(recipe.embedding, "width", None) is None:
        return "the recipe names no hf_family and has no rtd head nor embedding.width; name hf_family: electra"
    return None


def wanted(recipe: Any) -> dict[str, dict[str, Any]]:  # each head as its class builds it
    mlm = {"activation": "gelu", "proj_dim": recipe.embedding.width}
    act = recipe.ffn.activation if recipe.ffn.type == "mlp" else None
    cls = {"pool": "cls", "pooler": True, "pooler_activation": "gelu"}
    return {"rtd": {"activation": act}, "mlm": mlm, "classification": cls, "token_classification": {}}


ELECTRA = BERT.derive(
    "electra",
    classes=tuple(KINDS),
    rules=(
        *bert_body("electra", pooler=False),
        *linear_rules("electra.", "embedding.", "embeddings_project project"),
        *RTD,
        *MLM,
        *CLASSIFIERS,
    ),
    ignored=("electra.embeddings.position_ids", "electra.embeddings.token_type_ids", "generator_lm_head.weight"),
    base_prefix="electra.",
    head_prefixes=("discriminator_predictions.", "generator_predictions.", "generator_lm_head.", "classifier."),
    recipes=("electra-base-discriminator", "electra-base-generator"),
    hf_class=lambda recipe: CLASSES[recipe.head.type],
    base_class="ElectraModel",
    rows=(
        encoder_heads(KINDS, "generator_lm_head.bias", built_heads(wanted), quirks),
        factorized(),
        Require("precedence", own),
        *(Unread(k, "ElectraForMultipleChoice's sequence summary, a class zoo does not import") for k in SUMMARY),
    ),
    defaults={"hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024},
)
