"""Finding recipes: the named recipes that plugins ship (a shipped file that cannot be read is reported once and
left out), a recipe file from a path or a name, and the recipe of a model, checkpoint, run or Hugging Face folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zoo.errors import RecipeError
from zoo.limits import MAX_REF_CHARS
from zoo.plugins import hf_folder_recipe, recipe_sources, report_recipe_problem
from zoo.registry import did_you_mean

from .reading import read_recipe_file

_readable: dict[Path, tuple[tuple[int, int], str | None]] = {}  # file -> ((mtime_ns, size), why unreadable)


def _unreadable(path: Path) -> tuple[str | None, bool]:
    """Why a shipped recipe file cannot be read (decoded, parsed), or None; and whether that was found just now
    (the answer is cached while the file's modification time and size stay the same)."""
    try:
        stat = path.stat()
    except OSError as exc:
        return f"cannot read it: {exc.strerror or exc}", False
    key = (stat.st_mtime_ns, stat.st_size)
    cached = _readable.get(path)
    if cached is not None and cached[0] == key:
        return cached[1], False
    try:
        read_recipe_file(path)
        problem = None
    except RecipeError as exc:
        problem = str(exc).removeprefix(f"{path}: ")
    _readable[path] = (key, problem)
    return problem, True


def named_recipes() -> dict[str, Path]:
    """Recipe name -> file, from every recipe directory that plugins ship (the built-in one included).

    A shipped file that cannot be read (not UTF-8, not YAML, past a limit) is reported once as a
    ``PluginWarning`` naming its plugin, and left out.
    """
    found: dict[str, Path] = {}
    for plugin, base in recipe_sources():
        files = [base] if _is_file(base) else sorted(base.glob("*.y*ml")) + sorted(base.glob("*.json"))
        for f in files:
            if f.stem in found:
                continue
            problem, new = _unreadable(f)
            if problem is not None:
                if new:
                    report_recipe_problem(plugin, f, problem)
                continue
            found[f.stem] = f
    return found


def _is_file(path: Path) -> bool:
    """``path.is_file()``, False for a name the OS cannot even look up (too long, a NUL byte in it)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def _folder_recipe(folder: Path) -> tuple[Path | None, dict[str, Any]]:
    """The recipe of a model, checkpoint, run or Hugging Face folder (``zoo.locate``): its file and data."""
    from zoo.locate import locate

    found = locate(folder)
    if found.recipe_file is None:  # a Hugging Face folder: the built-in plugin zoo.hf reads its config
        return None, hf_folder_recipe(found.path)
    return found.recipe_file, read_recipe_file(found.recipe_file)


def named_recipe(name: str) -> Path | None:
    """``named_recipes().get(name)``, reading only the files of that name (not every shipped recipe)."""
    for plugin, base in recipe_sources():
        files = [base] if _is_file(base) else sorted(base.glob("*.y*ml")) + sorted(base.glob("*.json"))
        for f in files:
            if f.stem != name:
                continue
            problem, new = _unreadable(f)
            if problem is None:
                return f
            if new:
                report_recipe_problem(plugin, f, problem)
    return None


def find_recipe(ref: str, relative_to: Path | None = None) -> Path:
    """A recipe file from a path (relative to ``relative_to`` first) or a recipe name."""
    if len(ref) > MAX_REF_CHARS:
        raise RecipeError(f"a recipe name or path of {len(ref):,} characters; at most {MAX_REF_CHARS} are looked up")
    candidates = [Path(ref)]
    if relative_to is not None:
        candidates.insert(0, relative_to / ref)
    for c in candidates:
        if _is_file(c):
            return c
    found = named_recipe(ref)
    if found is not None:
        return found
    named = named_recipes()
    hint = did_you_mean(ref, sorted(named))
    raise RecipeError(
        f"no recipe file or named recipe {ref!r}{hint}; named recipes: {', '.join(sorted(named)) or 'none'}"
    )
