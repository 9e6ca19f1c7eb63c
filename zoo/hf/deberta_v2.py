"""DeBERTa-v2 and v3 (``DebertaV2ForMaskedLM``, ``ForSequenceClassification``, ``ForTokenClassification``): BERT's
post-norm encoder with disentangled attention (``attention: disentangled``) over one relative table that every
layer reads (``positional: deberta_relative``, with HF's ``encoder.LayerNorm`` as its norm).

The masked LM imports from either layout (``legacy``: ``cls.predictions``, or ``lm_predictions.lm_head``) and
exports the legacy one, which transformers reads the same. ``DebertaV2Model`` has no head zoo's encoder ends in.
"""

from .mapping import Rule, default_head_dim
from .rows_classic import BERT_LAYER, POST_NORM_ENCODER, bert_classes, is_head, mlm_rules, mlp, pad, width
from .rows_disentangled import NARROW, POOLER_ACTIVATION, RELATIVE, deberta_heads, lm_layout, position_terms
from .rows_encoder import head_class
from .rows_neox import linear_rules
from .table import Fixed, Key, Refused, Require, Unread, family

HEADS = bert_classes("DebertaV2", bare=False)
LAYER = ("query_proj q_proj", "key_proj k_proj", "value_proj v_proj")
LAYER += tuple(f"{p} {p}" for p in ("pos_key_proj", "pos_query_proj"))  # without share_att_key
E, CLASSIFIER = "deberta.embeddings.", is_head("classification", "token_classification")
RULES = (
    *linear_rules(E, "", "word_embeddings embedding.token", "token_type_embeddings embedding.token_type"),
    *linear_rules(E, "", "position_embeddings positional.embedding", "embed_proj embedding.project_in"),
    *linear_rules(E, "", "LayerNorm embed_norm"),
    *linear_rules("deberta.encoder.", "positional.", "rel_embeddings rel_embeddings", "LayerNorm norm"),
    *linear_rules("deberta.encoder.layer.{i}.attention.self.", "blocks.{i}.attention.", *LAYER),
    *linear_rules("deberta.encoder.layer.{i}.", "blocks.{i}.", *(" ".join(pair) for pair in BERT_LAYER[3:])),
    *linear_rules("", "head.", "pooler.dense pooler.dense"),
    *(Rule(f"classifier.{k}", f"head.proj.{k}", when=CLASSIFIER) for k in ("weight", "bias")),
    *mlm_rules(*(f"cls.predictions.{m}" for m in ("transform.dense", "transform.LayerNorm", "decoder", "bias"))),
)

IGNORED = ("deberta.embeddings.position_ids", "cls.predictions.decoder.weight", "cls.predictions.decoder.bias")
IGNORED += ("deberta.embeddings.position_embeddings.weight",)  # kept by v3's checkpoints, unread without absolute ones
DETECTOR = ("dense", "LayerNorm", "classifier")  # v3's replaced-token detector of pre-training: transformers drops it
IGNORED += tuple(f"mask_predictions.{m}.{k}" for m in DETECTOR for k in ("weight", "bias"))

DEBERTA_V2 = family(
    "deberta-v2",
    classes=tuple(HEADS),
    rules=RULES,
    ignored=IGNORED,
    base_prefix="deberta.",
    head_prefixes=("cls.", "lm_predictions.", "mask_predictions.", "pooler.", "classifier."),
    recipes=("deberta-v3-base",),
    hf_class=head_class(HEADS),
    base_class=None,
    layout=lm_layout,
    constants={},
    rows=(
        *POST_NORM_ENCODER,
        Key("vocab_size", "vocab_size", 128100),
        Key("hidden_size", "d_model", 1536),
        Key("num_hidden_layers", "num_layers", 24),
        Key("max_position_embeddings", "max_len", 512),
        Key("type_vocab_size", "type_vocab_size", 0),
        pad(0),
        Fixed("attention.type", "disentangled"),
        Key("num_attention_heads", "attention.num_heads", 24),
        Require("attention.head_dim", default_head_dim),
        Key("attention_probs_dropout_prob", "attention.dropout", 0.1),
        RELATIVE,
        NARROW,
        Fixed("norm.type", "layernorm"),
        Key("layer_norm_eps", "norm.eps", 1e-7),
        *mlp("hidden_act", "gelu", "DeBERTa-v2"),
        width("intermediate_size", 6144),
        Key("hidden_dropout_prob", "dropout", 0.1),
        deberta_heads(HEADS),
        Refused("relative_attention", lambda v: v is True, "zoo imports DeBERTa's relative attention only"),
        Refused("pos_att_type", lambda v: set(position_terms(v)) <= {"c2p", "p2c"}, "the terms are c2p and p2c"),
        Refused("conv_kernel_size", lambda v: not v, "zoo builds no convolution layer (deberta-v2-xlarge's)"),
        Refused("attention_head_size", lambda v: v is None, "heads are hidden_size / num_attention_heads wide"),
        Refused("tie_word_embeddings", lambda v: v is not False, "the masked LM reads the word embeddings"),
        POOLER_ACTIVATION,
        Unread("pooler_dropout", "dropout on the pooled token in training, not part of the network"),
    ),
)
