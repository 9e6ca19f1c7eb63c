"""Gemma 3, text only (``Gemma3ForCausalLM``, ``gemma3_text``): Gemma 2 with QK-norm in place of the score cap, five
local layers to one global, and a rope of each kind (local: ``rope_local_base_freq``; global: ``rope_theta``)."""

from .gemma2 import GEMMA2
from .layer_kinds import GLOBAL, LOCAL, kind_ropes, local_global_layers, rope_options_per_kind
from .rows import ROPE, head_qk_norm
from .rows_rope import yarn_truncates
from .table import Unread

GEMMA3 = GEMMA2.derive(
    "gemma3",
    model_type="gemma3_text",
    classes=("Gemma3ForCausalLM",),
    recipes=("gemma-3-1b",),
    drop=("rope", "rope_parameters.rope_type", "rope_parameters.partial_rotary_factor", "attn_logit_softcapping"),
    rows=(
        head_qk_norm(  # Gemma's (1 + w) RMSNorm over each head, before the rotation, in the score cap's place: none
            "attention.qk_norm is {shown} (scope {scope}), needs {{type: rmsnorm, eps: {eps}, offset: 1.0}} per head "
            "(Gemma 3's q_norm and k_norm)",
            offset=1.0,
            writes={"attn_logit_softcapping": None},
        ),
        *local_global_layers(  # the recipe's attention and rope are the local layers' (the more common kind)
            "Gemma 3",
            None,
            lambda c: kind_ropes(c, {GLOBAL: c["rope_theta"], LOCAL: c["rope_local_base_freq"]}, nested=True),
            keys={**ROPE.keys, "rope_local_base_freq": 10_000.0, "sliding_window_pattern": 6},
            requires={**ROPE.requires, "positional.truncate": yarn_truncates("Gemma 3")},
            legacy=("rope_theta", "rope_local_base_freq", "rope_scaling", "sliding_window_pattern"),  # transformers 4's
        ),
        *rope_options_per_kind("Gemma 3's attention rotates every head dim", rope_type=True),
        Unread(
            "attn_logit_softcapping",
            "transformers' Gemma 3 attention never applies it (QK-norm took the score cap's place), so zoo leaves "
            "the scores uncapped as transformers does",
        ),
        Unread(
            "_sliding_window_pattern",
            "transformers' copy of sliding_window_pattern; the layer_types written beside it say which layers are "
            "local, as transformers reads them",
        ),
    ),
    defaults={"vocab_size": 262208, "max_position_embeddings": 131072, "rope_theta": 1_000_000.0}
    | {"final_logit_softcapping": None},
)
