"""What the hybrid families (Jamba, Bamba) share on export: a recipe fits when it is, layer by layer, the recipe
the family makes of its own config (the config written from the recipe, read back)."""

from __future__ import annotations

from typing import Any

__all__ = ["differences", "resolved"]

INIT_ONLY = ("dt_min", "dt_max", "dt_floor")
"""Mixer options that only set a fresh initialisation (no hybrid config keeps them): not part of the network."""

TOP = ("vocab_size", "d_model", "num_layers", "type_vocab_size", "embed_norm", "final_norm")


def resolved(config: Any, d_model: int) -> dict[str, Any]:
    """A component's options as a hybrid's config says them: a Mamba mixer's widths resolved (``time_step_rank:
    null`` is ceil(E / 16)), multi-head and multi-query attention as GQA with its head width, no init-only
    options."""
    data = config.model_dump()
    kind = data.get("type")
    if kind in ("mha", "mqa"):  # the same networks as GQA with H or 1 KV heads
        data.update(type="gqa", num_kv_heads=data["num_heads"] if kind == "mha" else 1)
    if kind in ("mha", "mqa", "gqa"):
        data["head_dim"] = config.head_dim_for(d_model)
    if kind == "mamba":
        inner, _, rank, _ = config.sizes(d_model)
        data.update(intermediate_size=inner, expand=None, time_step_rank=rank)
    for key in INIT_ONLY:
        data.pop(key, None)
    return data


def differences(recipe: Any, expected: Any, family: str, top: tuple[str, ...] = TOP) -> str | None:
    """The first way ``recipe`` differs from ``expected`` (the recipe ``family`` makes of its config), or None:
    the ``top`` fields, the stack's parts, then each layer's attention, norm and FFN."""
    for name in top:
        if getattr(recipe, name) != getattr(expected, name):
            return f"{name} is {getattr(recipe, name)!r}, {family}'s is {getattr(expected, name)!r}"
    for part in ("embedding", "positional", "norm", "head", "block"):
        ours, theirs = getattr(recipe, part), getattr(expected, part)
        if ours != theirs:
            return f"{part} is {ours.model_dump()}, {family}'s is {theirs.model_dump()}"
    for i, (ours, theirs) in enumerate(zip(recipe.layer_plan("decoder"), expected.layer_plan("decoder"), strict=True)):
        for kind in ("attention", "norm", "ffn"):
            a, b = resolved(ours[kind][0], recipe.d_model), resolved(theirs[kind][0], recipe.d_model)
            if a != b:
                if a["type"] != b["type"]:  # another component: its options would only add noise
                    a, b = {"type": a["type"]}, {"type": b["type"]}
                diff = ", ".join(
                    f"{k}={a.get(k)!r} ({family}: {b.get(k)!r})"
                    for k in sorted(set(a) | set(b))
                    if a.get(k) != b.get(k)
                )
                return f"layer {i}'s {kind} ({ours[kind][1]}): {diff}"
    return None
