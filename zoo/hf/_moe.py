"""What the mixture-of-experts families share (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, PhiMoE, Granite-MoE, gpt-oss,
DeepSeek-V2/V3, Llama 4), as row factories a family calls with its data: the router's and experts' weight names
(:func:`moe_rules`), the router's keys (:func:`router_rows`), the experts' widths read off the weights and the dense
layers among the MoE ones (:func:`experts`, a ``layers:`` override of the FFN: :func:`dense_override`;
:func:`twin_shared_expert`, :func:`listed_moe_layers`), clamped experts (:func:`clamped_experts`), the requirements
on them, and the fused expert layouts (transformers 5's in memory; on disk, :func:`fused_experts`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from zoo.errors import HFImportError

from .mapping import Option, Requirement, Rule
from .rows import ACTS, GATED, hidden_act, stacked_experts
from .rows_kinds import FFNLayers
from .table import Computed, Fixed, Key, Refused, Require, Row, Unread

LAYER, BLOCK = "model.layers.{i}", "blocks.{i}"
MLP, FFN = f"{LAYER}.mlp", f"{BLOCK}.ffn"
PROJECTIONS = ("gate", "up", "down")

ROUTER_LOGITS = Unread(
    "output_router_logits", "whether forward also returns the router logits: an output, not the network"
)
"""The router-logits output switch, as PhiMoE and DeepSeek-V2 explain it."""

TRAINING_ONLY = (
    Refused("router_jitter_noise", lambda v: not v, "zoo's router adds no training noise", export=0.0),
    ROUTER_LOGITS,
)
"""A router's keys for training: its jitter noise refused (zoo's router adds none), its logits output unread."""


def swiglu_rules(hf: str, zoo: str) -> tuple[Rule, ...]:
    """The three projections of a gated FFN, named alike on both sides (``gate_proj``, ``up_proj``, ``down_proj``)."""
    return tuple(Rule(f"{hf}.{p}_proj.weight", f"{zoo}.{p}_proj.weight") for p in PROJECTIONS)


DENSE_FFN_RULES = swiglu_rules(MLP, FFN)
"""The plain SwiGLU of a dense layer (the MoE layers' zoo names are ``ffn.router``, ``ffn.experts``, ...)."""


def moe_rules(
    moe: str = MLP,
    *,
    router: str = "gate",
    names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj"),
    kinds: tuple[str, ...] = ("weight",),
    dense: bool = False,
    shared: str | None = None,
) -> tuple[Rule, ...]:
    """The weight names of layer ``{i}``'s MoE module ``moe``: its ``router`` and the experts' gate, up and down
    projections (``names``; Mixtral's ``w1``, ``w3``, ``w2``), each of ``kinds`` (a weight, and a bias too); with
    ``dense``, after a dense layer's SwiGLU of the same module (``mlp.gate_proj``, ...); with ``shared``, before the
    shared expert's."""
    parts = (
        (router, "router"),
        *((f"experts.{{e}}.{hf}", f"experts.{{e}}.{p}_proj") for hf, p in zip(names, PROJECTIONS, strict=True)),
    )
    return (
        *(swiglu_rules(moe, FFN) if dense else ()),
        *(Rule(f"{moe}.{hf}.{kind}", f"{FFN}.{zoo}.{kind}") for hf, zoo in parts for kind in kinds),
        *(swiglu_rules(f"{moe}.{shared}", f"{FFN}.shared_expert") if shared else ()),
    )


def router_rows(
    count: str | None,
    experts: int,
    top_k: int | None,
    *,
    normalize: bool | None = None,
    aux: str = "router_aux_loss_coef",
    fixed: Mapping[str, Any] = {},
) -> tuple[Row, ...]:
    """``ffn.type: moe`` and the router's keys: the experts' ``count`` (of default ``experts``; None: a row of the
    family's reads it), ``num_experts_per_tok``, ``norm_topk_prob`` (where ``normalize`` gives its default) and the
    load-balancing loss's coefficient, ``aux``; ``fixed``: the ``ffn`` fields every model of the family has at one
    value (``{"router_bias": True}``)."""
    return (
        Fixed("ffn.type", "moe"),
        *((Key(count, "ffn.num_experts", experts),) if count else ()),
        Key("num_experts_per_tok", "ffn.top_k", top_k),
        *(() if normalize is None else (Key("norm_topk_prob", "ffn.normalize", normalize, read=bool),)),
        Key(aux, "ffn.aux_loss_coef", 0.001),
        *(Fixed(f"ffn.{name}", value) for name, value in fixed.items()),
    )


WEIGHTED_INPUT = {"scoring": "sigmoid", "normalize": False, "weighted_input": True}
"""``router_rows``' ``fixed`` of a router whose sigmoid scores, unnormalised, scale the chosen experts' input
(Llama 4's)."""


def clamped_experts(owner: str, width: int, alpha: float, limit: float) -> tuple[Row, ...]:
    """Biased SwiGLU experts that clamp (gpt-oss's), ``min(g, limit) * sigmoid(alpha * min(g, limit)) *
    (clamp(u, -limit, limit) + 1)``: their width ``intermediate_size``, ``swiglu_alpha`` and ``swiglu_limit`` (of
    defaults ``width``, ``alpha``, ``limit``); ``owner`` (the HF experts' class) ignores ``hidden_act``."""
    return (
        Fixed("ffn.expert.type", "swiglu"),
        Fixed("ffn.expert.bias", True),
        Fixed("ffn.expert.up_shift", 1.0),  # the (up + 1)
        Key("intermediate_size", "ffn.expert.hidden", width),
        Key("swiglu_alpha", "ffn.expert.alpha", alpha),
        Key("swiglu_limit", "ffn.expert.limit", limit),
        Require("ffn.expert", _clamps),
        Refused("swiglu_limit", lambda v: v is not None, f"{owner} clamp by it; without one they cannot run"),
        Unread("hidden_act", f"{owner} ignore it: their gate is x * sigmoid(swiglu_alpha * x), clamped"),
    )


def _clamps(recipe: Any) -> str | None:
    expert = recipe.ffn.expert
    return None if expert.hidden and expert.limit else "ffn.expert needs its hidden width and a limit (it clamps)"


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


def gated_ffn_misfit(ffn: Any, where: str, act: str | None, owner: str = "these FFNs") -> str | None:
    """Why ``ffn`` (a config or spec dict) is not a bias-free gated FFN of activation ``act``, or None (``owner``:
    what the message calls the FFNs)."""
    spec = ffn if isinstance(ffn, dict) else ffn.model_dump()
    if spec.get("type") not in ACTS:
        return f"{where}.type is {spec.get('type')!r}, needs one of {', '.join(map(repr, ACTS))}"
    if spec.get("bias"):
        return f"{where}.bias is True, needs False ({owner} have no biases)"
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


def dense_first(recipe: Any) -> str | None:
    """A requirement: the dense layers (if any) come first (``first_k_dense_replace``), alike, of the experts'
    activation."""
    problem = only_dense_ffns_differ(recipe)
    if problem:
        return problem
    dense = dense_layers(recipe)
    if dense != list(range(len(dense))):
        return f"the dense layers are {dense}; DeepSeek-V3 has them first (first_k_dense_replace)"
    return None


def shared_expert_fits(recipe: Any) -> str | None:
    """A requirement: a shared expert as wide as a whole number of routed experts (``n_shared_experts``)."""
    shared, expert = recipe.ffn.shared_expert, recipe.ffn.expert
    if shared is None:
        return "ffn.shared_expert is None; DeepSeek-V3 has n_shared_experts >= 1"
    wide, unit = getattr(shared, "hidden", None), getattr(expert, "hidden", None)
    if wide is None or unit is None or wide % unit:
        return (
            f"ffn.shared_expert.hidden is {wide!r}, needs a multiple of ffn.expert.hidden ({unit!r}): "
            "DeepSeek-V3's shared expert is n_shared_experts routed experts wide"
        )
    return None


def fits_moe(recipe: Any) -> str | None:
    """A requirement of DeepSeek's: bias-free gated experts, a shared expert of whole experts, and at least one MoE
    layer."""
    if first_layer(recipe, False) is None:
        return "every layer is dense; DeepSeek-V3 has MoE layers after its first_k_dense_replace dense ones"
    return fits_experts(recipe) or shared_expert_fits(recipe)


def at_least(key: str, why: str, minimum: int = 1, *, bools: bool = True) -> Option:
    """A refusal of ``key`` unless it is an integer >= ``minimum`` (a count of experts, of groups, of layers); with
    ``bools`` False, True and False are refused too."""
    return Option(key, lambda v: isinstance(v, int) and (bools or not isinstance(v, bool)) and v >= minimum, why)


@dataclass(frozen=True)
class DenseLayers:
    """How a family's config says which layers are dense (a gated FFN of ``intermediate_size`` in place of the MoE):
    ``read(config, number of layers)`` gives their indices, ``write(indices)`` the config keys back."""

    keys: Mapping[str, Any]
    read: Callable[[dict[str, Any], int], list[int]]
    write: Callable[[list[int]], dict[str, Any]]
    check: Requirement
    """What a recipe's ``layers:`` overrides must be for ``write`` to say them."""


SPARSE_STEP = DenseLayers(
    {"decoder_sparse_step": 1, "mlp_only_layers": None},
    lambda c, n: [i for i in range(n) if i in (c["mlp_only_layers"] or []) or (i + 1) % c["decoder_sparse_step"]],
    lambda dense: {"decoder_sparse_step": 1, "mlp_only_layers": dense},
    only_dense_ffns_differ,
)
"""Qwen's: the layers in ``mlp_only_layers`` or whose index + 1 is off ``decoder_sparse_step`` (exported as the
list)."""

FIRST_K = DenseLayers(
    {"first_k_dense_replace": 0},
    lambda c, n: list(range(min(c["first_k_dense_replace"], n))),
    lambda dense: {"first_k_dense_replace": len(dense)},
    dense_first,
)
"""DeepSeek's: the first ``first_k_dense_replace`` layers."""


def experts(
    width: int,
    dense_width: int,
    dense: DenseLayers,
    *,
    shared: tuple[str, int] | None = None,
    per_expert: bool = False,
    fits: Requirement = fits_experts,
    requires: Mapping[str, Requirement] | None = None,
) -> Computed:
    """The routed experts, gated FFNs of ``hidden_act`` and ``moe_intermediate_size`` (default ``width``), a
    shared expert of the ``shared`` key (with ``per_expert``, a count of routed experts' widths: DeepSeek's
    ``n_shared_experts``), and the ``dense`` layers' gated FFN of ``intermediate_size``. An export reads the widths
    off the weights; without a dense layer it writes ``intermediate_size`` as the shared expert's width or, with
    none, the top-k experts' (what the published configs give). It requires ``fits`` of ``ffn.experts`` and
    ``dense.check`` of ``layers`` (``requires``: in their place)."""
    key, default = shared or (None, None)

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        act, n, wide = GATED[config["hidden_act"]], config["num_hidden_layers"], config["moe_intermediate_size"]
        layers = dense.read(config, n)
        out: dict[str, Any] = {"ffn.expert": {**act, "hidden": wide}}
        if key:
            out["ffn.shared_expert"] = {**act, "hidden": wide * config[key] if per_expert else config[key]}
        return {**out, "layers": dense_override(layers, {**act, "hidden": config["intermediate_size"]}, n)}

    def write(recipe: Any, weights: Mapping[str, torch.Tensor]) -> dict[str, Any]:
        wide = weight_rows(weights, recipe, False, "experts.0.up_proj.weight")
        out: dict[str, Any] = {"hidden_act": hidden_act(recipe.ffn.expert), "moe_intermediate_size": wide}
        whole = weight_rows(weights, recipe, False, "shared_expert.up_proj.weight") if key else None
        if key:
            out[key] = whole // wide if per_expert else whole
        fallback = whole if key else wide * recipe.ffn.top_k  # no dense layer reads it
        out["intermediate_size"] = weight_rows(weights, recipe, True, "up_proj.weight") or fallback
        return {**out, **dense.write(dense_layers(recipe))}

    widths = {"moe_intermediate_size": width, **({key: default} if key else {}), "intermediate_size": dense_width}
    return Computed(
        "experts",
        keys={"hidden_act": "silu", **widths, **dense.keys},
        paths=("ffn.expert", *(("ffn.shared_expert",) if key else ()), "layers"),
        read=read,
        write=write,
        requires={"ffn.experts": fits, "layers": dense.check} if requires is None else requires,
    )


def fused_experts(module: str, *, interleaved: bool = False, biases: bool = False) -> tuple[Any, Any]:
    """``(layout, hf_layout)`` of experts fused on disk as transformers' ``{module}.experts.gate_up_proj`` (X, E, 2H)
    and ``down_proj`` (X, H, E) (Llama 4's, gpt-oss's): ``rows.stacked_experts`` with the inputs first."""
    gate_up, down = "experts.gate_up_proj", "experts.down_proj"
    return stacked_experts(module, gate_up, down, inputs_first=True, interleaved=interleaved, biases=biases)


def twin_shared_expert(width: str, default: int, family: str) -> Computed:
    """Bias-free gated routed experts of ``hidden_act`` and the width ``width`` (of default ``default``), and a
    shared expert just like them (the ``family``'s is one more expert, unweighted); widths read off the weights."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        expert = {**GATED[config["hidden_act"]], "hidden": config[width]}
        return {"ffn.expert": expert, "ffn.shared_expert": expert}

    def fits(recipe: Any) -> str | None:
        if recipe.ffn.shared_expert != recipe.ffn.expert:
            return f"ffn.shared_expert must equal ffn.expert ({family}'s shared expert is one more expert, unweighted)"
        return fits_experts(recipe)

    return Computed(
        "experts",
        keys={"hidden_act": "silu", width: default},
        paths=("ffn.expert", "ffn.shared_expert"),
        read=read,
        write=lambda recipe, weights: {
            "hidden_act": hidden_act(recipe.ffn.expert),
            width: weight_rows(weights, recipe, False, "experts.0.up_proj.weight"),
        },
        requires={"ffn.experts": fits},
    )


def listed_moe_layers(family: str, default: int, width: str = "intermediate_size_mlp") -> FFNLayers:
    """The dense layers of a stack whose ``moe_layers`` lists its MoE layers (else every
    ``interleave_moe_layer_step``-th is one, a legacy key): a gated FFN of ``hidden_act`` and ``width`` (of default
    ``default``; written as the dense layers' width, else twice the experts'), as ``layer_kinds``' ``ffn`` (Llama
    4's)."""

    def read(config: dict[str, Any], n: int) -> list[dict[str, Any]]:
        step, sparse = config["interleave_moe_layer_step"], config["moe_layers"]
        dense = [i for i in range(n) if i not in (range(step - 1, n, step) if sparse is None else sparse)]
        if len(dense) == n:
            raise HFImportError(f"moe_layers names no layer: zoo imports {family} models with a mixture of experts")
        return dense_override(dense, {**GATED[config["hidden_act"]], "hidden": config[width]}, n)

    def write(recipe: Any, weights: Mapping[str, torch.Tensor]) -> dict[str, Any]:
        experts = weight_rows(weights, recipe, False, "experts.0.up_proj.weight")
        return {
            "moe_layers": [i for i, placed in enumerate(recipe.layer_plan("decoder")) if placed["ffn"][1] == "ffn"],
            width: weight_rows(weights, recipe, True, "up_proj.weight") or 2 * experts,
        }

    keys = {"moe_layers": None, "interleave_moe_layer_step": 1, width: default}
    return FFNLayers(read, write, only_dense_ffns_differ, keys, legacy=("interleave_moe_layer_step",))


def fused_layouts(module: str) -> dict[str, Any]:
    """``derive``'s ``layout`` and ``hf_layout`` of ``fused_experts(module)``, without biases."""
    layout, hf_layout = fused_experts(module)
    return {"layout": layout, "hf_layout": hf_layout}


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
