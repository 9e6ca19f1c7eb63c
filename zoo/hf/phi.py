"""Phi-1, Phi-1.5 and Phi-2 (``PhiForCausalLM``): GPT-NeoX's network with one shared norm for attention and MLP in
parallel, RoPE over the first ``partial_rotary_factor`` of each head, MHA or GQA, optional LayerNorms over each
head's queries and keys (``qk_layernorm``: one norm shared by all heads, zoo's ``qk_norm``), an untied biased head."""

from .gpt_neox import GPT_NEOX
from .mapping import Rule, activation_option
from .rows import PAD, biases, heads
from .rows_neox import PARALLEL_SHARED, biased_head, dropout, linear_rules, qk_layernorm, rope

LAYER = ("input_layernorm attention_norm", "self_attn.dense attention.o_proj", "mlp.fc1 ffn.up_proj")
QKV = (*(f"self_attn.{p}_proj attention.{p}_proj" for p in "qkv"), "mlp.fc2 ffn.down_proj")
QK_NORMS = ("self_attn.q_layernorm attention.q_norm", "self_attn.k_layernorm attention.k_norm")  # with qk_layernorm

PHI = GPT_NEOX.derive(
    "phi",
    classes=("PhiForCausalLM",),
    rules=(
        Rule("model.embed_tokens.weight", "embedding.token.weight"),
        *linear_rules("model.layers.{i}.", "blocks.{i}.", *LAYER, *QKV, *QK_NORMS),
        *linear_rules("", "", "model.final_layernorm final_norm", "lm_head head.proj"),
    ),
    ignored=("model.layers.{i}.self_attn.rotary_emb.inv_freq",),  # a buffer of older checkpoints
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    recipes=("phi-2",),
    drop=("use_parallel_residual", "tie_word_embeddings", "classifier_dropout", "is_decoder"),
    rows=(
        heads(head_dim="unless implied"),  # PhiConfig has no head_dim, but PhiAttention reads one a config.json gives
        PAD,
        *PARALLEL_SHARED,
        biases(True, True),
        qk_layernorm(False, family="Phi"),
        rope(share=0.5, head_dim=True),
        activation_option("hidden_act", "Phi"),
        dropout("resid_pdrop", "embd_pdrop"),
        *biased_head("Phi"),
    ),
    defaults={"vocab_size": 51200, "hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 32}
    | {"intermediate_size": 8192, "hidden_act": "gelu_new"},
)
