"""GPT-2 (``GPT2LMHeadModel``): learned positions, pre-norm LayerNorm, GELU-tanh MLP, tied LM head.

GPT-2 stores its linear layers as ``Conv1D`` with (in, out) weights, transposed to zoo's ``nn.Linear``
(out, in); its attention has one fused ``c_attn`` projection, split into q, k and v.
"""

from __future__ import annotations

from .mapping import CONV1D_QKV, SPLIT_QKV, TRANSPOSE, Rule
from .rows_classic import BIASED, LEARNED, PRE_NORM, mha, mlp, width
from .table import Computed, Fixed, Key, Refused, Unread, family

QKV_WEIGHTS = tuple(f"blocks.{{i}}.attention.{p}_proj.weight" for p in "qkv")
QKV_BIASES = tuple(f"blocks.{{i}}.attention.{p}_proj.bias" for p in "qkv")

RULES = (
    Rule("transformer.wte.weight", "embedding.token.weight"),
    Rule("transformer.wpe.weight", "positional.embedding.weight"),
    Rule("transformer.h.{i}.ln_1.weight", "blocks.{i}.attention_norm.weight"),
    Rule("transformer.h.{i}.ln_1.bias", "blocks.{i}.attention_norm.bias"),
    Rule("transformer.h.{i}.attn.c_attn.weight", QKV_WEIGHTS, CONV1D_QKV),
    Rule("transformer.h.{i}.attn.c_attn.bias", QKV_BIASES, SPLIT_QKV),
    Rule("transformer.h.{i}.attn.c_proj.weight", "blocks.{i}.attention.o_proj.weight", TRANSPOSE),
    Rule("transformer.h.{i}.attn.c_proj.bias", "blocks.{i}.attention.o_proj.bias"),
    Rule("transformer.h.{i}.ln_2.weight", "blocks.{i}.ffn_norm.weight"),
    Rule("transformer.h.{i}.ln_2.bias", "blocks.{i}.ffn_norm.bias"),
    Rule("transformer.h.{i}.mlp.c_fc.weight", "blocks.{i}.ffn.up_proj.weight", TRANSPOSE),
    Rule("transformer.h.{i}.mlp.c_fc.bias", "blocks.{i}.ffn.up_proj.bias"),
    Rule("transformer.h.{i}.mlp.c_proj.weight", "blocks.{i}.ffn.down_proj.weight", TRANSPOSE),
    Rule("transformer.h.{i}.mlp.c_proj.bias", "blocks.{i}.ffn.down_proj.bias"),
    Rule("transformer.ln_f.weight", "final_norm.weight"),
    Rule("transformer.ln_f.bias", "final_norm.bias"),
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied: a tied head is the token table
)

LAYER, BLOCK = "transformer.h.{i}", "blocks.{i}"
LINEAR = ("ln_1 attention_norm", "ln_2 ffn_norm", "mlp.c_fc ffn.up_proj", "mlp.c_proj ffn.down_proj")


def gpt2_linear_rules(qkv: tuple[Rule, ...], out: str) -> tuple[Rule, ...]:
    """GPT-2's weight rows as ``nn.Linear`` holds them (out, in), with a child's ``qkv`` rows and its biased output
    projection ``out`` (a module of each layer): GPTBigCode's, GPT-Neo's."""
    return (
        Rule("transformer.wte.weight", "embedding.token.weight"),
        Rule("transformer.wpe.weight", "positional.embedding.weight"),
        *qkv,
        *(Rule(f"{LAYER}.{out}.{k}", f"{BLOCK}.attention.o_proj.{k}") for k in ("weight", "bias")),
        *(
            Rule(f"{LAYER}.{hf}.{k}", f"{BLOCK}.{zoo}.{k}")
            for hf, zoo in map(str.split, LINEAR)
            for k in ("weight", "bias")
        ),
        Rule("transformer.ln_f.weight", "final_norm.weight"),
        Rule("transformer.ln_f.bias", "final_norm.bias"),
        Rule("lm_head.weight", "head.proj.weight"),  # only when untied
    )


IGNORED = (
    "transformer.h.{i}.attn.bias",  # causal-mask buffers of older checkpoints
    "transformer.h.{i}.attn.masked_bias",
    "lm_head.weight",  # the tied copy of wte that some checkpoints store
)

SUMMARY = ("summary_activation", "summary_first_dropout", "summary_proj_to_labels", "summary_type", "summary_use_proj")
GPT2_ONLY = ("scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", *SUMMARY)
"""GPT-2's keys that its children's configs lack (its score-scaling flags, GPT2DoubleHeadsModel's summary head)."""

GPT2 = family(
    "gpt2",
    classes=("GPT2LMHeadModel", "GPT2Model"),
    rules=RULES,
    ignored=IGNORED,
    base_prefix="transformer.",
    recipes=("gpt2-small",),
    rows=(
        Fixed("architecture", "decoder"),
        *PRE_NORM,
        Fixed("type_vocab_size", 0, imported=False),
        Key("vocab_size", "vocab_size", 50257),
        Key("n_positions", "max_len", 1024),
        Key("n_embd", "d_model", 768),
        Key("n_layer", "num_layers", 12),
        Key("pad_token_id", "pad_token_id", None),
        Fixed("embedding.type", "token"),  # no padding row: wte is a plain nn.Embedding
        LEARNED,
        *mha("n_head", 12, "attn_pdrop", 0.1),
        BIASED,
        Fixed("norm.type", "layernorm"),
        Key("layer_norm_epsilon", "norm.eps", 1e-5),
        *mlp("activation_function", "gelu_new", "GPT-2"),
        width("n_inner", None, read=lambda config, recipe: {"ffn.hidden": config["n_inner"] or 4 * config["n_embd"]}),
        Key("resid_pdrop", "dropout", 0.1),
        Computed(
            "embd_pdrop",  # GPT-2's dropout on the embeddings, zoo's one dropout's: written, not read
            keys={"embd_pdrop": 0.1},
            paths=("dropout",),
            read=lambda config, recipe: {},
            write=lambda recipe, weights: {"embd_pdrop": recipe.dropout},
        ),
        Fixed("head.type", "lm"),
        Key("tie_word_embeddings", "head.tie_embeddings", True),
        Refused("add_cross_attention", lambda v: not v, "zoo's decoder has no cross-attention"),
        Refused("scale_attn_weights", lambda v: v is not False, "zoo always scales scores by 1/sqrt(head_dim)"),
        Refused(
            "scale_attn_by_inverse_layer_idx",
            lambda v: not v,
            "zoo has no per-layer score scale of 1/(layer_idx + 1)",
        ),
        Unread("reorder_and_upcast_attn", "the order of the score scaling and an fp32 upcast: the same function"),
        *(Unread(key, "GPT2DoubleHeadsModel's multiple-choice head, a class zoo does not import") for key in SUMMARY),
    ),
)
