"""Gemma 3, text only (``Gemma3ForCausalLM``, model_type ``gemma3_text``): Gemma 2 with QK-norm (a (1 + w) RMSNorm
over each head, before the rotation) for the score cap, five local layers to one global, and a rope of each kind:
local ones of base ``rope_local_base_freq``, global ones ``rope_theta`` and ``rope_scaling`` (4.x), or per kind."""

from .gemma2 import GEMMA2
from .rows import head_qk_norm
from .rows_gemma import local_global_ropes
from .table import Unread

GEMMA3 = GEMMA2.derive(
    "gemma3",
    model_type="gemma3_text",
    classes=("Gemma3ForCausalLM",),
    recipes=("gemma-3-1b",),
    drop=("rope", "rope_parameters.rope_type", "rope_parameters.partial_rotary_factor", "attn_logit_softcapping"),
    rows=(
        head_qk_norm(  # Gemma's (1 + w) RMSNorm, which took the score cap's place: none
            "attention.qk_norm is {shown} (scope {scope}), needs {{type: rmsnorm, eps: {eps}, offset: 1.0}} per head "
            "(Gemma 3's q_norm and k_norm)",
            offset=1.0,
            writes={"attn_logit_softcapping": None},
        ),
        *local_global_ropes("Gemma 3", "rope_local_base_freq", 10_000.0, pattern=6),  # the local layers' the recipe's
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
