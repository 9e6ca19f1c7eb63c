"""Reading recipes: files (safe YAML or JSON), names, ``extends`` chains, ``--set`` overrides."""

from __future__ import annotations

import copy
import json
import math
import re
import warnings
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

import yaml

from zoo.errors import RecipeError, RecipeWarning
from zoo.limits import (
    MAX_ALIASES,
    MAX_EXTENDS,
    MAX_FILE_BYTES,
    MAX_INT_DIGITS,
    MAX_NESTING,
    MAX_NODES,
    MAX_REF_CHARS,
)
from zoo.plugins import hf_folder_recipe, recipe_sources, report_recipe_problem
from zoo.registry import did_you_mean

from .schema import Recipe
from .validation import short_repr as _describe
from .validation import validate_recipe

# ---------------------------------------------------------------------------------------------- YAML


class _Refused(yaml.YAMLError):
    """A recipe file past one of the limits of ``zoo.limits``, found while reading it."""

    def __init__(self, problem: str, mark: Any = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when installed: 10x faster


class RecipeLoader(_SafeLoader):
    """A safe YAML loader that reads plain scalars as YAML 1.2's core schema does, limits integers, and refuses
    duplicate keys and every tag but the core ones.

    YAML 1.1 (PyYAML's default) reads ``1:04`` as the sexagesimal 64, ``010`` as octal 8, ``on`` / ``no`` as
    booleans, ``1_000`` as 1000 and ``2024-01-01`` as a date; here they are what they look like (strings, and
    10). ``1e-3`` is a float (1.1 needs ``1.0e-3``); ``.inf`` and ``.nan`` are floats that validation refuses.
    """

    yaml_implicit_resolvers: dict[Any, Any] = {}
    yaml_constructors: dict[Any, Any] = {}

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                if isinstance(key, Hashable) and key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {key!r}",
                        key_node.start_mark,
                    )
                if isinstance(key, Hashable):
                    seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: Any) -> int:
        value = str(self.construct_scalar(node))
        digits = value.lstrip("+-")
        if len(digits) > MAX_INT_DIGITS:
            raise _Refused(f"an integer of {len(digits):,} digits; at most {MAX_INT_DIGITS} are read", node.start_mark)
        try:
            return int(value, 10) if digits.isdigit() else int(value, 0)
        except ValueError:
            raise _Refused(f"{value!r} is not an integer", node.start_mark) from None

    def construct_yaml_bool(self, node: Any) -> bool:
        value = str(self.construct_scalar(node))
        if value.lower() not in ("true", "false"):
            raise _Refused(f"{value[:40]!r} is not a boolean (true or false)", node.start_mark)
        return value.lower() == "true"

    def construct_yaml_float(self, node: Any) -> float:
        value = str(self.construct_scalar(node))
        special = {".inf": math.inf, "+.inf": math.inf, "-.inf": -math.inf, ".nan": math.nan}
        if value.lower() in special:
            return special[value.lower()]
        try:
            return float(value)
        except ValueError:
            raise _Refused(f"{value[:40]!r} is not a number", node.start_mark) from None


for _tag, _pattern, _first in [
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        "float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+.0123456789",
    ),
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("merge", r"^(?:<<)$", "<"),
]:
    RecipeLoader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(_pattern), list(_first))
for _tag, _construct in [
    ("null", yaml.constructor.SafeConstructor.construct_yaml_null),
    ("bool", RecipeLoader.construct_yaml_bool),
    ("int", RecipeLoader.construct_yaml_int),
    ("float", RecipeLoader.construct_yaml_float),
    ("str", yaml.constructor.SafeConstructor.construct_yaml_str),
    ("seq", yaml.constructor.SafeConstructor.construct_yaml_seq),
    ("map", yaml.constructor.SafeConstructor.construct_yaml_map),
]:
    RecipeLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _construct)
RecipeLoader.add_constructor(None, yaml.constructor.SafeConstructor.construct_undefined)


