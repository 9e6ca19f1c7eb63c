"""The remote-code export: any zoo model as a Hugging Face folder that ``trust_remote_code`` loads.

A recipe that fits no family (``zoo.hf.family_of``) still exports: the folder gets a fixed, generic
``modeling_zoo.py`` and ``configuration_zoo.py`` (``zoo/data/remote``; they import torch and transformers, never
zoo), ``config.json`` whose ``auto_map`` names them, the weights once in ``model.safetensors`` (``zoo.<name>``),
and one ``torch.export`` program per entry point, ``<name>.pt2``, that computes the model from those weights
(they are the program's inputs, not its state). The batch and sequence lengths are dynamic (up to ``max_len``).

    decoder          forward(input_ids, attention_mask, positions) -> logits   AutoModelForCausalLM
    encoder          forward(input_ids, attention_mask[, token_type_ids])      AutoModelForMaskedLM, ...
    encoder-decoder  encode(input_ids, attention_mask) -> hidden               AutoModelForSeq2SeqLM
                     decode(decoder_input_ids, hidden, attention_mask, decoder_attention_mask) -> logits
    vit              forward(pixel_values) -> logits                           AutoModelForImageClassification

Every program is checked against the model on inputs of other shapes (a padded batch) before anything is
written; a component that ``torch.export`` cannot trace over a dynamic sequence length is refused by name.
Generation recomputes the sequence at every step: the programs hold no key/value cache.
"""

from __future__ import annotations

import io
import shutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from zoo.errors import HFExportError
from zoo.files import atomic_write

from .io import write_checkpoint
from .mapping import dtype_name

__all__ = ["REMOTE_CODE", "TOLERANCE", "RemoteCheckpoint", "closest_families", "remote_checkpoint", "write_remote"]

TEMPLATES = Path(__file__).resolve().parents[1] / "data" / "remote"
"""The modeling and configuration files every remote-code export carries, as they are."""
TOLERANCE = 1e-5
"""How far a program's outputs may stray from the model's (fp32) before the export is refused."""
REMOTE_CODE = "remote code"
"""What a remote-code export is, where a family's name would be (``Conversion.family``)."""
CHECK_LENGTH = 128
"""The longest sequence a program is checked on (its ``max_len``, up to this)."""
PREFIX = "zoo."
"""The weights' names in ``model.safetensors``: the remote model's ``zoo`` module holds zoo's parameters."""

HEADS: dict[tuple[str, str], tuple[str, str]] = {
    ("decoder", "lm"): ("ZooForCausalLM", "AutoModelForCausalLM"),
    ("encoder", "mlm"): ("ZooForMaskedLM", "AutoModelForMaskedLM"),
    ("encoder", "classification"): ("ZooForSequenceClassification", "AutoModelForSequenceClassification"),
    ("encoder", "token_classification"): ("ZooForTokenClassification", "AutoModelForTokenClassification"),
    ("encoder", "pooler"): ("ZooModel", "AutoModel"),
    ("encoder-decoder", "lm"): ("ZooForConditionalGeneration", "AutoModelForSeq2SeqLM"),
    ("vit", "classification"): ("ZooForImageClassification", "AutoModelForImageClassification"),
}
"""(architecture, head type) -> (the class in modeling_zoo.py, the Auto class that loads it)."""


@dataclass(frozen=True)
class RemoteCheckpoint:
    """What a remote-code export writes: config.json, the weights (HF names) and the programs."""

    config: dict[str, Any]
    state: dict[str, torch.Tensor]
    programs: dict[str, Any]
    """Program name -> ``torch.export.ExportedProgram``."""
    hf_class: str
    max_diff: float
    """The largest difference between the programs' outputs and the model's on the check inputs."""


