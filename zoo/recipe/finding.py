"""Finding recipes: the named recipes that plugins ship (a shipped file that cannot be read is reported once and
left out), a recipe file from a path or a name, and the recipe of a model, checkpoint, run or Hugging Face folder.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from zoo.errors import RecipeError
from zoo.limits import MAX_REF_CHARS
from zoo.plugins import hf_folder_recipe, recipe_sources, report_recipe_problem

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
    from zoo.errors import RecipeError
    from zoo.locate import locate
    from zoo.paths import folder_file

    found = locate(folder)
    if found.recipe_file is None:  # a Hugging Face folder: the built-in plugin zoo.hf reads its config
        return None, hf_folder_recipe(found.path)
    folder_file(found.path, found.recipe_file.name, error=RecipeError)  # a file of the folder, not a link out
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


RECIPE_SUFFIXES = (".yaml", ".yml", ".json")


def looks_like_path(ref: str) -> bool:
    """A reference written as a file path (a recipe suffix or a folder in it), not as a recipe's name."""
    return ref.endswith(RECIPE_SUFFIXES) or "/" in ref or os.sep in ref


def find_recipe(ref: str, relative_to: Path | None = None) -> Path:
    """A recipe file from a path (relative to ``relative_to`` first) or a recipe name.

    A path that is no file is ``file not found`` (with the closest file of its folder or named recipe); a name
    that is neither is refused with the closest named recipes, not all of them."""
    if len(ref) > MAX_REF_CHARS:
        raise RecipeError(f"a recipe name or path of {len(ref):,} characters; at most {MAX_REF_CHARS} are looked up")
    candidates = [Path(ref)]
    if relative_to is not None:
        candidates.insert(0, relative_to / ref)
    for c in candidates:
        if _is_file(c):
            return c
    if looks_like_path(ref):
        raise RecipeError(f"file not found: {ref}{_near_file(ref, candidates[0])}")
    found = named_recipe(ref)
    if found is not None:
        return found
    named = sorted(named_recipes())
    close = difflib.get_close_matches(ref, named, n=3, cutoff=0.6)
    hint = f" (did you mean {_either(close)}?)" if close else ""
    listing = f"`zoo recipes` lists all {len(named)}" if named else "no plugin ships one"
    raise RecipeError(f"no recipe file or named recipe {ref!r}{hint}; {listing}")


def _either(names: list[str]) -> str:
    quoted = [f"'{n}'" for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _near_file(ref: str, path: Path) -> str:
    """`` (did you mean ...?)`` naming the named recipe of ``path``'s stem, else the recipe file of its folder
    closest to it, else the named recipe closest to it, else ``""``."""
    stem = _stem(path.name)
    named = sorted(named_recipes())
    if stem in named:
        return f" (did you mean the named recipe '{stem}'?)"
    try:
        files = sorted(p.name for p in path.parent.iterdir() if p.suffix in RECIPE_SUFFIXES and _is_file(p))
    except (OSError, ValueError):
        files = []
    by_stem = {_stem(f): f for f in files}
    close = difflib.get_close_matches(stem, sorted(by_stem), n=1, cutoff=0.6)
    if close:
        name = by_stem[close[0]]
        return f" (did you mean {Path(ref).parent / name if Path(ref).parent != Path('.') else name}?)"
    close = difflib.get_close_matches(stem, named, n=1, cutoff=0.6)
    return f" (did you mean the named recipe '{close[0]}'?)" if close else ""


def _stem(name: str) -> str:
    return next((name.removesuffix(s) for s in RECIPE_SUFFIXES if name.endswith(s)), name)
