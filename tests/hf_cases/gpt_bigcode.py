"""GPTBigCode: multi-query attention with GPT-2's tied head; and multi-head attention (the per-head fused c_attn)
with unscaled scores, an untied head and its own FFN width."""

from __future__ import annotations

CONFIGS = {"gpt_bigcode": "GPTBigCodeConfig"}

CASES = {
    "gpt-bigcode-mqa": {
        "family": "gpt_bigcode",
        "hf_class": "GPTBigCodeForCausalLM",
        "config": dict(vocab_size=96, n_positions=64, n_embd=32, n_layer=2, n_head=4),
    },
    "gpt-bigcode-mha-unscaled-untied": {
        "family": "gpt_bigcode",
        "hf_class": "GPTBigCodeForCausalLM",
        "config": dict(
            vocab_size=80,
            n_positions=48,
            n_embd=48,
            n_layer=3,
            n_head=6,
            n_inner=80,
            multi_query=False,
            scale_attn_weights=False,
            activation_function="gelu",
            layer_norm_epsilon=1e-6,
            tie_word_embeddings=False,
        ),
    },
}

ZOO_MODELS = {
    # zoo's GPT-2 with one key/value head: GPT-2 cannot say it, GPTBigCode can
    "gpt-tiny-mqa": ("gpt-tiny", {"attention": {"type": "mqa", "num_heads": 4}}),
}


def starcoder(n_embd: int, n_head: int, n_layer: int) -> dict:
    """A StarCoder config.json (bigcode's): its runner keys are the bigcode fork's, which transformers ignores."""
    return {
        "activation_function": "gelu_pytorch_tanh",
        "architectures": ["GPTBigCodeForCausalLM"],
        "attention_softmax_in_fp32": True,
        "attn_pdrop": 0.1,
        "bos_token_id": 0,
        "embd_pdrop": 0.1,
        "eos_token_id": 0,
        "inference_runner": 0,
        "initializer_range": 0.02,
        "layer_norm_epsilon": 1e-05,
        "max_batch_size": None,
        "max_sequence_length": None,
        "model_type": "gpt_bigcode",
        "multi_query": True,
        "n_embd": n_embd,
        "n_head": n_head,
        "n_inner": 4 * n_embd,
        "n_layer": n_layer,
        "n_positions": 8192,
        "pad_key_length": True,
        "pre_allocate_kv_cache": False,
        "resid_pdrop": 0.1,
        "scale_attention_softmax_in_fp32": True,
        "scale_attn_weights": True,
        "summary_activation": None,
        "summary_first_dropout": 0.1,
        "summary_proj_to_labels": True,
        "summary_type": "cls_index",
        "summary_use_proj": True,
        "torch_dtype": "float32",
        "transformers_version": "4.28.1",
        "use_cache": True,
        "validate_runner_input": True,
        "vocab_size": 49152,
    }


PUBLISHED = {
    "starcoderbase-1b": ("GPTBigCodeConfig", starcoder(2048, 16, 24)),
    "starcoder": ("GPTBigCodeConfig", starcoder(6144, 48, 40)),
}
