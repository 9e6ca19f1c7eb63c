"""M2M-100 (``M2M100ForConditionalGeneration``): a pre-norm encoder-decoder with fairseq's sinusoidal positions,
numbered from the token ids past the padding, scaled embeddings and a final LayerNorm on each stack.

The position table holds no weights (a non-persistent buffer): all sines, then all cosines, at speeds
``10000^(-i / (E/2 - 1))`` (zoo's ``positional: {type: sinusoidal, layout: fairseq}``). Positions skip padding:
the k-th token that is not ``pad_token_id`` reads row ``pad_token_id + k`` and every padding token the zero row
``pad_token_id``, which is zoo's ``padding_idx: pad`` with ``offset: pad + 1`` (2 for the published pad id 1).
The blocks are BART's, normalised before each sub-layer; the head is tied and has no bias.
"""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from .bart import BART, SHARED_TABLE_WHY, fairseq_layers, norms, stacks
from .mapping import Rule, activation_option
from .rows_classic import past_pad
from .table import Fixed, Refused

RULES = (
    Rule("model.shared.weight", "embedding.token.weight"),
    *fairseq_layers(),
    *(
        Rule(f"model.{stack}.layer_norm.{kind}", f"{stack}.final_norm.{kind}")
        for stack in ("encoder", "decoder")
        for kind in ("weight", "bias")
    ),
)

IGNORED = (
    "model.encoder.embed_tokens.weight",  # copies of model.shared.weight
    "model.decoder.embed_tokens.weight",
    "lm_head.weight",
    "model.encoder.embed_positions.weights",  # the sinusoid tables, computed (older checkpoints stored them)
    "model.decoder.embed_positions.weights",
)


def positions(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    pad = config["pad_token_id"]
    if pad >= config["vocab_size"]:
        raise HFImportError(
            f"pad_token_id={pad} is not supported: it must be below vocab_size ({config['vocab_size']})"
        )
    return {"positional.offset": pad + 1, "positional.padding_idx": pad}


M2M100 = BART.derive(
    "m2m_100",
    classes=("M2M100ForConditionalGeneration",),
    rules=RULES,
    ignored=IGNORED,
    head_prefixes=("lm_head.",),
    recipes=("m2m100-418m",),
    drop=("positional.offset", "logits bias", "is_decoder", "classifier_dropout", "forced_eos_token_id"),
    rows=(
        Fixed("block.norm_position", "pre"),
        norms(pre_norm=True),
        stacks("M2M-100"),
        Fixed("positional.type", "sinusoidal"),
        Fixed("positional.layout", "fairseq"),
        past_pad("M2M-100", positions),
        activation_option("activation_function", "M2M-100"),
        Refused(
            "tie_word_embeddings", lambda v: v is not False, SHARED_TABLE_WHY.replace("BART", "M2M-100"), export=True
        ),
        Refused(
            "pad_token_id",
            lambda v: isinstance(v, int) and v >= 0,
            "M2M-100 numbers positions past the padding token, so it needs a pad_token_id",
        ),
    ),
    defaults={"vocab_size": 128112, "activation_function": "relu", "attention_dropout": 0.1, "scale_embedding": True},
)
