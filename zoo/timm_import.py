"""Vision models from timm: ``zoo import timm:vit_small_patch16_224`` reads timm's ``VisionTransformer`` as a vit.

timm builds the model (``timm.create_model``): with its pretrained weights where they are already in the local
cache or given as a checkpoint file (``--weights``), else with random weights; nothing is downloaded. zoo then
reads the model's modules one by one and writes the recipe they make, refusing by name whatever zoo's vit does
not compute exactly (a pooling other than [CLS], register tokens, q/k norms, ...), and copies the weights:

    patch_embed.proj          -> embedding.proj             cls_token -> embedding.cls_token
    pos_embed (1, 1+N, E)     -> positional.embedding (1+N, E)   norm_pre -> embed_norm
    blocks.i.norm1, norm2     -> blocks.i.attention_norm, ffn_norm
    blocks.i.attn.qkv (3E, E) -> blocks.i.attention.q_proj, k_proj, v_proj     attn.proj -> attention.o_proj
    blocks.i.mlp.fc1, fc2     -> blocks.i.ffn.up_proj, down_proj    ls1, ls2 -> attention_scale, ffn_scale
    norm -> final_norm        head -> head.proj

timm is optional: this module imports it only when called.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from zoo.errors import HFImportError

PREFIX = "timm:"


def _timm() -> Any:
    try:
        import timm
    except ImportError as exc:
        raise HFImportError(f"timm:NAME needs timm ({exc}): pip install timm") from exc
    return timm


def _type(module: Any) -> str:
    return type(module).__name__


def _square(value: Any, what: str) -> int:
    a, b = (value, value) if isinstance(value, int) else tuple(value)
    if a != b:
        raise HFImportError(f"{what} {a} x {b} is not supported: zoo's vit takes square images and patches")
    return int(a)


def _refuse(problems: list[str], name: str) -> None:
    if problems:
        raise HFImportError([f"{name}: {p}" for p in problems])


def _activation(act: Any) -> str | None:
    if _type(act) == "GELU":
        return {"none": "gelu", "tanh": "gelu_tanh"}.get(act.approximate)
    return {"QuickGELU": "quick_gelu", "ReLU": "relu", "SiLU": "silu"}.get(_type(act))


def timm_recipe(model: nn.Module, name: str) -> dict[str, Any]:
    """The zoo recipe of a timm ``VisionTransformer`` (``model``, made by ``timm.create_model(name)``).

    Raises:
        HFImportError: the model holds a part zoo's vit does not compute exactly, each named.
    """
    if _type(model) != "VisionTransformer":
        raise HFImportError(f"{name}: timm's {_type(model)} is not supported: zoo imports timm's VisionTransformer")
    problems = []
    patch = model.patch_embed
    if _type(patch) != "PatchEmbed" or _type(patch.norm) != "Identity" or not patch.flatten:
        problems.append("a patch embedding other than a plain Conv2d (PatchEmbed without norm)")
    for attr, why in (
        ("reg_token", "register tokens (placed before the positions are added)"),
        ("attn_pool", "attention pooling (global_pool 'map')"),
    ):
        if getattr(model, attr, None) is not None:
            problems.append(f"{why} are not supported")
    if model.cls_token is None or model.pos_embed is None:
        problems.append("no [CLS] token or no position table: zoo's vit adds learned positions to [CLS] and patches")
    if getattr(model, "no_embed_class", False):
        problems.append("no_embed_class (positions for the patches only, DeiT-3) is not supported")
    if getattr(model, "dynamic_img_size", False):
        problems.append("dynamic_img_size (positions resized to each image) is not supported")
    if model.global_pool != "token":
        problems.append(f"global_pool {model.global_pool!r} is not supported: zoo's vit classifies from [CLS]")
    if _type(model.fc_norm) != "Identity" or _type(model.norm) != "LayerNorm":
        problems.append("a norm after pooling (fc_norm) in place of the final norm is not supported")
    if _type(model.head) != "Linear":
        problems.append("num_classes 0 (a feature extractor, no classifier) is not supported: give num_classes")
    if _type(model.norm_pre) not in ("Identity", "LayerNorm"):
        problems.append(f"norm_pre {_type(model.norm_pre)} is not supported")
    block = model.blocks[0]
    attn, mlp = getattr(block, "attn", None), getattr(block, "mlp", None)
    if _type(block) != "Block" or _type(attn) != "Attention" or _type(mlp) != "Mlp":
        problems.append(f"blocks of {_type(block)} are not supported: zoo imports timm's pre-norm Block")
        _refuse(problems, name)
    for part in ("q_norm", "k_norm", "norm"):
        if _type(getattr(attn, part, nn.Identity())) != "Identity":
            problems.append(f"attention's {part} is not supported")
    if _type(mlp.norm) != "Identity":
        problems.append("a norm inside the MLP (scale_mlp_norm) is not supported")
    activation = _activation(mlp.act)
    if activation is None:
        problems.append(f"the MLP's activation {mlp.act} is not supported")
    if _type(block.norm1) != "LayerNorm":
        problems.append(f"{_type(block.norm1)} norms are not supported: zoo imports LayerNorm")
    scale = _type(block.ls1) == "LayerScale"
    if mlp.fc1.bias is None:
        problems.append("an MLP without biases (proj_bias false) is not supported")
    _refuse(problems, name)
    has_bias = attn.qkv.bias is not None
    recipe: dict[str, Any] = {
        "name": name.replace("/", "-"),
        "description": f"timm's {name}",
        "architecture": "vit",
        "image_size": _square(patch.img_size, "image size"),
        "patch_size": _square(patch.patch_size, "patch size"),
        "num_channels": patch.proj.in_channels,
        "num_classes": model.head.out_features,
        "d_model": model.embed_dim,
        "num_layers": len(model.blocks),
        "block": {"norm_position": "pre", **({"layer_scale": 1.0} if scale else {})},
        "embed_norm": _type(model.norm_pre) == "LayerNorm",
        "final_norm": True,
        "embedding": {"type": "patch", "bias": patch.proj.bias is not None},
        "positional": {"type": "learned"},
        "attention": {
            "type": "mha",
            "num_heads": attn.num_heads,
            **{f"{p}_bias": has_bias for p in "qkv"},
            "o_bias": attn.proj.bias is not None,
        },
        "norm": {"type": "layernorm", "eps": block.norm1.eps},
        "ffn": {
            "type": "mlp",
            "hidden": mlp.fc1.out_features,
            "activation": activation,
            "bias": mlp.fc1.bias is not None,
        },
        "head": {"type": "classification", "pool": "cls"},
    }
    return recipe


def timm_weights(model: nn.Module) -> dict[str, torch.Tensor]:
    """The timm model's tensors under zoo's names (the fused qkv split into q, k and v)."""
    state = model.state_dict()
    out = {
        "embedding.proj.weight": state["patch_embed.proj.weight"],
        "embedding.cls_token": state["cls_token"],
        "positional.embedding.weight": state["pos_embed"][0],
        "final_norm.weight": state["norm.weight"],
        "final_norm.bias": state["norm.bias"],
        "head.proj.weight": state["head.weight"],
        "head.proj.bias": state["head.bias"],
    }
    renames = {"norm1": "attention_norm", "norm2": "ffn_norm", "attn.proj": "attention.o_proj"}
    renames |= {"mlp.fc1": "ffn.up_proj", "mlp.fc2": "ffn.down_proj"}
    for key, tensor in state.items():
        if key.startswith("patch_embed.proj.bias"):
            out["embedding.proj.bias"] = tensor
        elif key.startswith("norm_pre."):
            out[key.replace("norm_pre.", "embed_norm.")] = tensor
        elif key.startswith("blocks."):
            _, i, rest = key.split(".", 2)
            module, _, kind = rest.rpartition(".")
            if module == "attn.qkv":
                for part, piece in zip("qkv", tensor.chunk(3, dim=0), strict=True):
                    out[f"blocks.{i}.attention.{part}_proj.{kind}"] = piece
            elif module in ("ls1", "ls2"):
                out[f"blocks.{i}.{'attention' if module == 'ls1' else 'ffn'}_scale"] = tensor
            else:
                out[f"blocks.{i}.{renames[module]}.{kind}"] = tensor
    return out


def timm_model(name: str, weights: str | Path | None = None) -> tuple[nn.Module, str]:
    """timm's model ``name`` and where its weights came from: ``weights`` (a timm checkpoint file), else its
    pretrained weights where the local Hugging Face cache holds them, else random (nothing is downloaded).

    Raises:
        HFImportError: timm is not installed, ``name`` is not a timm model, ``weights`` is not a file.
    """
    timm = _timm()
    if name not in timm.list_models():
        close = timm.list_models(f"*{name.split('.')[0]}*")[:5]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise HFImportError(f"timm has no model {name!r}{hint}")
    if weights is not None:
        path = Path(weights)
        if not path.is_file():
            raise HFImportError(f"--weights {path}: no such file (a timm checkpoint: .safetensors or .pth)")
        overlay = {"file": str(path)}
        return timm.create_model(name, pretrained=True, pretrained_cfg_overlay=overlay).eval(), f"weights from {path}"
    cached = _cached_weights(timm, name)
    if cached is not None:
        overlay = {"file": str(cached)}
        model = timm.create_model(name, pretrained=True, pretrained_cfg_overlay=overlay).eval()
        return model, f"pretrained weights from the local cache ({cached})"
    return timm.create_model(name, pretrained=False).eval(), "random weights (no pretrained weights in the cache)"


def _cached_weights(timm: Any, name: str) -> Path | None:
    """The file of ``name``'s pretrained weights in the local Hugging Face cache, or None."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    config = timm.models.get_pretrained_cfg(name)
    repo = getattr(config, "hf_hub_id", None) if config is not None else None
    if not repo:
        return None
    for filename in ("model.safetensors", "pytorch_model.bin"):
        found = try_to_load_from_cache(repo, filename)
        if isinstance(found, str):
            return Path(found)
    return None


