"""Reading recipe files safely: UTF-8 text of bounded size, YAML through ``RecipeLoader`` (YAML 1.2's core schema,
no duplicate keys, no tags but the core ones) after ``_scan_yaml`` found it within the limits of ``zoo.limits``,
JSON with the same limits, and ``check_tree`` for plain data from anywhere. ``dump_yaml`` writes what
``load_yaml`` reads back.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

import yaml

from zoo.errors import RecipeError
from zoo.limits import MAX_ALIASES, MAX_FILE_BYTES, MAX_INT_DIGITS, MAX_NESTING, MAX_NODES

from .report import short_repr as _describe

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

YAML_HINTS = {
    "mapping values are not allowed": "a key indented deeper than the keys above it, or a value holding ': ' "
    "that needs quotes",
    "did not find expected key": "a key that lines up with no key above it: indent it as the other keys of its section",
    "did not find expected '-' indicator": "a key among the items of a list: indent it as the key that holds the "
    "list, or start it with '- '",
}
"""The common causes of PyYAML's problems (by the start of its message), said after it."""


def _yaml_problem(text: str, mark: Any, problem: str) -> str:
    """A YAML syntax error in a recipe's terms: a tab is named as such, a common problem gets its likely cause;
    the offending line is quoted with a caret under the column."""
    line = text.splitlines()[mark.line] if mark is not None and mark.line < len(text.splitlines()) else ""
    if mark is not None and "\t" in line[: mark.column + 1]:
        mark = yaml.Mark(mark.name, mark.index, mark.line, line.index("\t"), mark.buffer, mark.pointer)
        return _at_mark(text, mark, "tabs are not allowed in YAML: indent with spaces")
    hint = next((h for start, h in YAML_HINTS.items() if problem.startswith(start)), None)
    return _at_mark(text, mark, f"invalid YAML: {problem}" + (f" ({hint})" if hint else ""))


def _at_mark(text: str, mark: Any, problem: str) -> str:
    """``line L, column C: problem`` and the line quoted, a caret under the column; ``problem`` without a mark."""
    if mark is None:
        return problem
    lines = text.splitlines()
    quoted = lines[mark.line] if mark.line < len(lines) else ""
    if len(quoted) > 200:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    pad = "".join(c if c == "\t" else " " for c in quoted[: mark.column])  # a tab keeps the caret aligned
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}\n    {quoted}\n    {pad}^"


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
        raise RecipeError(_at_mark(text, exc.problem_mark, exc.problem), source=source) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise RecipeError(_yaml_problem(text, mark, getattr(exc, "problem", None) or str(exc)), source=source) from None
    if data is None:
        raise RecipeError("the recipe file is empty", source=source)
    if not isinstance(data, dict):
        raise RecipeError(f"a recipe must be a mapping of keys to values, not a {type(data).__name__}", source=source)
    check_tree(data, source=source)
    return data
