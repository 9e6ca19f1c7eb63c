"""XGLM (``XGLMForCausalLM``): M2M-100's decoder alone, its head tied unless ``tie_word_embeddings`` is false, its
sinusoidal positions numbered from 0 two rows on (``offset: 2``) as transformers 5 numbers them (not past the pad)."""

from ._common import renamed
from .m2m_100 import M2M100
from .mapping import Rule
from .rows_classic import width
from .table import Fixed, Key, Refused, Unread

LEFT_OUT = ("model.encoder.", "model.decoder.layers.{i}.encoder_attn")  # M2M-100's decoder, no cross-attention
DECODER = {"model.shared.": "model.embed_tokens.", **dict.fromkeys(LEFT_OUT), "model.decoder.": "model."}

XGLM = M2M100.derive(
    "xglm",
    classes=("XGLMForCausalLM",),
    rules=(*renamed(M2M100.rules, DECODER, {"decoder.": ""}), Rule("lm_head.weight", "head.proj.weight")),
    ignored=("model.embed_positions.weights", "lm_head.weight"),  # the sinusoid table older files hold; the tied copy
    recipes=("xglm-564m",),
    constants={"bos_token_id": None, "eos_token_id": None},
    drop=("encoder_layers", "decoder layers", "decoder start", "stacks", "positions", "head.tie_embeddings")
    + ("tie_word_embeddings", "encoder_layerdrop", "decoder_layerdrop"),
    rows=(
        Fixed("architecture", "decoder"),
        Key("num_layers", "num_layers", 24),
        Key("attention_heads", "attention.num_heads", 16),
        width("ffn_dim", 4096),
        Fixed("positional.offset", 2),
        Key("tie_word_embeddings", "head.tie_embeddings", True),
        Refused(
            "pad_token_id",
            lambda v: v is None or v < 2,
            "XGLM zeroes row pad_token_id of its position table, which position pad_token_id - 2 then reads; zoo's "
            "sinusoid table has no zero row (pad ids 0 and 1 are rows no position reads)",
        ),
        Refused("add_cross_attention", lambda v: not v, "zoo's decoder has no cross-attention"),
        Unread("layerdrop", "LayerDrop skips whole layers at random in training only; inference runs every layer"),
        Unread("decoder_start_token_id", "a generation setting of encoder-decoders; XGLMForCausalLM does not read it"),
    ),
    defaults={"vocab_size": 256008, "max_position_embeddings": 2048, "activation_function": "gelu"},
)
