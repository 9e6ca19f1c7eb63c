"""Rows of an encoder whose self-attention is Longformer's (LED's): the window of each layer (``attention_window``,
one value or one per layer) <-> ``layers:`` overrides that give the encoder stack ``attention: {type: longformer}``,
the global projections' weights, and a decoder position table of its own size (``max_decoder_position_embeddings``
<-> ``decoder_max_len``).

transformers takes the global tokens as an input of each call (``global_attention_mask``); a zoo recipe fixes them
(the attention's ``global_tokens``). The import makes the first token global, as LED's summarisation does
(transformers' documentation: global attention on the ``<s>`` token); ``global_tokens: 0`` is transformers
without a mask. The export writes the network, which is the same whichever tokens are global.
"""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from .bart import FAIRSEQ_LAYER, LOGITS_BIAS, STACKS, fairseq_layers
from .mapping import Rule
from .rows import selector
from .table import Computed

GLOBAL_TOKENS = 1
"""The global tokens of an imported LED: the first (``<s>``), where LED's summarisation puts global attention."""

STACK_MODULES = (("layernorm_embedding", "embed_norm"),)
"""Each stack's modules outside its blocks that have a weight and a bias (HF name, zoo name)."""

SELF_ATTENTION = (
    ("query", "q_proj"),
    ("key", "k_proj"),
    ("value", "v_proj"),
    ("query_global", "q_global"),
    ("key_global", "k_global"),
    ("value_global", "v_global"),
)


def longformer_rules(prefix: str) -> tuple[Rule, ...]:
    """The weights of BART's encoder-decoder under ``prefix`` (LED's ``led``) whose encoder attends as Longformer:
    ``{prefix}.encoder.layers.{i}.self_attn.longformer_self_attn.query`` ... and ``self_attn.output`` (the output
    projection) for the encoder's attention, BART's names for the rest."""
    names = [(f"self_attn.longformer_self_attn.{hf}", f"attention.{zoo}") for hf, zoo in SELF_ATTENTION]
    encoder = [*names, ("self_attn.output", "attention.o_proj")]
    encoder += [pair for pair in FAIRSEQ_LAYER if not pair[0].startswith("self_attn.")]  # norms and FFN
    stacks = [(f"{prefix}.{s}.{hf}", f"{s}.{zoo}") for s in STACKS for hf, zoo in STACK_MODULES]
    return (
        Rule(f"{prefix}.shared.weight", "embedding.token.weight"),
        *(Rule(f"{hf}.{kind}", f"{zoo}.{kind}") for hf, zoo in stacks for kind in ("weight", "bias")),
        Rule(f"{prefix}.encoder.embed_positions.weight", "encoder.positional.embedding.weight"),
        Rule(f"{prefix}.decoder.embed_positions.weight", "decoder.positional.embedding.weight"),
        *(
            Rule(f"{prefix}.encoder.layers.{{i}}.{hf}.{kind}", f"encoder.blocks.{{i}}.{zoo}.{kind}")
            for hf, zoo in encoder
            for kind in ("weight", "bias")
        ),
        *(rule for rule in fairseq_layers(prefix) if rule.hf.startswith(f"{prefix}.decoder.")),
        LOGITS_BIAS,
    )


def layer_windows(config: dict[str, Any], layers_key: str) -> list[int]:
    """The window of each encoder layer, as ``LEDEncoder`` spreads an int over the layers.

    Raises:
        HFImportError: a list of another length than the layers, or a window that is not a positive even number.
    """
    given, n = config["attention_window"], config[layers_key]
    windows = [given] * n if isinstance(given, int) else list(given)
    if len(windows) != n:
        raise HFImportError(
            f"attention_window={given!r} is not supported: it names {len(windows)} windows for {layers_key}={n} "
            "layers (transformers cannot build this model either)"
        )
    problem = unrunnable(windows)
    if problem:
        raise HFImportError(f"attention_window={given!r} is not supported: {problem}")
    return windows


def unrunnable(windows: list[Any]) -> str | None:
    """Why transformers' LED cannot run these windows, or None: each an even number >= 4 (a query sees window / 2
    keys on either side; its chunks need 2 at least) that divides the largest (it pads the sequence to a multiple
    of the largest, and each layer's chunks must tile it)."""
    if any(not isinstance(w, int) or isinstance(w, bool) or w < 4 or w % 2 for w in windows):
        return "each window is an even number >= 4 (transformers' sliding chunks fail on a window of 2)"
    if any(max(windows) % w for w in windows):
        return (
            f"each window must divide the largest ({max(windows)}): transformers pads the sequence to a multiple of "
            "it, which every layer's chunks must tile"
        )
    return None


def every(layers: list[int], n: int) -> int | str | list[int]:
    """A ``layers:`` selector for ``layers`` of ``n``: ``':'`` for all of them."""
    return ":" if len(layers) == n else selector(layers, n)


def encoder_attention(layers_key: str = "encoder_layers") -> Computed:
    """The encoder's Longformer attention: one ``layers:`` override of the encoder stack per distinct window, with
    the recipe's heads and attention dropout and the first token global (``GLOBAL_TOKENS``)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        windows = layer_windows(config, layers_key)
        base = recipe["attention"]
        attention = {"type": "longformer", "num_heads": base["num_heads"], "global_tokens": GLOBAL_TOKENS}
        attention["dropout"] = base.get("dropout", 0.0)
        groups: dict[int, list[int]] = {}
        for i, w in enumerate(windows):
            groups.setdefault(w, []).append(i)
        overrides = [
            {"select": every(layers, len(windows)), "stack": "encoder", "attention": {**attention, "window": w}}
            for w, layers in groups.items()
        ]
        return {"layers": overrides}

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        return {"attention_window": [placed["attention"][0].window for placed in recipe.layer_plan("encoder")]}

    return Computed(
        "encoder attention",
        keys={"attention_window": 512},
        paths=("layers",),
        read=read,
        write=write,
        requires={"layers": longformer_encoder},
        last=True,
    )


def longformer_encoder(recipe: Any) -> str | None:
    """A requirement: every encoder layer attends as Longformer with the recipe's heads and full-width heads and
    biases (LED's), and only the encoder's attention is overridden (the decoder is the recipe's)."""
    for j, override in enumerate(recipe.layers):
        if override.stack != "encoder" or override.norm is not None or override.ffn is not None:
            return f"layers.{j}: only the encoder's attention may differ per layer (stack: encoder, attention only)"
    attentions = [placed["attention"][0] for placed in recipe.layer_plan("encoder")]
    for i, attention in enumerate(attentions):
        if attention.type != "longformer":
            return f"encoder layer {i} has attention '{attention.type}'; LED's encoder attends as longformer"
        if attention.num_heads != recipe.attention.num_heads or attention.head_dim is not None or not attention.bias:
            return (
                f"encoder layer {i}'s longformer attention needs num_heads {recipe.attention.num_heads} (the "
                "decoder's), head_dim unset and bias: true"
            )
    problem = unrunnable([a.window for a in attentions])
    return None if problem is None else f"the encoder's windows {[a.window for a in attentions]}: {problem}"


def decoder_table(key: str, default: int) -> Computed:
    """The decoder's position table, ``key`` rows (``decoder_max_len``; the encoder's is ``max_len``)."""
    return Computed(
        "decoder positions",
        keys={key: default},
        paths=("decoder_max_len",),
        read=lambda config, recipe: {"decoder_max_len": config[key]},
        write=lambda recipe, weights: {key: recipe.stack_max_len("decoder")},
    )