def from_timm(name: str, weights: str | Path | None = None) -> tuple[nn.Module, str]:
    """A zoo vit equal to timm's model ``name`` (``timm_model``), and where its weights came from."""
    source, said = timm_model(name, weights)
    return convert(source, name), said


def convert(source: nn.Module, name: str) -> nn.Module:
    """The zoo vit of a timm ``VisionTransformer`` (``source``, timm's model ``name``), holding its weights.

    Raises:
        HFImportError: a part zoo's vit does not compute exactly (``timm_recipe``).
    """
    from zoo.builder import build

    recipe = timm_recipe(source, name)
    tensors = timm_weights(source)
    model = build(recipe)
    expected = set(model.state_dict())
    if set(tensors) != expected:
        missing, extra = sorted(expected - set(tensors)), sorted(set(tensors) - expected)
        raise HFImportError(f"{name}: tensors zoo did not map: missing {missing[:5]}, unused {extra[:5]}")
    model.load_state_dict(tensors)
    return model.eval()


def import_timm(
    source: str, out: str | Path, *, weights: str | Path | None = None, force: bool = False
) -> tuple[Path, int, str]:
    """``zoo import timm:NAME``: timm's model as a zoo folder (recipe.yaml + weights); returns the folder, the
    parameter count and where the weights came from."""
    from zoo.builder import count_parameters
    from zoo.checkpoint import holds_recipe, save
    from zoo.files import destination

    name = source.removeprefix(PREFIX)
    model, said = from_timm(name, weights)
    with destination(out, what="the imported model", force=force, same=holds_recipe(model.recipe)):
        directory = save(model, out)
    return Path(directory), count_parameters(model), said
