"""T5 (``T5ForConditionalGeneration``): RMSNorm pre-norm encoder-decoder with relative position buckets.

Only the first block of each stack holds ``relative_attention_bias``; the other blocks reuse it, which
is zoo's one positional module per stack. Attention has no biases and no score scaling (``scale: 1.0``).
With a tied head T5 multiplies the decoder output by d_model**-0.5 first (zoo's ``head.rescale``).
"""

from __future__ import annotations

from typing import Any

from zoo.architectures import decoder_start

from .mapping import ACTIVATIONS, HF_ACTIVATIONS, Family, Option, Rule, dtype_name, no_layer_overrides

GATED = {"relu": "reglu", "silu": "swiglu", "gelu": "geglu"}
"""T5's gated FFN activations and zoo's FFN of each (``gated-gelu`` is zoo's geglu with approximate: tanh)."""


def _plain(recipe) -> bool:
    return recipe.ffn.type == "mlp"


def _gated(recipe) -> bool:
    return recipe.ffn.type != "mlp"


def _stack(stack: str, ffn_layer: int) -> tuple[Rule, ...]:
    """The rows of one block of ``stack``; its FFN is sub-layer ``ffn_layer`` (1 in the encoder, 2 in the
    decoder, whose sub-layer 1 is cross-attention)."""
    hf, zoo = f"{stack}.block.{{i}}", f"{stack}.blocks.{{i}}"
    ffn = f"{hf}.layer.{ffn_layer}"
    return (
        Rule(f"{hf}.layer.0.layer_norm.weight", f"{zoo}.attention_norm.weight"),
        *(Rule(f"{hf}.layer.0.SelfAttention.{p}.weight", f"{zoo}.attention.{p}_proj.weight") for p in "qkvo"),
        Rule(f"{ffn}.layer_norm.weight", f"{zoo}.ffn_norm.weight"),
        Rule(f"{ffn}.DenseReluDense.wi.weight", f"{zoo}.ffn.up_proj.weight", when=_plain),
        Rule(f"{ffn}.DenseReluDense.wi_0.weight", f"{zoo}.ffn.gate_proj.weight", when=_gated),
        Rule(f"{ffn}.DenseReluDense.wi_1.weight", f"{zoo}.ffn.up_proj.weight", when=_gated),
        Rule(f"{ffn}.DenseReluDense.wo.weight", f"{zoo}.ffn.down_proj.weight"),
        Rule(
            f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
            f"{stack}.positional.relative_attention_bias.weight",
        ),
        Rule(f"{stack}.final_layer_norm.weight", f"{stack}.final_norm.weight"),
    )


CROSS = (
    Rule("decoder.block.{i}.layer.1.layer_norm.weight", "decoder.blocks.{i}.cross_attention_norm.weight"),
    *(
        Rule(
            f"decoder.block.{{i}}.layer.1.EncDecAttention.{p}.weight",
            f"decoder.blocks.{{i}}.cross_attention.{p}_proj.weight",
        )
        for p in "qkvo"
    ),
)

RULES = (
    Rule("shared.weight", "embedding.token.weight"),
    *_stack("encoder", 1),
    *_stack("decoder", 2),
    *CROSS,
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied
)

IGNORED = (
    "encoder.embed_tokens.weight",  # copies of shared.weight
    "decoder.embed_tokens.weight",
    "lm_head.weight",
    "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight",  # unused, in old checkpoints
)

DEFAULTS: dict[str, Any] = {
    "vocab_size": 32128,
    "d_model": 512,
    "d_kv": 64,
    "d_ff": 2048,
    "num_layers": 6,
    "num_decoder_layers": None,
    "num_heads": 8,
    "relative_attention_num_buckets": 32,
    "relative_attention_max_distance": 128,
    "dropout_rate": 0.1,
    "layer_norm_epsilon": 1e-6,
    "feed_forward_proj": "relu",
    "pad_token_id": 0,
    "decoder_start_token_id": None,
    "tie_word_embeddings": True,
    "scale_decoder_outputs": None,
    "n_positions": 512,
}


def ffn_spec(feed_forward_proj: str) -> dict[str, Any] | None:
    """zoo's FFN for T5's ``feed_forward_proj`` ("relu", "gated-silu", ...), or None if none is identical."""
    gated, _, act = feed_forward_proj.rpartition("-")
    if gated == "gated":
        if act not in GATED:
            return None
        # T5 v1.1 / Flan-T5's gated-gelu applies gelu_new in the gate: the tanh approximation.
        return {"type": GATED[act], "approximate": "tanh"} if act == "gelu" else {"type": GATED[act]}
    if gated == "" and act in ACTIVATIONS:
        return {"type": "mlp", "activation": ACTIVATIONS[act]}
    return None


OPTIONS = (
    Option(
        "feed_forward_proj",
        lambda v: isinstance(v, str) and ffn_spec(v) is not None,
        "gated T5 FFNs import as zoo's reglu, swiglu and tanh-approximate geglu ('gated-relu', 'gated-silu', "
        f"'gated-gelu'); plain FFNs take one of {', '.join(ACTIVATIONS)}",
    ),
    Option("is_decoder", lambda v: not v, "T5ForConditionalGeneration is an encoder-decoder"),
)


