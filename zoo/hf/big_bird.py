"""BigBird (``BigBirdModel``, ``ForMaskedLM``, ``ForPreTraining``, ``ForSequenceClassification``, ...): BERT with
zoo's block-sparse attention; every class keeps BigBirdModel's pooler (``spare_pooler``), its heads apply hidden_act."""

from .bert import BERT, MLM
from .rows_attention import block_sparse, qkv_biases
from .rows_classic import CLASSIFIERS, bert_body, bert_classes, named
from .rows_encoder import BERT_MLM, CLS_POOLER, HIDDEN_ACT, head_class, variant_heads
from .rows_neox import linear_rules
from .table import Key, Unread

HEADS = bert_classes("BigBird", pretraining=True)
KEPT = {"spare_pooler": True}  # BigBirdModel's pooler, which only the bare model applies
BUILT = {"mlm": {"activation": HIDDEN_ACT, **KEPT}, "classification": {"pooler_activation": HIDDEN_ACT, **KEPT}}
BUILT |= {"token_classification": KEPT, "BigBirdForPreTraining": {"spare_nsp": True}}  # its next-sentence head, kept
REQUIRED = {"pooler": {"pool": "cls"}, "mlm": BERT_MLM, "classification": {**CLS_POOLER, "pooler_norm": False}}
REQUIRED |= {"token_classification": {"transform": False}}
BODY = (*bert_body("bert", pooler=False), *linear_rules("bert.", "head.", "pooler dense", "pooler spare_pooler"))

BIG_BIRD = BERT.derive(
    "big_bird",
    classes=tuple(HEADS),
    rules=(*BODY, *MLM, *linear_rules("cls.", "head.", "seq_relationship spare_nsp"), *CLASSIFIERS),
    ignored=tuple(name for name in BERT.ignored if ".pooler." not in name),  # BERT's but the pooler, which is kept
    recipes=("bigbird-roberta-base",),
    hf_class=head_class(HEADS, spare_nsp="BigBirdForPreTraining"),
    base_class="BigBirdModel",
    layout=None,
    rows=(
        variant_heads(HEADS, "cls.predictions.decoder.bias", REQUIRED, BUILT),
        named("big_bird"),
        *block_sparse(),
        qkv_biases("use_bias"),
        Key("rescale_embeddings", "embedding.scale", False, read=bool),
        Unread("sep_token_id", "a tokenizer setting (the [SEP] id), not part of the network"),
    ),
    defaults={"vocab_size": 50358, "hidden_act": "gelu_new", "max_position_embeddings": 4096},
)
