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
