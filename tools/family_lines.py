"""The size of each Hugging Face family file (``zoo/hf/<family>.py``): its lines, the families it defines, and
whether each is derived from a parent (``Family.derive``). tests/test_hf_family_size.py holds the budget: a file
of derived families at most 40 lines, the median family file at most 80.

    python tools/family_lines.py          # every family file, longest first, and the median
"""

from __future__ import annotations

import importlib
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

import zoo.hf
from zoo.hf.mapping import Family

HF = Path(zoo.hf.__file__).resolve().parent


@dataclass(frozen=True)
class FamilyFile:
    path: Path
    lines: int
    families: tuple[Family, ...]

    @property
    def derived(self) -> bool:
        """Every family the file defines is derived from a parent."""
        return all(family.parent is not None for family in self.families)


def family_files() -> list[FamilyFile]:
    """Each module of ``zoo.hf`` that defines a family at its top level (``NAME = ...``), longest first."""
    out = []
    for path in sorted(HF.glob("[!_]*.py")):
        module = importlib.import_module(f"zoo.hf.{path.stem}")
        text = path.read_text(encoding="utf-8")
        defined = {m.group(1) for m in re.finditer(r"^([A-Z][A-Z0-9_]*) = ", text, re.MULTILINE)}
        families = tuple(v for k, v in vars(module).items() if k in defined and isinstance(v, Family))
        if families:
            out.append(FamilyFile(path, len(text.splitlines()), families))
    return sorted(out, key=lambda f: -f.lines)


def main() -> None:
    files = family_files()
    for f in files:
        parents = ", ".join(sorted({fam.parent.name for fam in f.families if fam.parent is not None})) or "-"
        names = ", ".join(fam.name for fam in f.families)
        print(f"{f.lines:4d}  {f.path.name:24s} {'derived' if f.derived else 'base':8s} from {parents:14s} {names}")
    derived = [f for f in files if f.derived]
    print(f"\n{len(files)} family files, median {statistics.median(f.lines for f in files)} lines")
    print(f"{len(derived)} derived, {sum(f.lines > 40 for f in derived)} over 40 lines")


if __name__ == "__main__":
    main()
