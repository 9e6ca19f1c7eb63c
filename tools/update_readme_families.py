"""Rewrite the README's family table from the mapping tables (zoo.hf.family_table); the test
tests/test_hf_config_walk.py::test_the_readme_family_table_is_current fails while it is stale."""

from __future__ import annotations

from pathlib import Path

from zoo.hf import family_table

README = Path(__file__).resolve().parents[1] / "README.md"
START, END = "<!-- family table:", "<!-- end of family table -->"


def main() -> None:
    text = README.read_text(encoding="utf-8")
    head = text.index("\n", text.index(START)) + 1
    tail = text.index(END)
    README.write_text(text[:head] + family_table() + "\n" + text[tail:], encoding="utf-8")
    print(f"updated {README}")


if __name__ == "__main__":
    main()
