"""ELECTRA (``ElectraForPreTraining``, ``ForMaskedLM``, ``ForSequenceClassification``, ``ForTokenClassification``):
BERT under ``electra.``, factorized (``embedding.width``); the discriminator's head is ``rtd``, the generator's GELU."""

from .bert import BERT
from .rows_classic import CLASSIFIERS, bert_body, bert_classes, factorized, factorized_width, marked, mlm_rules
from .rows_encoder import CLS_POOLER, HIDDEN_ACT, Same, head_class, variant_heads, when_head
from .rows_neox import linear_rules
from .table import Unread

KINDS = {"ElectraForPreTraining": "rtd", **bert_classes("Electra", bare=False)}
SUMMARY = ("summary_type", "summary_use_proj", "summary_activation", "summary_last_dropout")
BODY = (*bert_body("electra", pooler=False), *linear_rules("electra.", "embedding.", "embeddings_project project"))
D, G = "discriminator_predictions.", "generator_predictions."
RTD = when_head("rtd", linear_rules(D, "head.", "dense transform.dense", "dense_prediction proj"))
MLM = when_head("mlm", mlm_rules(f"{G}dense", f"{G}LayerNorm", "generator_lm_head", "generator_lm_head.bias"))
NARROWED = Same(factorized_width, lambda recipe: recipe.embedding.width)  # the generator's transform: the table's width
BUILT = {"mlm": {"activation": "gelu", "proj_dim": NARROWED, "spare_bias": False}}
BUILT |= {"classification": {"pooler_activation": "gelu"}}
REQUIRED = {"rtd": {"activation": HIDDEN_ACT}, "mlm": {}, "classification": CLS_POOLER, "token_classification": {}}

ELECTRA = BERT.derive(
    "electra",
    classes=tuple(KINDS),
    rules=(*BODY, *RTD, *MLM, *CLASSIFIERS),
    ignored=("electra.embeddings.position_ids", "electra.embeddings.token_type_ids", "generator_lm_head.weight"),
    base_prefix="electra.",
    head_prefixes=("discriminator_predictions.", "generator_predictions.", "generator_lm_head.", "classifier."),
    recipes=("electra-base-discriminator", "electra-base-generator"),
    hf_class=head_class(KINDS),
    base_class="ElectraModel",
    rows=(
        variant_heads(KINDS, "generator_lm_head.bias", REQUIRED, BUILT, strict=True),
        factorized(),
        marked(
            "electra", "rtd head nor embedding.width", lambda r: r.head.type == "rtd" or r.embedding.width is not None
        ),
        *(Unread(k, "ElectraForMultipleChoice's sequence summary, a class zoo does not import") for k in SUMMARY),
    ),
    defaults={"hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024},
)
