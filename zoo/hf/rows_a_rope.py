"""RoPE rows beyond ``rows.ROPE``: the rope a config class fills in where a config.json states none."""

from dataclasses import replace
from typing import Any

from .rows import ROPE
from .table import Computed


def rope_unless_given(params: dict[str, Any]) -> Computed:
    """``rows.ROPE``, where a config without ``rope_parameters`` or ``rope_scaling`` has the rope ``params`` at its
    ``rope_theta`` (what the config class fills in: gpt-oss's YaRN)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        if config["rope_parameters"] is None and config["rope_scaling"] is None:
            config = {**config, "rope_parameters": {**params, "rope_theta": config["rope_theta"]}}
        return ROPE.read(config, recipe)

    return replace(ROPE, read=read)


def rope_interleaved_by(key: str) -> Computed:
    """``rows.ROPE`` whose pairs are adjacent dims or halves as the config's ``key`` says (DeepSeek-V3's
    ``rope_interleave``), written back with ``rope_parameters`` alone (it holds the base)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        return {"positional": {**ROPE.read(config, recipe)["positional"], "interleaved": bool(config[key])}}

    return replace(
        ROPE,
        keys={**ROPE.keys, key: True},
        read=read,
        write=lambda recipe, weights: {
            "rope_parameters": ROPE.write(recipe, weights)["rope_parameters"],
            key: recipe.positional.interleaved,
        },
        requires={k: v for k, v in ROPE.requires.items() if k != "positional.interleaved"},
        legacy=("rope_scaling", "rope_theta"),
    )
