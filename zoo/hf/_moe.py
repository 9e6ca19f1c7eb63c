"""What the mixture-of-experts families share (Qwen2-MoE, Qwen3-MoE, OLMoE, DeepSeek-V3): the weight names of
gated experts, dense layers among the MoE ones (a ``layers:`` override of the FFN: :func:`dense_override`), the
requirements on both, transformers 5's fused in-memory expert layout, and the widths an export reads off the
weights.
"""

from __future__ import annotations

from typing import Any

import torch

from zoo.errors import HFImportError

from .mapping import Rule
from .rows import ACTS, hidden_act

LAYER, BLOCK = "model.layers.{i}", "blocks.{i}"
MLP, FFN = f"{LAYER}.mlp", f"{BLOCK}.ffn"
PROJECTIONS = ("gate", "up", "down")


def swiglu_rules(hf: str, zoo: str) -> tuple[Rule, ...]:
    """The three projections of a gated FFN, named alike on both sides (``gate_proj``, ``up_proj``, ``down_proj``)."""
    return tuple(Rule(f"{hf}.{p}_proj.weight", f"{zoo}.{p}_proj.weight") for p in PROJECTIONS)


DENSE_FFN_RULES = swiglu_rules(MLP, FFN)
"""The plain SwiGLU of a dense layer (the MoE layers' zoo names are ``ffn.router``, ``ffn.experts``, ...)."""


def dense_override(layers: list[int], ffn: dict[str, Any], num_layers: int) -> list[dict[str, Any]]:
    """The ``layers:`` override that gives ``layers`` the dense ``ffn`` (none when there are no such layers).

    Raises:
        HFImportError: every layer is dense (a dense model of another family).
    """
    if not layers:
        return []
    if len(layers) == num_layers:
        raise HFImportError(
            f"every one of the {num_layers} layers is dense (no MoE layer): this is a dense model; import it "
            "as the dense family (qwen2, llama)"
        )
    contiguous = layers == list(range(len(layers)))
    return [{"select": f":{len(layers)}" if contiguous else layers, "ffn": ffn}]


def dense_layers(recipe: Any) -> list[int]:
    """The indices of the layers whose FFN is not the recipe's MoE (a ``layers:`` override replaced it)."""
    return [i for i, placed in enumerate(recipe.layer_plan("decoder")) if placed["ffn"][1] != "ffn"]


def gated_ffn_misfit(ffn: Any, where: str, act: str | None) -> str | None:
    """Why ``ffn`` (a config or spec dict) is not a bias-free gated FFN of activation ``act``, or None."""
    spec = ffn if isinstance(ffn, dict) else ffn.model_dump()
    if spec.get("type") not in ACTS:
        return f"{where}.type is {spec.get('type')!r}, needs one of {', '.join(map(repr, ACTS))}"
    if spec.get("bias"):
        return f"{where}.bias is True, needs False (these FFNs have no biases)"
    if act is not None and hidden_act(spec) != act:
        return f"{where} computes {hidden_act(spec)}, but the experts {act}: the family has one hidden_act"
    return None


def only_dense_ffns_differ(recipe: Any) -> str | None:
    """A requirement: ``layers:`` overrides only swap the MoE for one bias-free gated FFN of the experts'
    activation, the same in every dense layer (the family's config has one ``intermediate_size``)."""
    expert = recipe.ffn.expert if recipe.ffn.type == "moe" else None
    act = hidden_act(expert) if expert is not None and expert.type in ACTS else None
    dense = None
    for j, override in enumerate(recipe.layers):
        if override.attention is not None or override.norm is not None:
            return f"layers.{j}: overrides an attention or a norm; only the FFN may differ per layer (dense layers)"
        if override.ffn is None:
            continue
        problem = gated_ffn_misfit(override.ffn, f"layers.{j}.ffn", act)
        if problem:
            return problem
        if dense is not None and override.ffn != dense:
            return f"layers.{j}.ffn differs from another dense layer's; the family has one intermediate_size"
        dense = override.ffn
    return None


def fits_experts(recipe: Any) -> str | None:
    """A requirement: routed and shared experts are bias-free gated FFNs of one activation."""
    act = hidden_act(recipe.ffn.expert) if recipe.ffn.expert.type in ACTS else None
    problem = gated_ffn_misfit(recipe.ffn.expert, "ffn.expert", None)
    if problem is None and recipe.ffn.shared_expert is not None:
        problem = gated_ffn_misfit(recipe.ffn.shared_expert, "ffn.shared_expert", act)
    return problem


def split_fused_experts(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Transformers 5's in-memory experts -> the per-expert layout that ``save_pretrained`` writes.

    ``mlp.experts.gate_up_proj`` (X, 2H, E) holds each expert's gate then up projection, ``mlp.experts.down_proj``
    (X, E, H) each expert's down projection. Other tensors pass unchanged.
    """
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        experts, _, leaf = name.rpartition(".")
        if experts.endswith(".mlp.experts") and leaf == "gate_up_proj":
            for e, (gate, up) in enumerate(zip(*tensor.chunk(2, dim=1), strict=True)):
                out[f"{experts}.{e}.gate_proj.weight"], out[f"{experts}.{e}.up_proj.weight"] = gate, up
        elif experts.endswith(".mlp.experts") and leaf == "down_proj":
            for e, down in enumerate(tensor.unbind(0)):
                out[f"{experts}.{e}.down_proj.weight"] = down
        else:
            out[name] = tensor
    return out


def first_layer(recipe: Any, dense: bool) -> int | None:
    """The index of the first dense (or MoE) layer, None if there is none."""
    layers = dense_layers(recipe)
    return next((i for i in range(recipe.num_layers) if (i in layers) == dense), None)


def weight_rows(weights: dict[str, torch.Tensor], recipe: Any, dense: bool, leaf: str) -> int | None:
    """The rows of ``blocks.{i}.ffn.{leaf}`` in the first dense (or MoE) layer: its hidden width; None if none."""
    i = first_layer(recipe, dense)
    return None if i is None else weights[f"blocks.{i}.ffn.{leaf}"].shape[0]


def unfuse_experts(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Transformers 5's in-memory Mixtral layout -> the per-expert layout that ``save_pretrained`` writes.

    ``mlp.experts.gate_up_proj`` (X, 2H, E) holds each expert's w1 (gate) then w3 (up);
    ``mlp.experts.down_proj`` (X, E, H) each expert's w2; ``mlp.gate`` is the router.
    """
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        layer, _, leaf = name.partition(".mlp.experts.")
        experts = f"{layer}.block_sparse_moe.experts"
        if leaf == "gate_up_proj":
            for e, (w1, w3) in enumerate(zip(*tensor.chunk(2, dim=1), strict=True)):
                out[f"{experts}.{e}.w1.weight"], out[f"{experts}.{e}.w3.weight"] = w1, w3
        elif leaf == "down_proj":
            for e, w2 in enumerate(tensor.unbind(0)):
                out[f"{experts}.{e}.w2.weight"] = w2
        else:
            out[name.replace(".mlp.gate.", ".block_sparse_moe.gate.")] = tensor
    return out