def _fits_ffn(recipe) -> str | None:
    ffn = recipe.ffn
    if ffn.type == "mlp":
        if ffn.activation not in HF_ACTIVATIONS:
            return f"ffn.activation is {ffn.activation!r}, needs one of {', '.join(map(repr, HF_ACTIVATIONS))}"
    elif ffn.type not in GATED.values():
        return f"ffn.type is {ffn.type!r}, needs 'mlp', 'reglu', 'swiglu' or 'geglu'"
    elif ffn.type == "geglu" and ffn.approximate != "tanh":
        return "ffn.approximate is 'none', needs 'tanh' (T5's gated-gelu applies the tanh GELU)"
    if getattr(ffn, "bias", False):
        return "ffn.bias is True, needs False (T5's FFN has no biases)"
    return None


def _fits_head(recipe) -> str | None:
    if recipe.head.type == "lm" and not recipe.head.tie_embeddings and recipe.head.rescale:
        return "head.rescale is True with an untied head; T5 rescales the decoder output only with tied embeddings"
    return None


REQUIREMENTS = {
    "architecture": "encoder-decoder",
    "block.norm_position": "pre",
    "embed_norm": (None, False),
    "final_norm": (None, True),
    "layers": no_layer_overrides,
    "embedding.type": "token",
    "embedding.scale": False,
    "positional.type": "t5_relative",
    "attention.type": "mha",
    "attention.bias": False,
    "attention.scale": 1.0,
    "attention.window": None,
    "attention.position_bias": None,  # UMT5's tables in every layer
    "norm.type": "rmsnorm",
    "norm.affine": True,
    "norm.offset": 0.0,
    "ffn": _fits_ffn,
    "head.type": "lm",
    "head.bias": False,
    "head.softcap": None,
    "head": _fits_head,
}


def t5_recipe(config: dict[str, Any], *, tie: bool, rescale: bool) -> dict[str, Any]:
    """The zoo recipe of a T5-layout config (T5, mT5, UMT5) whose head is tied or not and rescaled or not."""
    pad, start = config["pad_token_id"], config["decoder_start_token_id"]
    out: dict[str, Any] = {
        "architecture": "encoder-decoder",
        "vocab_size": config["vocab_size"],
        "pad_token_id": pad,
        "d_model": config["d_model"],
        "num_layers": config["num_layers"],
        "num_decoder_layers": config["num_decoder_layers"] or config["num_layers"],
        "max_len": config["n_positions"],
        "norm_position": "pre",
        "embedding": {"type": "token"},
        "attention": {
            "type": "mha",
            "num_heads": config["num_heads"],
            "head_dim": config["d_kv"],
            "bias": False,
            "scale": 1.0,
            "dropout": config["dropout_rate"],
        },
        "positional": {
            "type": "t5_relative",
            "num_buckets": config["relative_attention_num_buckets"],
            "max_distance": config["relative_attention_max_distance"],
        },
        "norm": {"type": "rmsnorm", "eps": config["layer_norm_epsilon"]},
        "ffn": {**ffn_spec(config["feed_forward_proj"]), "hidden": config["d_ff"], "bias": False},
        "head": {"type": "lm", "tie_embeddings": tie, "rescale": rescale},
        "dropout": config["dropout_rate"],
    }
    if start is not None and start != (pad or 0):
        out["decoder_start_token_id"] = start
    return out


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    # Transformers 4 ties the head and rescales iff tie_word_embeddings; transformers 5 always ties unless
    # the checkpoint holds its own lm_head, and says whether to rescale in scale_decoder_outputs.
    tie = bool(config["tie_word_embeddings"]) or (names is not None and "lm_head.weight" not in names)
    rescale = config["scale_decoder_outputs"]
    rescale = bool(config["tie_word_embeddings"]) if rescale is None else bool(rescale)
    return t5_recipe(config, tie=tie, rescale=rescale)


def config(recipe, weights) -> dict[str, Any]:
    ffn = recipe.ffn
    if ffn.type == "mlp":
        feed_forward_proj = HF_ACTIVATIONS[ffn.activation]
    else:
        feed_forward_proj = "gated-" + {v: k for k, v in GATED.items()}[ffn.type]
    pad = recipe.pad_token_id if recipe.pad_token_id is not None else 0
    tied = recipe.head.tie_embeddings
    return {
        "vocab_size": recipe.vocab_size,
        "d_model": recipe.d_model,
        "d_kv": recipe.attention.head_dim_for(recipe.d_model),
        "d_ff": weights["encoder.blocks.0.ffn.up_proj.weight"].shape[0],
        "num_layers": recipe.num_layers,
        "num_decoder_layers": recipe.stack_layers("decoder"),
        "num_heads": recipe.attention.num_heads,
        "relative_attention_num_buckets": recipe.positional.num_buckets,
        "relative_attention_max_distance": recipe.positional.max_distance,
        "dropout_rate": recipe.dropout,
        "layer_norm_epsilon": recipe.norm.eps,
        "feed_forward_proj": feed_forward_proj,
        "pad_token_id": pad,
        "decoder_start_token_id": decoder_start(recipe),
        "eos_token_id": None,
        "tie_word_embeddings": tied,
        "scale_decoder_outputs": recipe.head.rescale,
        "is_encoder_decoder": True,
        "n_positions": recipe.max_len,
        "dtype": dtype_name(weights),
    }


T5 = Family(
    name="t5",
    model_type="t5",
    classes=("T5ForConditionalGeneration",),
    base_prefix="",
    head_prefixes=(),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("t5-small",),
    unread={
        "classifier_dropout": "T5ForSequenceClassification's head, a class zoo does not import",
        "dense_act_fn": "derived by T5Config from feed_forward_proj, which is read",
        "is_gated_act": "derived by T5Config from feed_forward_proj, which is read",
    },
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "T5ForConditionalGeneration",
)
