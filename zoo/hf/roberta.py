"""RoBERTa (``RobertaModel``, ``ForMaskedLM``, ``ForSequenceClassification``, ``ForTokenClassification``): BERT with
fairseq's positions (numbered past the pad id: ``past_pad``), its own head names, an ``lm_head`` of the exact GELU."""

from functools import partial

from ._common import rename
from .bert import BERT
from .rows_classic import CLASSIFIERS, bert_body, bert_classes, mlm_rules, past_pad
from .rows_encoder import BERT_HEADS, head_class, variant_heads

HEADS = bert_classes("Roberta")
REQUIRED = {
    **BERT_HEADS,
    "mlm": {**BERT_HEADS["mlm"], "activation": "gelu"},
}  # lm_head: the exact GELU, whatever hidden_act

heads = partial(variant_heads, decoder_bias="lm_head.decoder.bias", required=REQUIRED)  # under a class mapping

ROBERTA = BERT.derive(
    "roberta",
    classes=tuple(HEADS),
    rules=(
        *bert_body("roberta"),
        *mlm_rules(*(f"lm_head.{m}" for m in ("dense", "layer_norm", "decoder", "bias"))),
        *CLASSIFIERS,
    ),
    # BERT's but the next-sentence head's: buffers, the tied decoder, the pooler (which the heads have not)
    ignored=tuple(rename(name, {"bert.": "roberta.", "cls.predictions.": "lm_head."}) for name in BERT.ignored[:6]),
    base_prefix="roberta.",
    head_prefixes=("lm_head.", "classifier."),
    recipes=("roberta-base",),
    hf_class=head_class(HEADS),
    base_class="RobertaModel",
    drop=("max_position_embeddings",),
    rows=(heads(HEADS), past_pad("RoBERTa", max_position_embeddings=512)),
    defaults={"vocab_size": 50265, "pad_token_id": 1},
)
