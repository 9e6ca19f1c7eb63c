"""LongT5: a local encoder (tokens see keys within local_radius, in blocks) or a transient-global one (local plus
global tokens, their own bias table and norm), T5's decoder; sequence lengths that are no multiple of the block, a
global block size whose inverse is inexact (3), tokens past the last whole global block, padding."""

from __future__ import annotations

KIND = "seq2seq"

CONFIGS = {"longt5": "LongT5Config"}

CASES = {
    "longt5-local-gated-gelu": {
        "family": "longt5",
        "hf_class": "LongT5ForConditionalGeneration",
        "config": dict(
            vocab_size=96,
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_heads=4,
            local_radius=4,  # blocks of 5: no multiple of the inputs' lengths
            feed_forward_proj="gated-gelu",
            tie_word_embeddings=False,  # scale_decoder_outputs: false
        ),
    },
    "longt5-tglobal-relu-radius6-block3": {
        "family": "longt5",
        "hf_class": "LongT5ForConditionalGeneration",
        "config": dict(
            vocab_size=80,
            d_model=48,
            d_kv=16,
            d_ff=72,
            num_layers=3,
            num_decoder_layers=2,
            num_heads=2,
            encoder_attention_type="transient-global",
            local_radius=6,
            global_block_size=3,  # 1/3 is inexact: block ids as transformers' float steps give them
            relative_attention_num_buckets=16,
            relative_attention_max_distance=32,
            layer_norm_epsilon=1e-5,
        ),
    },
    "longt5-tglobal-wide-window": {
        "family": "longt5",
        "hf_class": "LongT5ForConditionalGeneration",
        "config": dict(
            vocab_size=64,
            d_model=32,
            d_kv=8,
            d_ff=48,
            num_layers=2,
            num_heads=4,
            encoder_attention_type="transient-global",
            local_radius=9,  # blocks of 10: longer than some inputs
            global_block_size=5,  # tokens past the last whole block join it
            feed_forward_proj="gated-gelu",
            tie_word_embeddings=False,
        ),
    },
}

ZOO_MODELS = {
    "longt5-tiny": ("longt5-tiny", {}),
    "longt5-tiny-tied-rescaled": ("longt5-tiny", {"head.tie_embeddings": True, "head.rescale": True}),
}

PUBLISHED = {
    "longt5-tglobal-base": (
        "LongT5Config",
        {
            "architectures": ["LongT5ForConditionalGeneration"],
            "d_ff": 2048,
            "d_kv": 64,
            "d_model": 768,
            "decoder_start_token_id": 0,
            "dropout_rate": 0.1,
            "encoder_attention_type": "transient-global",
            "eos_token_id": 1,
            "feed_forward_proj": "gated-gelu",
            "global_block_size": 16,
            "initializer_factor": 1.0,
            "is_encoder_decoder": True,
            "layer_norm_epsilon": 1e-06,
            "local_radius": 127,
            "model_type": "longt5",
            "n_positions": 4096,
            "num_decoder_layers": 12,
            "num_heads": 12,
            "num_layers": 12,
            "output_past": True,
            "pad_token_id": 0,
            "relative_attention_max_distance": 128,
            "relative_attention_num_buckets": 32,
            "tie_word_embeddings": False,
            "use_cache": True,
            "vocab_size": 32128,
        },
    ),
}
