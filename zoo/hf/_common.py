"""What hand-written and table families share: fused qkv / gate_up projections whose split depends on the head
counts (GPT-NeoX's line, Phi-3, GLM, ModernBERT), a parent's weight rules under a child's names (``renamed``), and a
requirement that a component sets no option its family's config cannot say (for a family that states its
requirements by hand; a table generates it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import torch

from .mapping import Requirement, Rule, Transform

# ---------------------------------------------------------------------------------------------- fused weights


def _heads(recipe: Any) -> tuple[int, int, int]:
    attention = recipe.attention
    return attention.num_heads, attention.num_kv_heads, attention.head_dim_for(recipe.d_model)


def stacked_qkv(recipe: Any) -> Transform:
    """A fused qkv (weight or bias) that holds all queries, then all keys, then all values (Phi-3):
    ``[q (H*D) | k (Hkv*D) | v (Hkv*D)]`` along its first dim."""
    heads, kv_heads, head_dim = _heads(recipe)
    sizes = [heads * head_dim, kv_heads * head_dim, kv_heads * head_dim]
    return Transform(
        f"split q|k|v as {sizes[0]}|{sizes[1]}|{sizes[2]}",
        lambda t: list(t[0].split(sizes, dim=0)),
        lambda t: [torch.cat(list(t), dim=0)],
    )


def grouped_qkv(recipe: Any) -> Transform:
    """A fused qkv (weight or bias) laid out per key/value head: for each of the Hkv groups, its H/Hkv query
    heads, its key head, its value head (``[Hkv, H/Hkv + 2, D]``). With Hkv = H this is GPT-NeoX's per-head
    ``[H, 3, D]``; with Hkv = 1 Falcon-7B's ``[q (H*D) | k (D) | v (D)]``; in between Falcon-40B's groups."""
    heads, kv_heads, head_dim = _heads(recipe)
    group = heads // kv_heads

    def to_zoo(t: list[torch.Tensor]) -> list[torch.Tensor]:
        fused = t[0].unflatten(0, (kv_heads, group + 2, head_dim))  # (Hkv, G + 2, D, ...)
        q, k, v = fused.split([group, 1, 1], dim=1)
        return [q.flatten(0, 2), k.flatten(0, 2), v.flatten(0, 2)]

    def to_hf(t: list[torch.Tensor]) -> list[torch.Tensor]:
        q, k, v = (x.unflatten(0, (kv_heads, -1, head_dim)) for x in t)  # (Hkv, G or 1, D, ...)
        return [torch.cat([q, k, v], dim=1).flatten(0, 2)]

    return Transform(f"split q|k|v per {kv_heads} key/value head(s) of {group} queries", to_zoo, to_hf)


SPLIT_GATE_UP = Transform("split gate|up", lambda t: list(t[0].chunk(2, dim=0)), lambda t: [torch.cat(list(t), dim=0)])
"""A fused ``gate_up_proj`` weight (2H, E): the gate's rows, then the up projection's (Phi-3)."""


# ---------------------------------------------------------------------------------------------- renamed rules


def rename(name: str, prefixes: Mapping[str, str | None]) -> str | None:
    """``name`` with the first of ``prefixes`` it starts with replaced by that prefix's value (None: None)."""
    for old, new in prefixes.items():
        if name.startswith(old):
            return None if new is None else new + name[len(old) :]
    return name


def renamed(
    rules: Iterable[Rule], hf: Mapping[str, str | None], zoo: Mapping[str, str] | None = None
) -> tuple[Rule, ...]:
    """A parent's weight ``rules`` under a child's names, in the parent's order: in each HF name the first prefix
    of ``hf`` it starts with becomes that prefix's value, in each zoo name the first of ``zoo``; a rule with an HF
    name whose prefix maps to None is left out. Transforms and conditions stay the parent's."""
    out = []
    for rule in rules:
        hf_names = [rename(name, hf) for name in rule.hf_names]
        if None in hf_names:
            continue
        zoo_names = [rename(name, zoo or {}) for name in rule.zoo_names]
        new_hf = hf_names[0] if isinstance(rule.hf, str) else tuple(hf_names)
        out.append(replace(rule, hf=new_hf, zoo=zoo_names[0] if isinstance(rule.zoo, str) else tuple(zoo_names)))
    return tuple(out)


# ---------------------------------------------------------------------------------------------- requirements


def defaults_except(section: str, *kept: str) -> Requirement:
    """A requirement (keyed ``"<section>.*"``, after the section's ``type``): every field of the recipe's
    ``section`` other than ``type`` and ``kept`` holds its default. What a family's config has no key for
    cannot be exported, including options a component gains later."""

    def check(recipe: Any) -> str | None:
        config = getattr(recipe, section)
        off = []
        for name, info in type(config).model_fields.items():
            if name in ("type", *kept) or info.is_required():
                continue
            default = info.get_default(call_default_factory=True)
            if getattr(config, name) != default:
                off.append(f"{section}.{name} is {getattr(config, name)!r}, needs {default!r}")
        return "; ".join(off) or None

    return check