def _scan_yaml(text: str) -> None:
    """Refuse, from the event stream and before anything is built, YAML that nests too deep, holds too many
    aliases, or expands (through its aliases) to too many values: a "billion laughs" is refused in
    microseconds instead of taking minutes and gigabytes."""
    loader = RecipeLoader(text)
    try:
        frames: list[list[Any]] = [[None, 0, 0]]  # per open collection: anchor, values below, depth below
        expanded: dict[str, tuple[int, int]] = {}  # anchor -> (values, depth) of what it stands for
        aliases = 0

        def add(size: int, depth: int, mark: Any) -> None:
            frame = frames[-1]
            frame[1] += size
            frame[2] = max(frame[2], depth)
            if frame[1] > MAX_NODES:
                raise _Refused(f"the recipe expands to more than {MAX_NODES:,} values (aliases expanded)", mark)
            if len(frames) - 1 + depth > MAX_NESTING:
                raise _Refused(f"the recipe nests deeper than {MAX_NESTING} levels (aliases expanded)", mark)

        while True:
            event = loader.get_event()
            if event is None or isinstance(event, yaml.StreamEndEvent):
                return
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                frames.append([event.anchor, 0, 0])
                if len(frames) - 1 > MAX_NESTING:
                    raise _Refused(f"the recipe nests deeper than {MAX_NESTING} levels", event.start_mark)
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                anchor, size, depth = frames.pop()
                if anchor is not None:
                    expanded[anchor] = (size + 1, depth + 1)
                add(size + 1, depth + 1, event.start_mark)
            elif isinstance(event, yaml.ScalarEvent):
                if event.anchor is not None:
                    expanded[event.anchor] = (1, 0)
                add(1, 0, event.start_mark)
            elif isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_ALIASES:
                    raise _Refused(f"the recipe has more than {MAX_ALIASES} aliases", event.start_mark)
                if any(frame[0] == event.anchor for frame in frames):
                    raise _Refused(f"alias *{event.anchor} refers to a collection that contains it", event.start_mark)
                add(*expanded.get(event.anchor, (0, 0)), event.start_mark)  # an undefined one: the composer says
    finally:
        loader.dispose()


class RecipeDumper(yaml.SafeDumper):
    """A safe YAML dumper that quotes every string that either YAML 1.1 or ``RecipeLoader`` (1.2) would read as
    something else (``"1e-3"``, ``"0o17"``, ``"on"``), so that ``load_yaml(dump_yaml(data)) == data``."""

    yaml_implicit_resolvers = {
        key: [*yaml.SafeDumper.yaml_implicit_resolvers.get(key, []), *RecipeLoader.yaml_implicit_resolvers.get(key, [])]
        for key in {*yaml.SafeDumper.yaml_implicit_resolvers, *RecipeLoader.yaml_implicit_resolvers}
    }


def dump_yaml(data: Any) -> str:
    """Plain data as YAML text that ``load_yaml`` (and so ``load_recipe``) reads back as the same data."""
    return yaml.dump(data, Dumper=RecipeDumper, sort_keys=False, default_flow_style=None, allow_unicode=True)


def load_yaml(text: str) -> Any:
    """YAML text as plain data, read with ``RecipeLoader`` once ``_scan_yaml`` found it within the limits."""
    _scan_yaml(text)
    loader = RecipeLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


# ---------------------------------------------------------------------------------------------- JSON


def _json_int(text: str) -> int:
    digits = text.lstrip("-")
    if len(digits) > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {len(digits):,} digits; at most {MAX_INT_DIGITS} are read")
    return int(text)


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"found duplicate key {key!r}")
        out[key] = value
    return out


def load_json(text: str) -> Any:
    return json.loads(text, parse_int=_json_int, object_pairs_hook=_json_object)


# ---------------------------------------------------------------------------------------------- plain data


def check_tree(data: Any, *, source: str | None = None, prefix: str = "") -> None:
    """Refuse plain recipe data that no recipe needs and that would break the code reading it: nesting
    deeper than ``MAX_NESTING``, more than ``MAX_NODES`` values (or a structure that contains itself), keys
    that are not strings, integers longer than ``MAX_INT_DIGITS`` digits. Iterative: any depth is safe."""
    stack: list[tuple[Any, int, str]] = [(data, 0, prefix)]
    count = 0
    while stack:
        value, depth, path = stack.pop()
        count += 1
        where = path or "<recipe>"
        if count > MAX_NODES:
            raise RecipeError([(where, f"the recipe holds more than {MAX_NODES:,} values")], source=source)
        if depth > MAX_NESTING:
            raise RecipeError([(where, f"the recipe nests deeper than {MAX_NESTING} levels")], source=source)
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise RecipeError([(where, f"keys are strings, not {_describe(key)}")], source=source)
                stack.append((item, depth + 1, f"{path}.{key}" if path else key))
        elif isinstance(value, (list, tuple)):
            stack.extend((item, depth + 1, f"{path}.{i}" if path else str(i)) for i, item in enumerate(value))
        elif isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * MAX_INT_DIGITS:
            raise RecipeError([(where, f"an integer longer than {MAX_INT_DIGITS} digits")], source=source)


