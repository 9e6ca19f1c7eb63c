"""The accelerator part of the plugin manager: the format of an accelerator entry (the one of
``zoo/data/accelerators.yaml``, of a ``zoo plan --gpu-spec`` file and of the ``register_accelerators`` hook), the
built-in catalogue, and the accelerators plugins register, by name.

``zoo.plugins`` records and forgets the plugins' accelerators through the functions here; ``zoo.analysis.accelerators``
joins them to the catalogue for ``zoo plan``. Names are lower-case: a lookup is case-insensitive.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import PluginError

CATALOGUE = Path(__file__).resolve().parent / "data" / "accelerators.yaml"
FIGURES = ("memory", "flops", "bandwidth", "link", "network")
"""The figures whose ``source`` an entry names."""

_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


@dataclass(frozen=True)
class Accelerator:
    """One device type: its memory, compute, bandwidths and the sources of those figures."""

    name: str
    title: str
    memory: str
    """The datasheet's capacity, as written there."""
    memory_bytes: int
    """Usable bytes (what the driver reports; the machine's memory for ``cpu``)."""
    flops: float
    """Dense bf16 FLOP/s."""
    bandwidth: float
    link: float
    """Intra-node interconnect, bytes/s per device and direction."""
    network: float
    """Inter-node bandwidth, bytes/s per device and direction."""
    per_node: int
    source: dict[str, str]

    @property
    def gpu(self) -> bool:
        return self.name != "cpu"


HINTS = {
    "title": "a one-line name, e.g. 'NVIDIA H100 SXM5 80GB'",
    "memory": "the datasheet's capacity as text, e.g. '80 GB HBM3'",
    "memory_gib": "usable GiB as the driver reports them (torch.cuda.get_device_properties().total_memory / 2**30), "
    "e.g. 79.2; null: this machine's memory",
    "flops": "dense bf16 FLOP/s per device, e.g. 989.4e12",
    "bandwidth": "memory bandwidth in bytes/s, e.g. 3.35e12",
    "link": "intra-node bandwidth in bytes/s per device and direction, e.g. 450.0e9",
    "network": "inter-node bandwidth in bytes/s per device and direction, e.g. 50.0e9",
    "per_node": "devices in a node, a whole number, e.g. 8",
    "source": f"where each figure comes from: a mapping with keys {', '.join(FIGURES)}",
}


class AcceleratorEntry(BaseModel):
    """One entry of the format, as written in YAML (``memory_gib`` rather than bytes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str
    memory: str
    memory_gib: Annotated[float, Field(gt=0)] | None
    flops: float = Field(gt=0)
    bandwidth: float = Field(gt=0)
    link: float = Field(gt=0)
    network: float = Field(gt=0)
    per_node: int = Field(ge=1)
    source: dict[str, str] = Field(default_factory=dict)

    def accelerator(self, name: str) -> Accelerator:
        gib = self.memory_gib
        return Accelerator(
            name=name,
            title=self.title,
            memory=self.memory,
            memory_bytes=round(gib * 2**30) if gib is not None else machine_memory(),
            flops=self.flops,
            bandwidth=self.bandwidth,
            link=self.link,
            network=self.network,
            per_node=self.per_node,
            source=dict(self.source),
        )


def machine_memory() -> int:
    """This machine's memory in bytes (0 where the platform does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def _problem(error: Mapping[str, Any]) -> str:
    """One pydantic error of an entry as ``field: what is wrong; what it should be``."""
    loc = [str(p) for p in error["loc"]]
    field = loc[0] if loc else ""
    where = ".".join(loc)
    kind = error["type"]
    if kind == "missing":
        return f"{where} is missing; add it: {HINTS.get(field, '')}"
    if kind == "extra_forbidden":
        return f"{where} is not a field; the fields are {', '.join(HINTS)}"
    message = str(error["msg"])
    message = message[0].lower() + message[1:]
    return f"{where}: {message} (got {error['input']!r}); {field} is {HINTS.get(field, '')}"


