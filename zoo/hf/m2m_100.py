"""M2M-100 (``M2M100ForConditionalGeneration``): BART's encoder-decoder normalised before each sub-layer, a final
LayerNorm on each stack, embeddings scaled, fairseq's sinusoidal positions (a computed buffer: all sines, then all
cosines, ``positional: {type: sinusoidal, layout: fairseq}``) numbered past the padding: the k-th token that is not
``pad_token_id`` reads row ``pad_token_id + k``, padding the zero row (``padding_idx: pad, offset: pad + 1``)."""

from .bart import BART, fairseq_layers, norms, shared_table, stacks
from .mapping import Rule, activation_option
from .rows_classic import past_pad
from .rows_neox import linear_rules
from .table import Fixed

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
        past_pad("M2M-100"),
        activation_option("activation_function", "M2M-100"),
        shared_table("M2M-100"),
    ),
    defaults={"vocab_size": 128112, "activation_function": "relu", "attention_dropout": 0.1, "scale_embedding": True},
)
