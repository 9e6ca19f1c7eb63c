"""ALBERT (``AlbertModel``, ``ForMaskedLM``, ...): ELECTRA's factorized BERT, its layers in groups sharing weights."""

from .electra import ELECTRA, NARROWED, SUMMARY
from .rows_classic import BERT_LAYER, TOKEN_CLASSIFIER, bert_body, factorized, mlm_rules
from .rows_encoder import BERT_HEADS, HIDDEN_ACT, renamed_encoder, variant_heads, when_head
from .rows_neox import linear_rules
from .rows_sharing import grouped, layer_groups
from .table import renamed

NAMES = "attention.query attention.key attention.value attention.dense attention.LayerNorm ffn ffn_output"
LAYER = [f"{hf} {zoo}" for hf, (_, zoo) in zip([*NAMES.split(), "full_layer_layer_norm"], BERT_LAYER, strict=True)]
GROUP = "albert.encoder.albert_layer_groups.{g}.albert_layers.0."  # the one layer of group g, zoo's layers' in it
RULES = (
    *bert_body("albert", pooler=False)[:5],  # the embeddings
    *linear_rules("albert.encoder.", "embedding.", "embedding_hidden_mapping_in project"),
    *grouped(linear_rules(GROUP, "blocks.{i}.", *LAYER)),
    *when_head("pooler", linear_rules("", "head.", "albert.pooler dense")),  # a bare nn.Linear, then tanh
    *when_head("classification", linear_rules("", "head.", "albert.pooler pooler.dense", "classifier proj")),
    *TOKEN_CLASSIFIER,
    *mlm_rules("predictions.dense", "predictions.LayerNorm", "predictions.decoder", "predictions.bias"),
)
BUILT = {"mlm": {"activation": HIDDEN_ACT, "proj_dim": NARROWED}}  # the masked LM: hidden_act, to embedding_size
DROPOUT = {"classifier_dropout": "classifier_dropout_prob"}

ALBERT = renamed_encoder(
    ELECTRA,
    lambda classes: renamed(variant_heads(classes, "predictions.decoder.bias", BERT_HEADS, BUILT), DROPOUT),
    "albert",
    "Albert",
    rows=(layer_groups("num_hidden_groups", "inner_group_num"), factorized(always=True)),
    rules=RULES,
    ignored=("albert.embeddings.position_ids", "albert.embeddings.token_type_ids", "predictions.decoder.weight"),
    base_prefix="albert.",
    head_prefixes=("predictions.", "classifier."),
    recipes=("albert-base-v2",),
    drop=(*SUMMARY, "precedence"),  # only ALBERT takes layer_groups: no recipe needs to name it
    defaults={"vocab_size": 30000, "hidden_size": 4096, "num_attention_heads": 64, "intermediate_size": 16384}
    | {"hidden_act": "gelu_new", "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    | {"classifier_dropout_prob": 0.1},
)
