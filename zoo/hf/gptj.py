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
from .rows_classic import biases, mlp
from .rows_neox import DECODER, PARALLEL_SHARED, TOKENS, biased_head, dropout, layernorm, linear_rules, mha, wider
from .table import Computed, Fixed, Key, family

LAYER, BLOCK = "transformer.h.{i}", "blocks.{i}"

RULES = (
    Rule("transformer.wte.weight", "embedding.token.weight"),
    *(Rule(f"{LAYER}.attn.{p}_proj.weight", f"{BLOCK}.attention.{p}_proj.weight") for p in "qkv"),
    Rule(f"{LAYER}.attn.out_proj.weight", f"{BLOCK}.attention.o_proj.weight"),
    *linear_rules(f"{LAYER}.", f"{BLOCK}.", "ln_1 attention_norm", "mlp.fc_in ffn.up_proj", "mlp.fc_out ffn.down_proj"),
    *linear_rules("", "", "transformer.ln_f final_norm", "lm_head head.proj"),
)

IGNORED = (f"{LAYER}.attn.bias", f"{LAYER}.attn.masked_bias")  # causal-mask buffers of older checkpoints


def read_rotary_dim(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """The rotated share of each head: ``rotary_dim`` dims (None: the whole of a single head; with several heads,
    GPT-J's cos/sin table fits none: refused)."""
    heads, head_dim, rotated = config["n_head"], config["n_embd"] // config["n_head"], config["rotary_dim"]
    if rotated is None and heads != 1:
        raise HFImportError(
            f"rotary_dim=None with n_head={heads} is not supported: GPT-J then builds its cos/sin table "
            f"n_embd ({config['n_embd']}) wide, which fits no head of {head_dim} dims (transformers fails too)"
        )
    return {"positional.rotary_fraction": rotary_fraction(head_dim if rotated is None else rotated, head_dim)}


def write_rotary_dim(recipe: Any, weights: Any) -> dict[str, Any]:
    return {"rotary_dim": rotary_dims(recipe.attention.head_dim_for(recipe.d_model), recipe.positional.rotary_fraction)}


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
        Computed("rotary_dim", {"rotary_dim": 64}, ("positional.rotary_fraction",), read_rotary_dim, write_rotary_dim),
        *layernorm("layer_norm_epsilon"),
        *mlp("activation_function", "gelu_new", "GPT-J"),
        wider("n_inner", "n_embd"),
        dropout("resid_pdrop", "embd_pdrop"),
        *biased_head("GPT-J"),
    ),
)
