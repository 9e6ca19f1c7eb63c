"""``zoo draw`` tells the truth: every named recipe's figure description (the text ``describe`` gives a meta-device
build, no drawing) holds the recipe's own values, layer by layer: the rotary bases θ each layer applies, score
and logit soft-caps exactly where set, head widths, each mixer's own label, and the order of its kinds of block."""

from __future__ import annotations

import re
from typing import Any

import pytest

from zoo.builder import build
from zoo.draw import Stack, describe
from zoo.draw.describe import Pattern
from zoo.label import number
from zoo.recipe import load_recipe, named_recipes

NAMED = sorted(named_recipes())
THETA = re.compile(r"θ=([0-9.e+]+)")


def expected_theta(recipe: Any, attention: Any) -> float | None:
    """The base of the rotation this layer applies: its own rotary encoding's, else the stack's; None without."""
    rotary = getattr(attention, "rotary", None)
    positions = rotary if rotary is not None else recipe.positional
    if getattr(type(positions), "style", None) != "rotate":
        return None
    return getattr(positions, "theta", None)


def head_widths(recipe: Any, attention: Any) -> list[str]:
    """What the first line of an attention's box must say of its heads and their widths."""
    if attention.type == "mla":
        a = attention
        return [f"{a.num_heads} heads", f"qk {a.qk_nope_head_dim} + {a.qk_rope_head_dim} rotated, v {a.v_head_dim}"]
    if attention.type == "retention":  # queries and keys one width, values and gate value_factor times it
        width = attention.head_dim or recipe.d_model // attention.num_heads
        return [f"{attention.num_heads} heads", f"q/k {width}", f"values {width * attention.value_factor}"]
    heads = getattr(attention, "num_heads", None)
    if not isinstance(heads, int):
        return []
    words = [f"{heads} heads"]
    kv = getattr(attention, "num_kv_heads", heads)
    if isinstance(kv, int) and kv != heads:
        words.append(f"{kv} KV head" + ("s" if kv > 1 else ""))
    width = getattr(attention, "head_dim", None)
    words.append(f"head_dim {width if isinstance(width, int) else recipe.d_model // heads}")
    return words


def expand(pattern: Pattern) -> list[str]:
    unit = [name for name, count in pattern.unit for _ in range(count)]
    return unit * pattern.repeats + [name for name, count in pattern.tail for _ in range(count)]


def stack_name(stack: Stack) -> str:
    return stack.name if stack.name in ("encoder", "decoder") else ("decoder" if stack.causal else "encoder")


@pytest.mark.parametrize("name", NAMED)
def test_the_description_holds_the_recipes_values(name):
    recipe = load_recipe(name)
    model = build(recipe, device="meta")
    stacks, _ = describe(model)
    for stack in stacks:
        if not stack.num_layers:
            continue  # an architecture whose blocks zoo does not recognise
        where = stack_name(stack)
        tower = getattr(recipe, stack.name) if stack.name == "vision" else recipe  # a dual-encoder's image tower
        plan = tower.layer_plan(where)
        prefix = f"{stack.name}." if stack.name else ""
        for kind in stack.kinds:
            unit = next(u for u in kind.units if not u.cross and u.sublayer.kind == "attention")
            label = unit.sublayer
            text = "\n".join(label.lines)
            for i in kind.layers:
                attention = plan[i]["attention"][0]
                layer = f"{name} {where} layer {i}"
                # the mixer's own label, from this layer's config: its kind of mixer, never a guess
                ctx = tower.context(layer_idx=i, causal=stack.causal, stack=where, attention=attention)
                module = model.get_submodule(f"{prefix}blocks.{i}.attention")
                own = attention.label("attention", ctx, module)
                assert label.title == own.title, layer
                assert label.title.endswith(f"· {attention.type}"), layer
                if not {"num_heads", "heads"} & set(type(attention).model_fields):  # heads per stage: zoo-swin
                    assert "attention" not in label.title.lower(), (layer, label.title)
                # the rotary base this layer applies, and no other
                theta = expected_theta(tower, attention)
                drawn = [float(t) for t in THETA.findall(text)]
                assert drawn == ([] if theta is None else [pytest.approx(theta)]), (layer, label.lines)
                # a score soft-cap exactly where set
                softcap = getattr(attention, "softcap", None)
                capped = [line for line in label.lines if "soft-capped" in line]
                assert capped == ([] if softcap is None else [f"scores soft-capped at ±{number(softcap)}"]), layer
                # head widths as the recipe gives them
                first = label.lines[0] if label.lines else ""
                assert first.startswith(", ".join(head_widths(tower, attention))), (layer, first)
        if stack.head is not None:
            softcap = getattr(recipe.head, "softcap", None)
            capped = [line for line in stack.head.lines if "soft-capped" in line]
            assert capped == ([] if softcap is None else [f"logits soft-capped at ±{number(softcap)}"]), name
        if stack.pattern is not None:  # the drawn unit, repeated, is the order of the blocks
            order = {i: k.name for k in stack.kinds for i in k.layers}
            assert expand(stack.pattern) == [order[i] for i in sorted(order)], name
            assert stack.pattern.repeats >= 2 and len({n for n, _ in stack.pattern.unit}) >= 2


def test_the_user_reported_cases():
    """Gemma 3's global layers rotate at 1M, Gemma 2 caps its logits, Mamba is no attention, MLA's widths,
    Gemma 3's local/global interleave is one repeating unit."""

    def kinds(name: str) -> list[Stack]:
        return describe(build(load_recipe(name), device="meta"))[0]

    (gemma3,) = kinds("gemma-3-1b")
    local, global_ = (k.units[0].sublayer for k in gemma3.kinds)
    assert "RoPE θ=10000" in local.lines and "RoPE θ=1000000" in global_.lines
    assert gemma3.pattern is not None and gemma3.pattern.text == "× 4 [A × 5, B], then A × 2"
    (gemma2,) = kinds("gemma-2-2b")
    assert "logits soft-capped at ±30" in gemma2.head.lines
    assert all("scores soft-capped at ±50" in k.units[0].sublayer.lines for k in gemma2.kinds)
    (mamba,) = kinds("mamba-tiny")
    title = mamba.kinds[0].units[0].sublayer.title
    assert "attention" not in title.lower() and title.endswith("· mamba"), title
    (mla,) = kinds("deepseek-v2-lite")
    first = mla.kinds[0].units[0].sublayer.lines[0]
    assert first == "16 heads, qk 128 + 64 rotated, v 128" and "head_dim" not in first
