"""BERT beyond the first cases: an untied masked LM (transformers 5 keeps two output biases), a gelu_new masked
LM, token classification, a pad id other than 0, and a config that still carries ``position_embedding_type``."""

from __future__ import annotations

KIND = "encoder"
CONFIGS = {"bert": "BertConfig"}

CASES = {
    "bert-mlm-untied": {
        "family": "bert",
        "hf_class": "BertForMaskedLM",
        "config": dict(
            vocab_size=72,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=48,
            max_position_embeddings=32,
            tie_word_embeddings=False,
            pad_token_id=3,
        ),
    },
    "bert-mlm-gelu-new": {
        "family": "bert",
        "hf_class": "BertForMaskedLM",
        "config": dict(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=4,
            intermediate_size=40,
            max_position_embeddings=24,
            hidden_act="gelu_new",  # the blocks' and the masked LM's transform
        ),
    },
    "bert-token-classifier-relative-key-config": {
        "family": "bert",
        "hf_class": "BertForTokenClassification",
        "config": dict(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=40,
            max_position_embeddings=24,
            num_labels=5,
            classifier_dropout=0.3,
            position_embedding_type="relative_key",  # transformers 5 ignores it: the weights are absolute
        ),
    },
}

BERT_TINY_UNTIED = ("bert-tiny", {"head": {"type": "mlm", "tie_embeddings": False, "spare_bias": True}})
ZOO_MODELS = {
    "bert-tiny-mlm-untied": BERT_TINY_UNTIED,
    "bert-tiny-token-classifier": ("bert-tiny", {"head": {"type": "token_classification"}, "num_classes": 3}),
}
