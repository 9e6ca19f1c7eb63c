"""The budget of a family file (tools/family_lines.py): a file of families derived from a parent is at most 40
lines, the median family file at most 80."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[1] / "tools" / "family_lines.py"


def _files():
    spec = importlib.util.spec_from_file_location("family_lines", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module.family_files()


def test_the_median_family_file_is_at_most_80_lines():
    assert statistics.median(f.lines for f in _files()) <= 80


def test_a_derived_family_file_is_at_most_40_lines():
    over = {f.path.name: f.lines for f in _files() if f.derived and f.lines > 40}
    assert over == {}, "derived family files over 40 lines"