# ---------------------------------------------------------------------------------------------- files


def read_recipe_file(path: Path) -> dict[str, Any]:
    """Parse one YAML or JSON file into a dict; syntax errors name the file, line and column.

    The file must be UTF-8 text of at most ``MAX_FILE_BYTES``; what it holds must stay within the limits of
    ``zoo.limits`` (nesting, values with aliases expanded, aliases, integer digits).
    """
    source = str(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise RecipeError(f"cannot read recipe: {exc.strerror or exc}", source=source) from None
    if len(raw) > MAX_FILE_BYTES:
        raise RecipeError(
            f"the file is larger than {MAX_FILE_BYTES // 1024} KiB, the most a recipe may be", source=source
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise RecipeError(
            f"line {line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); save it as UTF-8",
            source=source,
        ) from None
    try:
        data = load_json(text) if path.suffix == ".json" else load_yaml(text)
    except json.JSONDecodeError as exc:
        raise RecipeError(f"line {exc.lineno}, column {exc.colno}: {exc.msg}", source=source) from None
    except RecursionError:
        raise RecipeError(f"the recipe nests deeper than {MAX_NESTING} levels", source=source) from None
    except _Refused as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise RecipeError(f"{where}{exc.problem}", source=source) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise RecipeError(f"{where}invalid YAML: {problem}", source=source) from None
    if data is None:
        raise RecipeError("the recipe file is empty", source=source)
    if not isinstance(data, dict):
        raise RecipeError(f"a recipe must be a mapping of keys to values, not a {type(data).__name__}", source=source)
    check_tree(data, source=source)
    return data


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


def deep_merge(base: dict[str, Any], top: Mapping[str, Any], *, where: str = "") -> dict[str, Any]:
    """``top`` over ``base``: mappings merge key by key, anything else is replaced.

    A component spec whose ``type`` changes keeps the options the new type accepts too (``--set
    attention.type=gqa`` keeps ``num_heads``); the others are dropped, and a ``RecipeWarning`` names them.
    """
    out = copy.deepcopy(base)
    for key, value in top.items():
        old = out.get(key)
        path = f"{where}{key}"
        if isinstance(old, dict) and isinstance(value, Mapping):
            if _type_changes(old, value):
                old = _kept_for_new_type(old, str(value["type"]), kind=key, path=path)
            out[key] = deep_merge(old, value, where=f"{path}.")
        else:
            out[key] = copy.deepcopy(value)
    return out


def _type_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether ``new`` names another ``type`` than ``old`` (a value that is not even equal to itself, such as
    NaN, counts as the same object, not as a change)."""
    if "type" not in old or "type" not in new:
        return False
    return new["type"] is not old["type"] and new["type"] != old["type"]


def _kept_for_new_type(old: dict[str, Any], new_type: str, *, kind: str, path: str) -> dict[str, Any]:
    """The options of ``old`` (a spec of another type) that a ``new_type`` component accepts; a warning names
    those dropped. An unknown new type keeps nothing: validation then names the type."""
    accepted = _accepted_options(kind, new_type)
    if accepted is None:
        return {}
    kept = {k: v for k, v in old.items() if k != "type" and k in accepted}
    dropped = sorted(k for k in old if k != "type" and k not in accepted)
    if dropped:
        warnings.warn(
            f"{path}: {old.get('type')!r} -> {new_type!r} keeps {', '.join(sorted(kept)) or 'no options'}; "
            f"dropped {', '.join(dropped)} ({new_type!r} has no such option)",
            RecipeWarning,
            stacklevel=4,
        )
    return kept


def _accepted_options(kind: str, name: str) -> set[str] | None:
    """The option names of the registered component ``name`` (of ``kind`` when that is a kind; else the one
    component of that name in any kind), or None when there is no such single component."""
    from zoo.plugins import get_registry
    from zoo.registry import KINDS

    registry = get_registry()
    found = [c for c in registry if c.name == name and (c.kind == kind or kind not in KINDS)]
    if len(found) != 1:
        return None
    return set(found[0].config.model_fields)


def _file_key(path: Path) -> str:
    try:
        return str(path.resolve())
    except (OSError, RuntimeError):  # a symlink loop
        return str(path.absolute())


def _resolve_extends(data: dict[str, Any], path: Path | None) -> dict[str, Any]:
    """``data`` deep-merged over its chain of ``extends`` parents (at most ``MAX_EXTENDS`` files, no cycle)."""
    chain = [data]
    here = path
    seen = {_file_key(path)} if path is not None else set()
    while "extends" in chain[-1]:
        parent_ref = chain[-1].pop("extends")
        source = str(here) if here is not None else None
        if not isinstance(parent_ref, str) or not parent_ref.strip():
            raise RecipeError(f"extends: must be a recipe name or path, not {_describe(parent_ref)}", source=source)
        if len(chain) >= MAX_EXTENDS:
            raise RecipeError(f"extends: a chain of more than {MAX_EXTENDS} recipe files", source=source)
        try:
            parent_path = find_recipe(parent_ref, here.parent if here is not None else None)
        except RecipeError as exc:
            raise RecipeError([("extends", m) for _, m in exc.errors], source=source) from None
        key = _file_key(parent_path)
        if key in seen:
            raise RecipeError(f"extends: cycle through {_describe(parent_ref)}", source=source)
        seen.add(key)
        parent = read_recipe_file(parent_path)
        parent.pop("expect", None)  # a parent's expected size is a fact about the parent, not the child
        chain.append(parent)
        here = parent_path
    merged = chain.pop()
    while chain:
        merged = deep_merge(merged, chain.pop())
    return merged


def parse_override(assignment: str) -> tuple[str, Any]:
    """``'attention.num_heads=8'`` -> ``('attention.num_heads', 8)``; the value is read as YAML."""
    key, sep, raw = assignment.partition("=")
    if not sep or not key.strip():
        raise RecipeError(f"--set {assignment!r}: expected KEY.PATH=VALUE, e.g. attention.num_heads=8")
    try:
        value = load_yaml(raw) if raw.strip() else ""
    except _Refused as exc:
        raise RecipeError(f"--set {key.strip()}: {exc.problem}") from None
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


def overrides_to_tree(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted (or ``__``-separated) keys into a nested dict ready for ``deep_merge``."""
    tree: dict[str, Any] = {}
    for dotted, value in overrides.items():
        keys = dotted.replace("__", ".").split(".")
        node = tree
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise RecipeError(f"override {dotted!r} conflicts with another override of {k!r}")
        node[keys[-1]] = value
    return tree


def load_recipe(source: str | Path | Mapping[str, Any] | Recipe, **overrides: Any) -> Recipe:
    """A validated ``Recipe`` from a file path, a recipe name, a dict, or a ``Recipe`` (copied).

    ``overrides`` apply last, with dotted or double-underscore keys: ``load_recipe("gpt2-small",
    num_layers=2, **{"attention.num_heads": 4})`` or ``attention__num_heads=4``.
    """
    path: Path | None = None
    if isinstance(source, Recipe):
        data = source.to_dict()
    elif isinstance(source, Mapping):
        check_tree(source)
        data = copy.deepcopy(dict(source))
    elif isinstance(source, (str, Path)) and _is_dir(Path(source)):
        path, data = _folder_recipe(Path(source))
    elif isinstance(source, (str, Path)):
        path = find_recipe(str(source))
        data = read_recipe_file(path)
    else:
        raise RecipeError(f"cannot load a recipe from a {type(source).__name__}; give a path, a name or a dict")
    label = str(path) if path else None
    try:
        data = _resolve_extends(data, path)
    except RecipeError as exc:
        exc.source = exc.source or label
        raise
    if overrides:
        check_tree(overrides)
        tree = overrides_to_tree(overrides)
        if "expect" not in tree:
            data.pop("expect", None)  # the expected size was of the recipe as written, not as overridden
        data = deep_merge(data, tree)
    return validate_recipe(data, source=label)
