"""The torchinfo layer table of a built model, fed real inputs of its family's shape.

The inputs follow the model's ``forward`` signature, the convention every zoo architecture keeps: ``images``
(N, C, H, W) for vision models, ``input_ids`` and ``decoder_input_ids`` (N, L) for encoder-decoders, and
``input_ids`` (N, L) otherwise. When the forward pass cannot run (a mixture-of-experts FFN routes tokens by
their values, which meta tensors do not have), the table falls back to the module tree without shapes (torchinfo
then counts each module's parameters statically), and ``LayerTable.note`` says why.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import torch
from torch import nn

from zoo.recipe import Recipe

__all__ = ["LayerTable", "example_inputs", "input_family", "layer_table", "routed_ffn"]


@dataclass(frozen=True)
class LayerTable:
    text: str
    """torchinfo's module tree, with each module's output shape where a forward pass ran: its header and rows
    only. Its per-module parameters and its totals (parameters, mult-adds, sizes) are left out: they follow
    torchinfo's conventions (a tied tensor once per module holding it, mult-adds once per sequence), and zoo's
    own counts, FLOPs and memory say the same exactly. The figures stay in the fields below."""
    total_params: int
    """torchinfo's own total (a tied tensor counted once per module holding it)."""
    forward: str
    """Where the forward pass ran: ``meta``, ``cpu``, or ``none`` (parameters only)."""
    note: str | None = None
    repeated: list[str] = field(default_factory=list)
    """Modules holding parameters that the forward pass called more than once (torchinfo counts each call)."""
    mult_adds: int | None = None
    """torchinfo's "Total mult-adds": batch x the parameters of each leaf module (None without a forward pass)."""
    pass_bytes: int | None = None
    """torchinfo's "Forward/backward pass size": twice the outputs of leaf modules with parameters."""
    param_bytes: int | None = None
    """torchinfo's "Params size": the parameters' bytes, a tied tensor once per module holding it."""


def input_family(model: nn.Module) -> str | None:
    """``text+images`` (a dual-encoder), ``images``, ``features+target`` (an encoder that hears audio),
    ``source+target``, ``tokens`` or None, from the names ``model.forward`` takes."""
    names = inspect.signature(model.forward).parameters
    if "images" in names and "input_ids" in names:
        return "text+images"
    if "images" in names:
        return "images"
    if "decoder_input_ids" in names and getattr(model, "encodes_features", False):
        return "features+target"
    if "decoder_input_ids" in names:
        return "source+target"
    if "input_ids" in names:
        return "tokens"
    return None


def example_inputs(model: nn.Module, recipe: Recipe, *, batch: int, seq_len: int) -> dict[str, torch.Tensor] | None:
    """Inputs of the model's family on its device: random token ids or images (seeded), or None if unknown."""
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(0)
    family = input_family(model)

    meta = device.type == "meta"  # shapes only: nothing is drawn or allocated, however large the batch

    def ids() -> torch.Tensor:
        if meta:
            return torch.empty((batch, seq_len), dtype=torch.long, device=device)
        return torch.randint(0, recipe.vocab_size or 1, (batch, seq_len), generator=generator).to(device)

    def images(r: Recipe) -> torch.Tensor:
        size = (batch, r.num_channels, r.image_size, r.image_size)
        dtype = next(model.parameters()).dtype
        if meta:
            return torch.empty(size, dtype=dtype, device=device)
        return torch.randn(size, generator=generator).to(device=device, dtype=dtype)

    if family == "images":
        return {"images": images(recipe)}
    if family == "text+images":  # a dual-encoder: as many texts as images, each tower its own inputs
        return {"input_ids": ids(), "images": images(recipe.vision)}
    if family == "features+target":  # an encoder that hears audio: its whole window of log-mel frames
        audio = recipe.encoder_embedding
        size, dtype = (batch, audio.num_mel_bins, 2 * audio.frames), next(model.parameters()).dtype
        features = torch.empty(size, dtype=dtype, device=device) if meta else torch.randn(size, generator=generator)
        return {"input_ids": features.to(device=device, dtype=dtype), "decoder_input_ids": ids()}
    if family == "source+target":
        return {"input_ids": ids(), "decoder_input_ids": ids()}
    if family == "tokens":
        return {"input_ids": ids()}
    return None


def routed_ffn(model: nn.Module) -> str | None:
    """The path of the first mixture-of-experts FFN (one that records an ``aux_loss``), or None.

    Its experts run only on the tokens routed to them, so its shapes depend on values (``torch.nonzero``).
    """
    for path, provenance in getattr(model, "zoo_components", {}).items():
        if provenance.kind == "ffn" and hasattr(model.get_submodule(path), "aux_loss"):
            return path
    return None


def _repeated(model: nn.Module, stats) -> list[str]:
    names = {id(m): name for name, m in model.named_modules()}
    seen = {
        names.get(info.layer_id, info.class_name)
        for info in stats.summary_list
        if info.is_recursive and any(True for _ in info.module.parameters(recurse=False))
    }
    return sorted(seen)


