"""Run folders: where a run goes by default (``runs/NAME``, then ``-2``, ``-3``...), which recipe names can
name one, and how ``train()`` was called (``Start``, recorded in the run's ``run.yaml``)."""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zoo.errors import TrainError
from zoo.recipe import Recipe

RUNS_DIR = Path("runs")


@dataclass(frozen=True)
class Start:
    """How ``train()`` was called: the recipe as given (re-read on resume) and the overrides on top of it."""

    recipe: str | Path | Mapping[str, Any] | Recipe
    overrides: dict[str, Any]

    @property
    def reference(self) -> str | None:
        """The recipe's name or path as given; None for a dict or a ``Recipe``."""
        return str(self.recipe) if isinstance(self.recipe, (str, Path)) else None


def check_run_name(name: str) -> str:
    """A recipe name that names one folder inside ``runs/``: no path separator, ``..``, absolute path."""
    separators = {"/", "\\", os.sep, os.altsep or "/"}
    if (
        not name.strip()
        or name in (".", "..")
        or any(sep in name for sep in separators)
        or "\0" in name
        or Path(name).is_absolute()
    ):
        raise TrainError(
            f"the recipe name {name!r} cannot name a run folder inside {RUNS_DIR}/ (it is empty, holds a path "
            "separator or '..', or is absolute): give the recipe a plain name (--set name=NAME), or pass --out DIR"
        )
    return name


def default_run_dir(name: str, resume: bool) -> Path:
    """``runs/NAME``; when it already holds a run, ``runs/NAME-2``, ``-3``... (resume: the newest of them).

    Raises:
        TrainError: a name that would put the run outside ``runs/`` (``../x``, ``a/b``, ``/tmp/x``).
    """
    check_run_name(name)
    pattern = f"{glob.escape(name)}-*"
    taken = [RUNS_DIR / name] + sorted(RUNS_DIR.glob(pattern), key=lambda p: _suffix(p, name))
    taken = [p for p in taken if p.exists() and _suffix(p, name) >= 0]
    if resume:
        return taken[-1] if taken else RUNS_DIR / name
    if not taken:
        return RUNS_DIR / name
    return RUNS_DIR / f"{name}-{max(_suffix(p, name) for p in taken) + 1}"


def _suffix(path: Path, name: str) -> int:
    rest = path.name[len(name) :]
    if rest == "":
        return 1
    return int(rest[1:]) if rest[1:].isdigit() else -1
