"""M2M-100 (``M2M100ForConditionalGeneration``): BART's encoder-decoder normalised before each sub-layer, a final
LayerNorm on each stack, embeddings scaled, fairseq's sinusoidal positions (a computed buffer: all sines, then all
cosines, ``positional: {type: sinusoidal, layout: fairseq}``) numbered past the padding: the k-th token that is not
``pad_token_id`` reads row ``pad_token_id + k``, padding the zero row (``padding_idx: pad, offset: pad + 1``)."""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from .bart import BART, SHARED_TABLE_WHY, fairseq_layers, norms, stacks
from .mapping import Rule, activation_option
from .rows_classic import past_pad
from .rows_neox import linear_rules
from .table import Fixed, Refused


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
    rules=(
        Rule("model.shared.weight", "embedding.token.weight"),
        *fairseq_layers(),
        *linear_rules("model.encoder.", "encoder.", "layer_norm final_norm"),
        *linear_rules("model.decoder.", "decoder.", "layer_norm final_norm"),
    ),
    # the sinusoid tables, computed (older checkpoints stored them)
    ignored=(*BART.ignored, "model.encoder.embed_positions.weights", "model.decoder.embed_positions.weights"),
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
