"""A LoRA model's adapters at export: folded into the weights (``--merge-lora``), or written beside the Hugging Face
checkpoint as a PEFT adapter folder that ``peft.PeftModel.from_pretrained(hf_model, OUT/adapter)`` loads.

The folder holds ``adapter_config.json`` (``peft_type: LORA``, ``r``, ``lora_alpha``, ``target_modules`` in the
Hugging Face module names) and ``adapter_model.safetensors`` with PEFT's tensor names
(``base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight``). Each adapted zoo linear is found in the
family's weight table (``mapping.links``): PEFT adapts whole modules, so a linear whose Hugging Face tensor is
stored another way (GPT-2's ``c_attn`` fuses q, k and v; a transposed Conv1D), or that PEFT would read as something
else (a MoE model's MLP projections, which PEFT maps onto the fused experts), is refused by name, and
``--merge-lora`` still exports it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import nn

from zoo.components.moe import MoE
from zoo.errors import HFExportError
from zoo.lora import lora_state, merge_lora, strip_lora

from .mapping import SAME, Family, links, zoo_tensors

ADAPTER_DIR = "adapter"
"""``OUT/adapter``: the PEFT folder an export of a LoRA model (without ``--merge-lora``) writes."""
PEFT_MOE_NAMES = frozenset({"gate_proj", "up_proj", "down_proj", "w1", "w2", "w3", "gate"})
"""Module names that PEFT's transformers-5 conversion of a MoE model's adapter turns into expert parameters,
whichever module they name (peft.utils.transformers_weight_conversion): refused for the MoE families."""
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


@dataclass
class Adapters:
    """The adapters taken off a model at export: its ``train.lora`` settings and ``{zoo module: (A, B)}``."""

    config: Any
    modules: dict[str, tuple[torch.Tensor, torch.Tensor]]


def take_adapters(model: nn.Module, *, merge: bool, where: str) -> tuple[Adapters | None, str | None]:
    """Leave ``model`` a plain model for the export: its adapters merged into the weights (``merge``), or taken
    off (returned, to be written as a PEFT folder). Returns (the adapters or None, a note for the export).

    Raises:
        HFExportError: ``merge`` for a model without adapters.
    """
    state = lora_state(model)
    if not state:
        if merge:
            raise HFExportError(f"--merge-lora: {where} has no LoRA adapters (its recipe has no train.lora): drop it")
        return None, None
    config = model.recipe.train.lora
    if merge:
        merge_lora(model)
        return None, f"{len(state)} LoRA adapters merged into their weights (W + (alpha / rank) * B @ A)"
    adapters = Adapters(config, {n: (a.clone(), b.clone()) for n, (a, b) in state.items()})
    strip_lora(model)
    return adapters, None


def peft_files(
    adapters: Adapters, model: nn.Module, family: Family, hf_class: str, hf_names: set[str]
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(adapter_config.json, adapter_model.safetensors' tensors) of ``adapters`` for the Hugging Face export of
    ``model`` (stripped of them); ``hf_names``: the tensor names that export writes.

    Raises:
        HFExportError: an adapted linear that PEFT cannot adapt in the Hugging Face model (named, with why).
    """
    recipe = model.recipe
    found, _ = links(family.rules, zoo_tensors(model), recipe)
    by_zoo = {zoo: link for link in found for zoo in link.zoo}
    moe = any(isinstance(m, MoE) for m in model.modules())
    tensors: dict[str, torch.Tensor] = {}
    modules: list[str] = []
    for name, (a, b) in adapters.modules.items():
        link = by_zoo.get(f"{name}.weight")
        why = None
        if link is None:
            why = "no row of the table maps its weight"
        elif len(link.zoo) > 1:
            others = ", ".join(z.removesuffix(".weight") for z in link.zoo if z != f"{name}.weight")
            why = f"the checkpoint fuses it with {others} into one tensor, {link.hf[0]}"
        elif len(link.hf) > 1 or link.transform is not SAME:
            why = f"the checkpoint stores it as {', '.join(link.hf)} ({link.transform.name})"
        module = "" if link is None else link.hf[0].removesuffix(".weight")
        if link is not None and hf_class == family.base_class:
            module = module.removeprefix(family.base_prefix)
        if why is None and f"{module}.weight" not in hf_names:
            why = f"the {family.name} layout writes {module}.weight under another name"
        if why is None and moe and module.rpartition(".")[2] in PEFT_MOE_NAMES:
            why = (
                f"{module} is an MLP projection of a mixture-of-experts model, and PEFT (under transformers 5) reads "
                "such a target as the model's fused experts"
            )
        if why is not None:
            raise HFExportError(
                f"the LoRA adapter of {name} cannot be written as a PEFT folder: {why}, and PEFT adapts whole "
                "Hugging Face modules. Export with --merge-lora to fold the adapters into the weights"
            )
        modules.append(module)
        tensors[f"base_model.model.{module}.lora_A.weight"] = a.contiguous()
        tensors[f"base_model.model.{module}.lora_B.weight"] = b.contiguous()
    config = adapters.config
    config_json = {
        "peft_type": "LORA",
        "task_type": _task_type(recipe.architecture, hf_class),
        "base_model_name_or_path": None,
        "r": config.rank,
        "lora_alpha": config.alpha,
        "lora_dropout": config.dropout,
        "target_modules": _target_modules(modules, hf_names),
        "bias": "none",
        "fan_in_fan_out": False,
        "modules_to_save": None,
        "init_lora_weights": True,
        "use_rslora": False,
        "use_dora": False,
        "inference_mode": True,
        "layers_to_transform": None,
        "layers_pattern": None,
        "rank_pattern": {},
        "alpha_pattern": {},
    }
    return config_json, tensors


def _task_type(architecture: str, hf_class: str) -> str | None:
    if architecture == "decoder" and hf_class.endswith(("ForCausalLM", "LMHeadModel")):
        return "CAUSAL_LM"
    if architecture == "encoder-decoder" and hf_class.endswith("ForConditionalGeneration"):
        return "SEQ_2_SEQ_LM"
    return None


def _target_modules(modules: list[str], hf_names: set[str]) -> list[str]:
    """The short names (``q_proj``) when they select exactly the adapted modules of the checkpoint, else every
    full module name."""
    short = sorted({m.rpartition(".")[2] for m in modules})
    every = {n.removesuffix(".weight") for n in hf_names if n.endswith(".weight")}
    selected = {m for m in every if m.rpartition(".")[2] in short}
    return short if selected == set(modules) else sorted(modules)


def write_adapter(folder: Path, config: dict[str, Any], tensors: dict[str, torch.Tensor]) -> Path:
    """Write a PEFT adapter folder (``adapter_config.json``, ``adapter_model.safetensors``); returns it."""
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    (folder / ADAPTER_CONFIG).write_text(json.dumps(config, indent=1), encoding="utf-8")
    return folder
