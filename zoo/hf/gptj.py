"""GPT-J (``GPTJForCausalLM``): a LayerNorm pre-norm decoder whose attention and MLP read one shared norm of
the block's input in parallel, RoPE over the first ``rotary_dim`` dims of each head in adjacent pairs
(zoo's ``interleaved``, base 10000), unbiased q/k/v/out projections, a biased GELU-tanh MLP and a biased,
untied LM head.
"""

from __future__ import annotations

from typing import Any

from zoo.components.positional import rotary_dims
from zoo.errors import HFImportError

from .mapping import Rule
from .rope import rotary_fraction
from .rows_classic import biases, mlp, width
from .rows_neox import DECODER, PARALLEL_SHARED, TOKENS, biased_head, dropout, layernorm, linear_rules, mha
from .table import Computed, Fixed, Key, family

LAYER, BLOCK = "transformer.h.{i}", "blocks.{i}"

RULES = (
    Rule("transformer.wte.weight", "embedding.token.weight"),
    *(Rule(f"{LAYER}.attn.{p}_proj.weight", f"{BLOCK}.attention.{p}_proj.weight") for p in "qkv"),
    Rule(f"{LAYER}.attn.out_proj.weight", f"{BLOCK}.attention.o_proj.weight"),
    *linear_rules(f"{LAYER}.", f"{BLOCK}.", "ln_1 attention_norm", "mlp.fc_in ffn.up_proj", "mlp.fc_out ffn.down_proj"),
    *linear_rules("", "", "transformer.ln_f final_norm", "lm_head head.proj"),
)

IGNORED = (
    f"{LAYER}.attn.bias",  # causal-mask buffers of older checkpoints
    f"{LAYER}.attn.masked_bias",
)


def read_rotary_dim(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """The rotated share of each head: ``rotary_dim`` dims (None: the whole of a single head).

    Raises:
        HFImportError: ``rotary_dim: null`` with several heads (a cos/sin table that fits no head).
    """
    d_model, heads = config["n_embd"], config["n_head"]
    head_dim, rotated = d_model // heads, config["rotary_dim"]
    if rotated is None:
        if heads != 1:
            raise HFImportError(
                f"rotary_dim=None with n_head={heads} is not supported: GPT-J then builds its cos/sin table "
                f"n_embd ({d_model}) wide, which fits no head of {head_dim} dims (transformers fails too)"
            )
        rotated = head_dim
    return {"positional.rotary_fraction": rotary_fraction(rotated, head_dim)}


GPTJ = family(
    "gptj",
    classes=("GPTJForCausalLM",),
    rules=RULES,
    ignored=IGNORED,
    base_prefix="transformer.",
    recipes=("gpt-j-6b",),
    rows=(
        *DECODER,
        Key("vocab_size", "vocab_size", 50400),
        Key("n_embd", "d_model", 4096),
        Key("n_layer", "num_layers", 28),
        Key("n_positions", "max_len", 2048),
        TOKENS,
        *PARALLEL_SHARED,
        mha("n_head", 16),
        Key("attn_pdrop", "attention.dropout", 0.0),
        biases(False),
        Fixed("positional.type", "rope"),
        Fixed("positional.theta", 10000.0),  # fixed in GPT-J's code (create_sinusoidal_positions): no config key
        Fixed("positional.interleaved", True),
        Computed(
            "rotary_dim",
            keys={"rotary_dim": 64},
            paths=("positional.rotary_fraction",),
            read=read_rotary_dim,
            write=lambda recipe, weights: {
                "rotary_dim": rotary_dims(
                    recipe.attention.head_dim_for(recipe.d_model), recipe.positional.rotary_fraction
                )
            },
        ),
        *layernorm("layer_norm_epsilon"),
        *mlp("activation_function", "gelu_new", "GPT-J"),
        width("n_inner", None, read=lambda config, recipe: {"ffn.hidden": config["n_inner"] or 4 * config["n_embd"]}),
        dropout("resid_pdrop", "embd_pdrop"),
        *biased_head("GPT-J"),
    ),
)