@dataclass(frozen=True)
class _Entry:
    """One entry point: a function of (model, *inputs), its example and check inputs and dynamic dims."""

    call: Callable[..., torch.Tensor]
    example: tuple[torch.Tensor, ...]
    checks: list[tuple[torch.Tensor, ...]]
    dims: tuple[dict[int, Any] | None, ...]
    reference: Callable[..., torch.Tensor] | None = None
    """What the program is checked against, where ``call`` is not the model's own forward."""


class _Program(nn.Module):
    """The exported function: weights (a dict, zoo's names) and inputs -> outputs. The model is held outside the
    module tree, so ``torch.export`` lifts none of its parameters: they arrive as inputs."""

    def __init__(self, model: nn.Module, call: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.__dict__["holder"] = _Holder(model)
        self.__dict__["call"] = call

    def forward(self, weights: dict[str, torch.Tensor], *inputs: torch.Tensor) -> torch.Tensor:
        named = {f"model.{n}": w for n, w in weights.items()}
        return torch.func.functional_call(self.holder, named, inputs, {"call": self.call}, tie_weights=True)


class _Holder(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *inputs: torch.Tensor, call: Callable[..., torch.Tensor]) -> torch.Tensor:
        return call(self.model, *inputs)


def _decoder(model: nn.Module, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """``DecoderModel.forward`` without its loss: the embedding, the stack and the head, every position. (The
    forward slices the logits for a loss it is not asked for, ``logits[:, :-1]``, and that slice would make
    torch.export exclude a sequence of two; the program is checked against the forward itself.)"""
    from zoo.architectures import build_mask

    mask_4d = build_mask(ids.shape[1], mask, causal=True, device=ids.device)
    hidden = model.run(model.embedding(ids), positions=positions, mask=mask_4d)
    return model.head(hidden, mask=mask)


def _decoder_forward(model: nn.Module, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    return model(ids, attention_mask=mask, positions=positions).logits


def _encoder(model: nn.Module, ids: torch.Tensor, mask: torch.Tensor, *types: torch.Tensor) -> torch.Tensor:
    return model(ids, attention_mask=mask, token_type_ids=types[0] if types else None).logits


def _encode(model: nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return model.encode(ids, mask)


def _decode(
    model: nn.Module, ids: torch.Tensor, hidden: torch.Tensor, mask: torch.Tensor, decoder_mask: torch.Tensor
) -> torch.Tensor:
    return model(
        decoder_input_ids=ids, attention_mask=mask, decoder_attention_mask=decoder_mask, encoder_hidden=hidden
    ).logits


def _vit(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    return model(images).logits


def _tokens(recipe: Any, batch: int, length: int, *, seed: int, pad_first: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ids (batch, length) and a mask whose first row is left-padded (or right-padded) by two."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, recipe.vocab_size, (batch, length), generator=generator)
    mask = torch.ones(batch, length, dtype=torch.long)
    if length > 2:
        mask[0, :2] = 0 if pad_first else 1
        mask[0, -2:] = 1 if pad_first else 0
    return ids, mask


def _positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.cumsum(dim=1) - 1).clamp(min=0)


def _entries(model: nn.Module, recipe: Any) -> dict[str, _Entry]:
    """The programs of this architecture, with their inputs to trace and to check on."""
    from torch.export import Dim

    batch = Dim("batch", min=1, max=1024)
    length = max(2, min(7, recipe.max_len))
    seq = Dim("seq", min=1, max=recipe.max_len)
    shapes = [(2, max(1, min(5, recipe.max_len))), (1, 1), (3, min(CHECK_LENGTH, recipe.max_len))]
    if recipe.architecture == "vit":
        side, channels = recipe.image_size, recipe.num_channels
        images = [torch.randn(n, channels, side, side, generator=torch.Generator().manual_seed(n)) for n in (3, 2, 1)]
        dtype = next(model.parameters()).dtype
        return {"forward": _Entry(_vit, (images[0].to(dtype),), [(i.to(dtype),) for i in images[1:]], ({0: batch},))}
    if recipe.architecture == "decoder":

        def inputs(n: int, length: int, seed: int) -> tuple[torch.Tensor, ...]:
            ids, mask = _tokens(recipe, n, length, seed=seed, pad_first=True)
            return ids, mask, _positions(mask)

        checks = [inputs(n, length, seed) for seed, (n, length) in enumerate(shapes, 1)]
        dims = ({0: batch, 1: seq},) * 3
        return {"forward": _Entry(_decoder, inputs(3, length, 0), checks, dims, reference=_decoder_forward)}
    if recipe.architecture == "encoder":
        types = bool(recipe.type_vocab_size)

        def inputs(n: int, length: int, seed: int) -> tuple[torch.Tensor, ...]:
            ids, mask = _tokens(recipe, n, length, seed=seed, pad_first=False)
            return (ids, mask, ids % recipe.type_vocab_size)[: 3 if types else 2]

        checks = [inputs(n, length, seed) for seed, (n, length) in enumerate(shapes, 1)]
        dims = ({0: batch, 1: seq},) * (3 if types else 2)
        return {"forward": _Entry(_encoder, inputs(3, length, 0), checks, dims)}
    target = Dim("target", min=1, max=recipe.max_len)
    source = [_tokens(recipe, n, length, seed=seed, pad_first=False) for seed, (n, length) in enumerate(shapes)]
    encoded = [(ids, mask) for ids, mask in source]
    with torch.no_grad():
        hidden = [model.encode(ids, mask) for ids, mask in encoded]

    def decode_inputs(i: int, length: int) -> tuple[torch.Tensor, ...]:
        ids, decoder_mask = _tokens(recipe, encoded[i][0].shape[0], length, seed=10 + i, pad_first=False)
        return ids, hidden[i], encoded[i][1], decoder_mask

    main = _tokens(recipe, 3, length, seed=0, pad_first=False)
    with torch.no_grad():
        main_hidden = model.encode(*main)
    target_ids, target_mask = _tokens(recipe, 3, max(2, length - 2), seed=20, pad_first=False)  # its own length
    decode_example = (target_ids, main_hidden, main[1], target_mask)
    return {
        "encode": _Entry(_encode, main, encoded, ({0: batch, 1: seq},) * 2),
        "decode": _Entry(
            _decode,
            decode_example,
            [decode_inputs(i, n) for i, n in enumerate((3, 1, 2))],
            ({0: batch, 1: target}, {0: batch, 1: seq}, {0: batch, 1: seq}, {0: batch, 1: target}),
        ),
    }


def _export(model: nn.Module, weights: dict[str, torch.Tensor], entry: _Entry) -> Any:
    """``torch.export`` of one entry point, the weights as its first input (no dynamic dims)."""
    program = _Program(model, entry.call)
    dims = ({name: None for name in weights}, tuple(entry.dims))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MoE layers keep their balancing loss as an attribute while tracing
        return torch.export.export(program, (weights, *entry.example), dynamic_shapes=dims, strict=False)


def _difference(model: nn.Module, weights: dict[str, torch.Tensor], entry: _Entry, exported: Any) -> float:
    """The largest difference between the program's outputs and the model's, over the entry's check inputs."""
    module, worst = exported.module(), 0.0
    with torch.no_grad():
        for inputs in entry.checks:
            expected, got = (entry.reference or entry.call)(model, *inputs), module(weights, *inputs)
            if expected.shape != got.shape:
                return float("inf")
            worst = max(worst, (expected.float() - got.float()).abs().max().item())
    return worst


def _stacks(model: nn.Module, recipe: Any) -> list[tuple[str, nn.Module]]:
    if recipe.architecture == "encoder-decoder":
        return [("encoder", model.encoder), ("decoder", model.decoder)]
    return [("decoder" if recipe.architecture == "decoder" else "encoder", model)]


def _traces(module: nn.Module, call: Callable[..., torch.Tensor], width: int, causal: bool) -> bool:
    """Whether ``call(module, x, mask, positions)`` exports over a dynamic batch and sequence length."""
    from torch.export import Dim

    from zoo.architectures import build_mask

    def probe(module: nn.Module, x: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return call(module, x, build_mask(x.shape[1], mask, causal=causal, device=x.device), positions)

    x, mask = torch.randn(3, 7, width), torch.ones(3, 7, dtype=torch.long)
    dims = ({0: Dim("batch", min=1, max=1024), 1: Dim("seq", min=1, max=4096)},) * 3
    try:
        _export(module, {}, _Entry(probe, (x, mask, _positions(mask)), [], dims))
    except Exception:  # noqa: BLE001 - any failure to trace names this component
        return False
    return True


def _culprit(model: nn.Module, recipe: Any) -> str | None:
    """The first component (a block's attention or ffn) that does not trace alone, in words; None if all do."""
    from zoo.plugins import get_registry

    for stack_name, stack in _stacks(model, recipe):
        plan = recipe.layer_plan(stack_name)
        causal = stack_name == "decoder"
        for i, block in enumerate(stack.blocks):
            parts = {
                "attention": lambda m, x, mask, pos, s=stack: m(x, mask=mask, positions=pos, pos=s.positional),
                "ffn": lambda m, x, mask, pos: m(x),
            }
            for kind, call in parts.items():
                module = getattr(block, kind, None)
                if module is None or _traces(module, call, recipe.d_model, causal):
                    continue
                name = plan[i][kind][0].type
                plugin = get_registry().get(kind, name).plugin
                source = plugin if plugin.startswith("zoo.") else f"plugin {plugin}"  # built in: zoo's module
                return f"{kind} '{name}' ({source}; {stack_name} layer {i})"
    return None


def _refusal(model: nn.Module, recipe: Any, program: str, exc: Exception) -> str:
    """Why the program does not export: the component that does not trace alone, else torch's first line."""
    culprit = _culprit(model, recipe)
    if culprit is None:
        reason = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        culprit = f"its {program} program ({reason})"
    return (
        f"recipe '{recipe.name}': {culprit} cannot be exported for trust_remote_code: torch.export cannot trace it "
        "over a dynamic batch and sequence length; export a recipe without it, or one that fits a Hugging Face family"
    )


def remote_checkpoint(model: nn.Module) -> RemoteCheckpoint:
    """config.json, the weights and the ``torch.export`` programs of a zoo model's remote-code export.

    Raises:
        HFExportError: the architecture and head have no remote-code class, a component does not trace with
            ``torch.export`` (named), or a program's outputs differ from the model's by more than ``TOLERANCE``.
    """
    recipe = model.recipe
    head = recipe.head.type
    if (recipe.architecture, head) not in HEADS:
        kinds = ", ".join(f"{a} with head '{h}'" for a, h in HEADS)
        raise HFExportError(
            f"recipe '{recipe.name}': a {recipe.architecture} with head '{head}' has no remote-code export "
            f"(it exports {kinds})"
        )
    hf_class, auto = HEADS[recipe.architecture, head]
    was_training = model.training
    model.eval()
    try:
        weights = {n: p.detach() for n, p in sorted(model.named_parameters())}  # config.json's order
        programs, worst = {}, 0.0
        for name, entry in _entries(model, recipe).items():
            try:
                programs[name] = _export(model, weights, entry)
            except Exception as exc:  # noqa: BLE001 - torch.export raises many kinds; the culprit is named below
                raise HFExportError(_refusal(model, recipe, name, exc)) from None
            lifted = list(programs[name].state_dict)
            if lifted:
                raise HFExportError(f"recipe '{recipe.name}': the {name} program holds weights {', '.join(lifted)}")
            worst = max(worst, _difference(model, weights, entry, programs[name]))
    finally:
        model.train(was_training)
    if not worst <= TOLERANCE:
        raise HFExportError(
            f"recipe '{recipe.name}': the exported program's outputs differ from the model's by {worst:.3g} "
            f"(more than {TOLERANCE:g}); it cannot be exported for trust_remote_code"
        )
    config = {
        "model_type": "zoo",
        "architectures": [hf_class],
        "auto_map": {"AutoConfig": "configuration_zoo.ZooConfig", auto: f"modeling_zoo.{hf_class}"},
        "zoo_kind": f"{recipe.architecture}/{head}",
        "zoo_parameters": {n: [list(w.shape), str(w.dtype).removeprefix("torch.")] for n, w in weights.items()},
        "zoo_programs": list(programs),
        "zoo_inputs": _input_names(recipe),
        "zoo_recipe": recipe.to_dict() if hasattr(recipe, "to_dict") else {"name": recipe.name},
        "dtype": dtype_name(weights),
        "zoo_dtype": dtype_name(weights),
        **_model_config(model, recipe),
    }
    state = {PREFIX + n: w for n, w in weights.items()}
    return RemoteCheckpoint(config, state, programs, hf_class, worst)


def _input_names(recipe: Any) -> list[str]:
    if recipe.architecture == "vit":
        return ["pixel_values"]
    if recipe.architecture == "encoder" and recipe.type_vocab_size:
        return ["input_ids", "attention_mask", "token_type_ids"]
    return ["input_ids", "attention_mask"]


def _model_config(model: nn.Module, recipe: Any) -> dict[str, Any]:
    """The config.json keys transformers reads: sizes, labels, the encoder-decoder's start token."""
    config: dict[str, Any] = {"hidden_size": recipe.d_model, "num_hidden_layers": recipe.num_layers}
    if recipe.vocab_size is not None:
        config["vocab_size"] = recipe.vocab_size
    if recipe.max_len is not None:
        config["max_position_embeddings"] = recipe.max_len
    if recipe.pad_token_id is not None:
        config["pad_token_id"] = recipe.pad_token_id
    if recipe.architecture == "encoder-decoder":
        config.update(is_encoder_decoder=True, decoder_start_token_id=model.decoder_start_token_id)
        config["pad_token_id"] = model.pad_token_id
    if recipe.head.type in ("classification", "token_classification"):
        classes = recipe.num_classes
        config["id2label"] = {str(i): f"LABEL_{i}" for i in range(classes)}
        config["label2id"] = {f"LABEL_{i}": i for i in range(classes)}
    if recipe.architecture == "vit":
        config.update(image_size=recipe.image_size, num_channels=recipe.num_channels)
    return config


def write_remote(directory: str | Path, checkpoint: RemoteCheckpoint) -> Path:
    """Write config.json, model.safetensors, the programs (``<name>.pt2``) and the modeling files."""
    directory = write_checkpoint(directory, checkpoint.config, checkpoint.state)
    for name, program in checkpoint.programs.items():
        buffer = io.BytesIO()
        program.example_inputs = None  # they hold the weights: the folder keeps them once, in model.safetensors
        torch.export.save(program, buffer)
        data = buffer.getvalue()
        atomic_write(directory / f"{name}.pt2", lambda tmp, data=data: tmp.write_bytes(data))
    for template in sorted(TEMPLATES.glob("*.py")):
        atomic_write(directory / template.name, lambda tmp, template=template: shutil.copyfile(template, tmp))
    return directory


def closest_families(name: str, misfits: dict[str, list[str]]) -> str:
    """One line: the recipe fits no family, and the three of its architecture (else any) that came closest, each
    with its count of misfits and the first of them."""
    same = {f: p for f, p in misfits.items() if not any(x.startswith("architecture is") for x in p)}
    ranked = sorted((same or misfits).items(), key=lambda item: len(item[1]))[:3]
    closest = "; ".join(
        f"{family} ({len(problems)} misfit{'s' * (len(problems) > 1)}: {problems[0]})" for family, problems in ranked
    )
    return f"recipe '{name}' fits no Hugging Face family, so it is written as remote code (closest: {closest})"
