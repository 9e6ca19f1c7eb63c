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

from . import bart
from ._common import defaults_except
from .mapping import Family, Option, Rule, activation_option

RULES = (
    Rule("model.shared.weight", "embedding.token.weight"),
    *bart.fairseq_layers(),
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

DEFAULTS: dict[str, Any] = {
    **bart.DEFAULTS,
    "vocab_size": 128112,
    "activation_function": "relu",
    "attention_dropout": 0.1,
    "scale_embedding": True,
}

OPTIONS = (
    activation_option("activation_function", "M2M-100"),
    Option("tie_word_embeddings", lambda v: v is not False, bart.SHARED_TABLE_WHY.replace("BART", "M2M-100")),
    Option(
        "pad_token_id",
        lambda v: isinstance(v, int) and v >= 0,
        "M2M-100 numbers positions past the padding token, so it needs a pad_token_id",
    ),
)

UNREAD = {k: v for k, v in bart.UNREAD.items() if k not in ("classifier_dropout", "forced_eos_token_id")}


def positional(pad: int) -> dict[str, Any]:
    """zoo's spec of M2M-100's positions for a pad id."""
    return {"type": "sinusoidal", "layout": "fairseq", "offset": pad + 1, "padding_idx": pad}


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    bart.same_stacks(config, "M2M-100")
    pad = config["pad_token_id"]
    if pad >= config["vocab_size"]:
        raise HFImportError(
            f"pad_token_id={pad} is not supported: it must be below vocab_size ({config['vocab_size']})"
        )
    return bart.seq2seq_recipe(config, pre_norm=True, positional=positional(pad))


def config(recipe, weights) -> dict[str, Any]:
    return bart.seq2seq_config(recipe, weights)


def positions_of_pad(recipe: Any) -> str | None:
    """A requirement: fairseq's sinusoids numbered past ``pad_token_id`` (offset pad + 1, base 10000)."""
    pad = recipe.pad_token_id
    if pad is None:
        return "pad_token_id is absent, needs an id (M2M-100 numbers positions past the padding token)"
    wanted = positional(pad)
    got = {k: getattr(recipe.positional, k, None) for k in wanted}
    if got != wanted:
        return f"positional is {got}, needs {wanted}"
    return None


REQUIREMENTS = {
    **bart.seq2seq_requirements("pre"),
    "positional.type": "sinusoidal",
    "positional": positions_of_pad,
    "positional.*": defaults_except("positional", "layout", "offset", "padding_idx"),
    "head.tie_embeddings": True,
    "head.*": defaults_except("head", "tie_embeddings"),
}

M2M100 = Family(
    name="m2m_100",
    model_type="m2m_100",
    classes=("M2M100ForConditionalGeneration",),
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("m2m100-418m",),
    unread=UNREAD,
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "M2M100ForConditionalGeneration",
)
