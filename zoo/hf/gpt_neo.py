"""GPT-Neo (``GPTNeoForCausalLM``): GPT-2's stack with ``nn.Linear`` layers, unbiased q/k/v projections, unscaled
scores (``attention.scale: 1.0``), and global or local layers as ``attention_types`` repeats them: a local query sees
the ``window_size`` most recent keys, itself included (``tril(1) ^ tril(1, -window_size)``), zoo's ``window``."""

from typing import Any

from zoo.errors import HFImportError

from .gpt2 import BLOCK, GPT2, GPT2_ONLY, LAYER, gpt2_linear_rules
from .mapping import Rule
from .rows import biases, per_layer_attention
from .rows_neox import dropout, wider
from .table import Computed, Fixed, Key, Unread
from .windows import layer_windows, only_windows_differ

ATTENTION = f"{LAYER}.attn.attention"
DEFAULT_TYPES = [[["global", "local"], 12]]


def read_windows(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """The local layers' window, as ``GPTNeoConfig`` expands ``attention_types`` into one type per layer."""
    pattern = config["attention_types"] or DEFAULT_TYPES  # GPTNeoConfig's, when a config.json gives null
    types = [kind for kinds, repeat in pattern for _ in range(repeat) for kind in kinds]
    if len(types) != config["num_layers"] or set(types) - {"global", "local"}:
        raise HFImportError(
            f"attention_types={pattern!r} is not supported: zoo builds num_layers ({config['num_layers']}) layers, "
            "each global or local, as transformers does"
        )
    return per_layer_attention(recipe, [{"window": config["window_size"]} if t == "local" else {} for t in types])


def write_windows(recipe: Any, weights: Any) -> dict[str, Any]:
    """``attention_types`` as the shortest pattern that repeats over the layers, and the local layers' window."""
    types = ["global" if window is None else "local" for window in layer_windows(recipe)]
    n = len(types)
    period = next(p for p in range(1, n + 1) if n % p == 0 and types == types[:p] * (n // p))
    window = next((w for w in layer_windows(recipe) if w is not None), 256)
    return {"attention_types": [[types[:period], n // period]], "window_size": window}


GPT_NEO = GPT2.derive(
    "gpt_neo",
    classes=("GPTNeoForCausalLM",),
    rules=gpt2_linear_rules(
        tuple(Rule(f"{ATTENTION}.{p}_proj.weight", f"{BLOCK}.attention.{p}_proj.weight") for p in "qkv"),
        "attn.attention.out_proj",
    ),
    ignored=(f"{ATTENTION}.bias", f"{ATTENTION}.masked_bias", "lm_head.weight"),  # mask buffers; the tied copy
    recipes=("gpt-neo-1.3b", "gpt-neo-125m"),
    drop=("n_positions", "n_embd", "n_layer", "n_head", "attn_pdrop", "resid_pdrop", "embd_pdrop", "layers")
    + ("add_cross_attention", *GPT2_ONLY),
    rows=(
        Key("max_position_embeddings", "max_len", 2048),
        Key("hidden_size", "d_model", 2048),
        Key("num_layers", "num_layers", 24),
        Key("num_heads", "attention.num_heads", 16),
        Key("attention_dropout", "attention.dropout", 0.0),
        Fixed("attention.scale", 1.0),
        biases(False, True),
        wider("intermediate_size", "hidden_size"),
        dropout("resid_dropout", "embed_dropout"),  # after each sub-layer, and (written, not read) on the embeddings
        Computed(
            "windows",
            keys={"attention_types": DEFAULT_TYPES, "window_size": 256},
            paths=("attention.window", "layers"),
            read=read_windows,
            write=write_windows,
            requires={"layers": only_windows_differ},
            last=True,  # its layer overrides copy the attention as the other rows made it
        ),
        Unread("attention_layers", "GPTNeoConfig recomputes it from attention_types"),
        Unread("classifier_dropout", "the dropout of GPT-Neo's classifier heads, classes zoo does not import"),
    ),
)
