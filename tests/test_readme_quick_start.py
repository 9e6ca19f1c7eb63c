"""Every command of the README's quick start runs as written, in order, from an empty folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def quick_start() -> list[str]:
    """The quick start's commands: its first bash block, comments dropped and continued lines joined."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Quick start") :]
    block = section[
        section.index("```bash\n") + len("```bash\n") : section.index("```", section.index("```bash\n") + 7)
    ]
    joined = re.sub(r"\\\n\s*", "", block)
    return [re.sub(r"\s+#\s.*$", "", line).strip() for line in joined.splitlines() if line.strip()]


def test_the_quick_start_lists_the_main_commands():
    commands = quick_start()
    assert commands[0] == "zoo --version" and len(commands) >= 15
    for name in ("summary", "plan", "diff", "train", "generate", "eval", "predict", "export", "import"):
        assert any(c.startswith(f"zoo {name} ") for c in commands), name


@pytest.mark.slow
def test_every_quick_start_command_runs_as_written_from_an_empty_folder(tmp_path):
    pytest.importorskip("matplotlib")  # zoo draw and zoo plot: the plot extra
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "COLUMNS": "100"}
    for command in quick_start():
        done = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        assert "Traceback" not in done.stderr, command
    assert (tmp_path / "gpt-again" / "recipe.yaml").is_file() and (tmp_path / "t5-small.svg").stat().st_size > 0
