"""Cohere (``CohereForCausalLM``, Command R): Llama's attention and SwiGLU read the same normed input in parallel
(one LayerNorm without bias per block: zoo's parallel block with ``shared_norm``), RoPE on adjacent pairs, and
logits times ``logit_scale`` (zoo's head divides by its inverse). Cohere2 derives from it (``zoo/hf/cohere2.py``).
"""

from __future__ import annotations

from .llama import LLAMA
from .rows import heads, rope
from .table import Fixed, Key, Refused

COHERE = LLAMA.derive(
    "cohere",
    classes=("CohereForCausalLM",),
    recipes=("command-r-v01",),
    drop=("rms_norm_eps", "norm.type", "mlp_bias", "pretraining_tp", "sliding_window"),
    rows=(
        heads(head_dim=False),
        rope(interleaved=True),
        Fixed("block.parallel", True),
        Fixed("block.shared_norm", True),
        Fixed("norm.type", "layernorm"),
        Fixed("norm.bias", False),
        Key("layer_norm_eps", "norm.eps", 1e-5),
        Fixed("ffn.bias", False),
        Key("logit_scale", "head.logit_divisor", 0.0625, read=lambda scale: 1 / scale, write=lambda d: 1 / d),
        Refused(
            "use_qk_norm",
            lambda v: not v,
            "Cohere's q/k LayerNorms learn a weight per head (heads x head_dim); zoo's q/k norm shares one",
            export=False,
        ),
    ),
    defaults={"vocab_size": 256000, "hidden_size": 8192, "intermediate_size": 22528, "num_hidden_layers": 40}
    | {"num_attention_heads": 64, "max_position_embeddings": 8192, "pad_token_id": 0, "tie_word_embeddings": True}
    | {"rope_theta": 500000.0},
)
