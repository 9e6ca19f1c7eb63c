"""Sparse mixture-of-experts FFN: a router sends each token to its top_k experts (Switch, Mixtral, Qwen-MoE,
DeepSeek-V3).

::

    tokens (T, E) ─► router ─► softmax | sigmoid ─► scores (T, X)
    choosing:        scores (+ correction bias) ─► best topk_group of n_group groups ─► top_k ─► indices (T, k)
    weighting:       their scores (no bias) ─► renormalised (optional) ─► × routed_scaling_factor ─► weights (T, k)
    each expert e:   its rows (T_e, E) ─► expert e ─► × their weights ─► added back at their rows
                     (weighted_input: × their weights ─► expert e ─► added back)
    shared_expert:   every row ─► shared_expert ─► × sigmoid(shared_expert_gate) (optional) ─► added (optional)

The defaults are Mixtral's router (softmax, top_k renormalised, no groups, no bias, no scaling); Qwen2-MoE
keeps the top_k softmax probabilities as they are (``normalize: false``) and gates its shared expert;
DeepSeek-V3 scores with a sigmoid, chooses with a correction bias among the best groups, renormalises and
scales by 2.5; gpt-oss's router learns a bias on its logits (``router_bias``) and weights the top_k by a softmax
over their logits, which is Mixtral's renormalised softmax; Llama 4 scales each chosen expert's input by the
sigmoid of its logit rather than its output (``weighted_input``).

The experts are ordinary FFN modules (anything mapping ``(N, L, E) -> (N, L, E)`` position-wise), so an
MoE is usable without zoo: ``MoE(64, num_experts=4, top_k=2, expert=lambda: GatedMLP(64, hidden=128))``.
Experts that are zoo's own MLP or gated FFN (``mlp``, ``swiglu``, ``geglu``, ...) are held stacked, one tensor
per projection for all experts (:class:`GroupedExperts`, the layout of transformers 5): a layer of 256 experts
is 2 to 4 parameters, not 768 modules, so DeepSeek-V3's 14,848 experts build on the meta device in a moment.
Any other expert module is built ``num_experts`` times into an ``nn.ModuleList``.

The layer and its router are in ``layer``, the experts in ``experts``, the recipe options in ``config``; this
package re-exports them and registers ``ffn: moe``.
"""

from __future__ import annotations

from zoo.hookspecs import hookimpl

from .config import MoEConfig
from .experts import GroupedExperts
from .layer import MoE, check_groups, check_top_k

__all__ = ["GroupedExperts", "MoE", "MoEConfig", "check_groups", "check_top_k", "register_components"]


@hookimpl
def register_components(register):
    register("ffn", "moe", MoE, MoEConfig)
