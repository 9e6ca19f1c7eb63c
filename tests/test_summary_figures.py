"""Every figure ``zoo summary`` gives for every shipped recipe (plugins' included) stays what it was.

``data/summaries.json`` holds ``summarize(name, torchinfo=False).to_dict()`` of each named recipe as computed
when the costs still lived in a separate formula table and plan (zoo 0.1). The components now declare their
own costs and the parts come from the built module tree: these numbers must not move. A new figure may be
added to the summary; none of these may change. Regenerate the file only for a deliberate change of a figure.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zoo.analysis import summarize
from zoo.recipe import named_recipes

FIGURES = json.loads((Path(__file__).parent / "data" / "summaries.json").read_text())


def differences(old: Any, new: Any, path: str = "") -> list[str]:
    if isinstance(old, dict):
        out = [f"{path}.{k}: missing" for k in old if k not in new]
        return out + [d for k in old if k in new for d in differences(old[k], new[k], f"{path}.{k}")]
    return [] if old == new else [f"{path}: {old!r} -> {new!r}"]


def test_every_recipe_of_the_record_is_still_shipped():
    assert set(FIGURES) <= set(named_recipes())


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_summary_figures_are_unchanged(name):
    seq_len = FIGURES[name]["seq_len"]  # recorded at max_len, the default then (now 4096 up to max_len)
    now = json.loads(json.dumps(summarize(name, seq_len=seq_len, torchinfo=False).to_dict()))
    assert differences(FIGURES[name], now) == []
