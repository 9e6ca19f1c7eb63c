"""CodeGen: the fused qkv_proj in its 4 blocks with whole heads in each block, a quarter of each head rotated; and
heads that straddle the blocks (E/4 = 12 rows, heads of 8), every head dim rotated, its own FFN width and
activation."""

from __future__ import annotations

CONFIGS = {"codegen": "CodeGenConfig"}

CASES = {
    "codegen-partial-rotary": {
        "family": "codegen",
        "hf_class": "CodeGenForCausalLM",
        "config": dict(vocab_size=96, n_positions=64, n_ctx=64, n_embd=64, n_layer=2, n_head=4, rotary_dim=4),
    },
    "codegen-straddling-heads-full-rotary": {
        "family": "codegen",
        "hf_class": "CodeGenForCausalLM",
        "config": dict(
            vocab_size=80,
            n_positions=48,
            n_embd=48,
            n_layer=3,
            n_head=6,
            rotary_dim=8,
            n_inner=80,
            activation_function="gelu",
            layer_norm_epsilon=1e-6,
        ),
    },
}


def codegen(n_embd: int, n_head: int, n_layer: int, rotary_dim: int) -> dict:
    """A CodeGen mono config.json (Salesforce's)."""
    return {
        "activation_function": "gelu_new",
        "architectures": ["CodeGenForCausalLM"],
        "attn_pdrop": 0.0,
        "bos_token_id": 1,
        "embd_pdrop": 0.0,
        "eos_token_id": 50256,
        "gradient_checkpointing": False,
        "initializer_range": 0.02,
        "layer_norm_epsilon": 1e-05,
        "model_type": "codegen",
        "n_ctx": 2048,
        "n_embd": n_embd,
        "n_head": n_head,
        "n_inner": None,
        "n_layer": n_layer,
        "n_positions": 2048,
        "resid_pdrop": 0.0,
        "rotary_dim": rotary_dim,
        "scale_attn_weights": True,
        "summary_activation": None,
        "summary_first_dropout": 0.1,
        "summary_proj_to_labels": True,
        "summary_type": "cls_index",
        "summary_use_proj": True,
        "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50, "temperature": 1.0}},
        "tie_word_embeddings": False,
        "tokenizer_class": "GPT2Tokenizer",
        "torch_dtype": "float16",
        "transformers_version": "4.21.0.dev0",
        "use_cache": True,
        "vocab_size": 51200,
    }


PUBLISHED = {
    "codegen-350m-mono": ("CodeGenConfig", codegen(1024, 16, 20, 32)),
    "codegen-2b-mono": ("CodeGenConfig", codegen(2560, 32, 32, 64)),
}