def _first_line(exc: BaseException) -> str:
    cause = exc.__cause__ or exc
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[0] if text else ''}"


def layer_table(
    model: nn.Module, recipe: Recipe, *, batch: int, seq_len: int, depth: int = 1, width: int | None = None
) -> LayerTable:
    """torchinfo's summary of ``model`` with a forward pass on real-shaped inputs where one can run; ``width``
    (columns) narrows torchinfo's two columns so that the table fits (default: torchinfo's own width)."""
    import torchinfo

    device = next(model.parameters()).device
    inputs = example_inputs(model, recipe, batch=batch, seq_len=seq_len)
    note = None
    if inputs is None:
        note = "torchinfo ran without a forward pass: zoo does not know the inputs of this model's forward"
    elif device.type == "meta" and (routed := routed_ffn(model)) is not None:
        note = (
            f"torchinfo ran without a forward pass (no output shapes): the mixture-of-experts FFN "
            f"{routed} routes tokens by their values, which tensors on the meta device do not have"
        )
        inputs = None
    if inputs is not None:
        # Models return a ModelOutput dataclass, which torchinfo cannot size: hand it the logits instead.
        hook = model.register_forward_hook(lambda module, args, output: getattr(output, "logits", output))
        try:
            stats = torchinfo.summary(model, input_data=inputs, depth=depth, device=device, verbose=0)
            return LayerTable(
                _tree(stats, width, shapes=True),
                stats.total_params,
                device.type,
                repeated=_repeated(model, stats),
                mult_adds=stats.total_mult_adds,
                pass_bytes=stats.total_output_bytes,
                param_bytes=stats.total_param_bytes,
            )
        except Exception as exc:  # noqa: BLE001 - any failure of the forward pass falls back to the static table
            failed = f"the forward pass on {device.type} failed ({_first_line(exc)})"
            note = f"torchinfo ran without a forward pass: {failed}"
        finally:
            hook.remove()
    many = sum(1 for _ in model.modules()) > STATIC_MODULE_LIMIT
    stats = torchinfo.summary(_cut(model, depth) if many else model, depth=depth, device=device, verbose=0)
    return LayerTable(_tree(stats, width, shapes=False), stats.total_params, "none", note)


STATIC_MODULE_LIMIT = 5_000
"""Above this many modules the parameters-only table is drawn from a stand-in cut at the table's depth (``_cut``):
torchinfo visits every module, in time quadratic in their number (DeepSeek-V3's 90,000 would take minutes)."""

_STAND_INS: dict[str, type[nn.Module]] = {}


def _cut(module: nn.Module, depth: int) -> nn.Module:
    """A stand-in of ``module`` for torchinfo's parameters-only table: modules of the same class names and child
    names down to ``depth``; there, each holds its subtree's parameters as meta tensors of as many elements
    (trainable and frozen apart), so every row and total of the table is the same."""
    cls = _STAND_INS.setdefault(type(module).__name__, type(type(module).__name__, (nn.Module,), {}))
    stand_in = cls()
    if depth <= 0:
        params = list(module.parameters())
        for name, trainable in (("trainable", True), ("frozen", False)):
            n = sum(p.numel() for p in params if p.requires_grad == trainable)
            if n:
                stand_in.register_parameter(name, nn.Parameter(torch.empty(n, device="meta"), trainable))
        return stand_in
    for name, p in module.named_parameters(recurse=False):
        stand_in.register_parameter(name, nn.Parameter(torch.empty(p.shape, device="meta"), p.requires_grad))
    for name, child in module.named_children():
        stand_in.add_module(name, _cut(child, depth - 1))
    return stand_in


def _tree(stats, width: int | None, *, shapes: bool) -> str:
    """torchinfo's table as text, reduced to its header and one row per module (with the output shape when
    ``shapes``), between torchinfo's ``=`` rules as wide as its widest line. With ``width`` (columns), the
    layer-name column is as wide as the longest name among the rows shown, so that the table fits where its
    contents allow."""
    from torchinfo import ColumnSettings

    f = stats.formatting
    f.col_names = (ColumnSettings.OUTPUT_SIZE,) if shapes else ()
    if width is not None:
        shown = [i for i in stats.summary_list if i.depth <= f.max_depth]  # torchinfo sizes for every row
        longest = max(
            (len(i.get_layer_name(f.show_var_name, f.show_depth)) + i.depth * 5 + 1 for i in shown), default=0
        )
        f.layer_name_width = max(longest, min(-(-longest // 5) * 5, width - 24))
    header, rows = f.header_row(), f.layers_to_str(stats.summary_list, stats.total_params)
    rule = "=" * max(len(line) for line in (header + rows).splitlines())
    return f"{rule}\n{header}{rule}\n{rows}{rule}"