def parse_entries(data: Any, where: str, *, sourced: bool = False) -> dict[str, Accelerator]:
    """``{name: entry}`` as read from YAML (``where`` names the file or plugin) to accelerators by lower-case name.

    ``sourced``: every figure must name its source (the built-in catalogue).

    Raises:
        ValueError: every problem found, one per line, each naming the entry and the field.
    """
    if not isinstance(data, Mapping):
        raise ValueError(
            f"{where}: expected a mapping of accelerator names to entries (as zoo/data/accelerators.yaml), "
            f"got {type(data).__name__}"
        )
    problems: list[str] = []
    out: dict[str, Accelerator] = {}
    for given, spec in data.items():
        name = str(given).strip().lower()
        if not _NAME.fullmatch(name):
            problems.append(f"accelerator {given!r}: a name is letters, digits, '.', '_' and '-', e.g. 'h100-80gb'")
            continue
        if name in out:
            problems.append(f"accelerator {given!r}: named twice (names are case-insensitive)")
            continue
        if not isinstance(spec, Mapping):
            problems.append(f"accelerator '{name}': expected a mapping of fields ({', '.join(HINTS)})")
            continue
        try:
            entry = AcceleratorEntry.model_validate(dict(spec))
        except ValidationError as exc:
            problems += [f"accelerator '{name}': {_problem(e)}" for e in exc.errors()]
            continue
        missing = [f for f in FIGURES if not entry.source.get(f)] if sourced else []
        if missing:
            problems.append(f"accelerator '{name}': source names no document for {', '.join(missing)}")
            continue
        out[name] = entry.accelerator(name)
    if len(problems) == 1:
        raise ValueError(f"{where}: {problems[0]}")
    if problems:
        raise ValueError("\n".join([f"{where}: {len(problems)} problems", *(f"  {p}" for p in problems)]))
    return out


@cache
def catalogue() -> dict[str, Accelerator]:
    """The built-in accelerators (``zoo/data/accelerators.yaml``), in the file's order."""
    import yaml

    return parse_entries(yaml.safe_load(CATALOGUE.read_text()), str(CATALOGUE), sourced=True)


# ------------------------------------------------------------------------------------ registered by plugins

_registered: dict[str, tuple[str, Accelerator]] = {}  # name -> (plugin, accelerator)


def _as_entries(items: list[Any], plugin: str) -> dict[str, Accelerator]:
    """What ``register_accelerators`` returned (``Accelerator`` objects, or dicts with a ``name``) by name."""
    found: dict[str, Accelerator] = {}
    where = f"register_accelerators of plugin '{plugin}'"
    for item in items:
        if isinstance(item, Accelerator):
            parsed = {item.name.strip().lower(): _check(item, where)}
        elif isinstance(item, Mapping) and "name" in item:
            spec = {k: v for k, v in item.items() if k != "name"}
            parsed = parse_entries({item["name"]: spec}, where)
        else:
            raise ValueError(f"{where} returned {item!r}: return Accelerator objects or dicts with a 'name'")
        for name, acc in parsed.items():
            if name in found:
                raise ValueError(f"{where} returned accelerator '{name}' twice")
            found[name] = acc
    return found


def _check(acc: Accelerator, where: str) -> Accelerator:
    """An ``Accelerator`` built in Python, held to the same rules as an entry."""
    gib = acc.memory_bytes / 2**30
    fields = {f: getattr(acc, f) for f in ("title", "memory", "flops", "bandwidth", "link", "network", "per_node")}
    entry = parse_entries({acc.name: {**fields, "memory_gib": gib, "source": acc.source}}, where)
    return entry[acc.name.strip().lower()]


def add_accelerators(plugin: str, items: list[Any], owners: Mapping[str, bool]) -> list[str]:
    """Record the accelerators that ``plugin`` registers; ``owners``: plugin name -> whether it is built in.

    Returns their names. Raises ``PluginError``, recording none, when one is invalid or its name is taken (by the
    catalogue or another plugin).
    """
    try:
        found = _as_entries(items, plugin)
    except ValueError as exc:
        raise PluginError(str(exc)) from None
    for name in found:
        owner = "zoo's catalogue" if name in catalogue() else None
        if name in _registered:
            other = _registered[name][0]
            owner = "zoo (built-in)" if owners.get(other) else f"plugin '{other}'"
        if owner is not None:
            raise PluginError(f"accelerator '{name}' is registered twice: by {owner} and by plugin '{plugin}'")
    for name, acc in found.items():
        _registered[name] = (plugin, acc)
    return list(found)


def forget_accelerators(plugin: str) -> None:
    """Drop the accelerators that ``plugin`` registered."""
    for name in [n for n, (owner, _) in _registered.items() if owner == plugin]:
        del _registered[name]


def clear_accelerators() -> None:
    """Forget every registered accelerator (the plugins are loaded again)."""
    _registered.clear()


def registered() -> dict[str, Accelerator]:
    """The accelerators plugins registered, in registration order."""
    return {name: acc for name, (_, acc) in _registered.items()}
