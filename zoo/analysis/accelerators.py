"""The accelerators ``zoo plan`` knows: zoo's catalogue (``zoo/data/accelerators.yaml``: memory, dense bf16 FLOP/s,
memory and interconnect bandwidths, devices per node, and the datasheets they come from), those plugins register
through the ``register_accelerators`` hook, and those of a ``--gpu-spec`` file. Names are case-insensitive."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path

from zoo.accelerator_hooks import Accelerator, catalogue, parse_entries, registered
from zoo.errors import PlanError

__all__ = ["DEFAULT_GPU", "Accelerator", "accelerators", "choose_accelerator", "get_accelerator", "read_gpu_spec"]

DEFAULT_GPU = "h100-80gb"
"""What ``zoo plan`` plans for when told no accelerator."""
SPEC_FORMAT = "a YAML file of accelerator entries in the format of zoo/data/accelerators.yaml"


def accelerators() -> dict[str, Accelerator]:
    """Every accelerator zoo knows, by lower-case name: the catalogue's, then those plugins registered."""
    from zoo.plugins import load_plugins

    load_plugins()
    return {**catalogue(), **registered()}


def _suggestions(key: str, names: list[str]) -> list[str]:
    """Names that contain ``key`` (``h100``: ``h100-80gb``, ``h100-pcie``), else the closest by spelling."""
    close = [n for n in names if key and key in n]
    return close[:4] if close else difflib.get_close_matches(key, names, n=3, cutoff=0.6)


def get_accelerator(name: str, extra: Mapping[str, Accelerator] | None = None) -> Accelerator:
    """The accelerator called ``name`` (case-insensitive), among zoo's and ``extra`` (a ``--gpu-spec`` file's).

    Raises:
        PlanError: an unknown name; the message suggests the closest names and lists all.
    """
    known = {**accelerators(), **(extra or {})}
    key = name.strip().lower()
    if key in known:
        return known[key]
    names = list(known)
    close = _suggestions(key, names)
    guess = f": did you mean {', '.join(close)}?" if close else ";"
    raise PlanError(f"unknown accelerator {name!r}{guess} --gpu takes one of {', '.join(names)}")


def read_gpu_spec(path: str | Path) -> dict[str, Accelerator]:
    """The accelerators of a ``--gpu-spec`` file, by lower-case name (``source`` is optional there).

    Raises:
        PlanError: a missing or unreadable file, an invalid entry (naming the entry, the field and the fix), or a
            name that zoo already knows.
    """
    import yaml

    path = Path(path)
    if not path.is_file():
        raise PlanError(f"--gpu-spec {path}: no such file; give {SPEC_FORMAT}")
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        problem = " ".join(str(exc).split())
        raise PlanError(f"--gpu-spec {path}: cannot be read ({problem}); give {SPEC_FORMAT}") from None
    if data is None:
        raise PlanError(f"--gpu-spec {path}: the file is empty; give {SPEC_FORMAT}")
    try:
        found = parse_entries(data, str(path))
    except ValueError as exc:
        raise PlanError(str(exc)) from None
    known = accelerators()
    for name in found:
        if name in known:
            raise PlanError(
                f"{path}: accelerator '{name}' is already known to zoo ({known[name].title}); "
                f"give yours another name, e.g. '{name}-custom'"
            )
    return found


def choose_accelerator(gpu: str | Accelerator | None = None, gpu_spec: str | Path | None = None) -> Accelerator:
    """What ``zoo plan --gpu GPU --gpu-spec FILE`` plans for: ``gpu`` by name among zoo's accelerators and the
    file's; with no ``gpu``, the file's one entry, or ``DEFAULT_GPU`` when there is no file.

    Raises:
        PlanError: an unknown name, a bad file, or a file of several entries and no ``gpu`` to pick one.
    """
    if isinstance(gpu, Accelerator):
        return gpu
    extra = read_gpu_spec(gpu_spec) if gpu_spec is not None else {}
    if gpu is None:
        if len(extra) == 1:
            return next(iter(extra.values()))
        if extra:
            raise PlanError(f"{gpu_spec} holds {len(extra)} accelerators: pick one with --gpu ({', '.join(extra)})")
        gpu = DEFAULT_GPU
    return get_accelerator(gpu, extra)
