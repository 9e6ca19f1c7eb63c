"""BigBird: full attention (original_full) and block-sparse attention on sequences it attends fully, gelu_new in
the blocks, the masked LM's transform and the classifier, the pooler every class keeps, untied heads, rescaled
embeddings, several labels."""

from __future__ import annotations

KIND = "encoder"
CONFIGS = {"big_bird": "BigBirdConfig"}

SMALL = dict(vocab_size=96, pad_token_id=0, bos_token_id=1, eos_token_id=2, sep_token_id=3)

CASES = {
    "big_bird-mlm-full": {
        "family": "big_bird",
        "hf_class": "BigBirdForMaskedLM",
        "config": dict(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
            attention_type="original_full",
            **SMALL,
        ),
    },
    "big_bird-mlm-sparse-short-untied-rescaled": {
        "family": "big_bird",
        "hf_class": "BigBirdForMaskedLM",
        "config": dict(
            hidden_size=48,
            num_hidden_layers=2,
            num_attention_heads=3,
            intermediate_size=80,
            max_position_embeddings=64,
            attention_type="block_sparse",  # 12 tokens <= (5 + 2 * 1) * 2: both attend fully
            block_size=2,
            num_random_blocks=1,
            rescale_embeddings=True,
            use_bias=False,
            tie_word_embeddings=False,
            **SMALL,
        ),
    },
    "big_bird-classifier-4-labels": {
        "family": "big_bird",
        "hf_class": "BigBirdForSequenceClassification",
        "config": dict(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=48,
            max_position_embeddings=32,
            attention_type="original_full",
            num_labels=4,
            **SMALL,
        ),
    },
    "big_bird-token-classifier": {
        "family": "big_bird",
        "hf_class": "BigBirdForTokenClassification",
        "config": dict(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=48,
            max_position_embeddings=32,
            attention_type="original_full",
            hidden_act="relu",
            num_labels=3,
            **SMALL,
        ),
    },
    "big_bird-model-pooler": {
        "family": "big_bird",
        "hf_class": "BigBirdModel",
        "config": dict(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=48,
            max_position_embeddings=32,
            attention_type="original_full",
            **SMALL,
        ),
    },
}

ZOO_MODELS = {
    "bigbird-tiny": ("bigbird-tiny", {}),
    "bigbird-tiny-full-classifier": (
        "bigbird-tiny",
        {
            "attention.sparse_block_size": None,  # full attention
            "head": {"type": "classification", "pooler": True, "pooler_activation": "gelu_tanh", "spare_pooler": True},
            "num_classes": 3,
        },
    ),
}

PUBLISHED = {
    "bigbird-roberta-base": (
        "BigBirdConfig",
        {
            "architectures": ["BigBirdForPreTraining"],
            "attention_probs_dropout_prob": 0.1,
            "attention_type": "block_sparse",
            "block_size": 64,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "gradient_checkpointing": False,
            "hidden_act": "gelu_new",
            "hidden_dropout_prob": 0.1,
            "hidden_size": 768,
            "initializer_range": 0.02,
            "intermediate_size": 3072,
            "layer_norm_eps": 1e-12,
            "max_position_embeddings": 4096,
            "model_type": "big_bird",
            "num_attention_heads": 12,
            "num_hidden_layers": 12,
            "num_random_blocks": 3,
            "pad_token_id": 0,
            "rescale_embeddings": False,
            "sep_token_id": 66,
            "type_vocab_size": 2,
            "use_bias": True,
            "use_cache": True,
            "vocab_size": 50358,
        },
    ),
}
