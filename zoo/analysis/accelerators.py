"""The accelerators ``zoo plan`` knows (``zoo/data/accelerators.yaml``): memory, dense bf16 FLOP/s, memory
and interconnect bandwidths, devices per node, and the datasheets they come from."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from zoo.errors import PlanError


@dataclass(frozen=True)
class Accelerator:
    """One device type of ``zoo/data/accelerators.yaml``: its memory, compute, bandwidths and their sources."""

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


@cache
def accelerators() -> dict[str, Accelerator]:
    """Every accelerator zoo knows, by name (``zoo/data/accelerators.yaml``)."""
    import yaml

    path = Path(__file__).resolve().parent.parent / "data" / "accelerators.yaml"
    data = yaml.safe_load(path.read_text())
    out = {}
    for name, spec in data.items():
        gib = spec["memory_gib"]
        memory = round(gib * 2**30) if gib is not None else _machine_memory()
        out[name] = Accelerator(
            name=name,
            title=spec["title"],
            memory=spec["memory"],
            memory_bytes=memory,
            flops=float(spec["flops"]),
            bandwidth=float(spec["bandwidth"]),
            link=float(spec["link"]),
            network=float(spec["network"]),
            per_node=int(spec["per_node"]),
            source=dict(spec["source"]),
        )
    return out


def _machine_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def get_accelerator(name: str) -> Accelerator:
    """The accelerator called ``name`` (case-insensitive).

    Raises:
        PlanError: an unknown name; the message lists the known ones.
    """
    known = accelerators()
    found = known.get(name.strip().lower())
    if found is None:
        listed = ", ".join(f"{n} ({a.title})" for n, a in known.items())
        raise PlanError(f"unknown accelerator {name!r}: --gpu takes one of {listed}")
    return found
