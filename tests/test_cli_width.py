"""Every command of the ``zoo`` CLI fits 80 columns, breaks no word, and writes no trailing spaces when piped.

Each command runs through typer's ``CliRunner`` (not a terminal: what a pipe receives) with ``COLUMNS=80`` and
its output is checked for:

* width: no line longer than 80 cells;
* trailing spaces: none at the end of any line;
* broken words: the same command is run again at 400 columns, where nothing needs to wrap, and every
  whitespace-separated token of the 80-column output must be a token of the wide one. A word folded across
  two lines (``encoder-decod`` / ``er``) or cut short (``zoo.architec…``) leaves fragments that the wide output
  does not hold. Left out of the comparison: rules (three or more of ``─ ═ = -``, as wide as their table); for
  commands whose output holds measurements (timings, losses), tokens with a digit and tokens of one or two
  characters (the units of measured figures, ``k``, ``ms``, come and go with their values). Click shortens a
  command's one-line help to the width with ``...`` at a word's end: that suffix is taken off first.

JSON output (``zoo schema``, ``--json``) is data, not layout: only its line ends are checked. The commands are
those registered on ``zoo.cli.app``; a test fails when one is added without a case here.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from zoo.cli import app
from zoo.cli.render import TrimmedLines, console, table
from zoo.recipe import load_recipe, named_recipes

WIDTH = 80
WIDE = 400
RULE = re.compile(r"^[─━═=\-]{3,}$")


def invoke(args: list[str], columns: int = WIDTH) -> str:
    result = CliRunner().invoke(app, args, env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, (args, result.output, result.exception)
    return result.output


def tokens(text: str, *, measured: bool = False) -> set[str]:
    """The words of ``text`` as the broken-word check compares them (see the module's docstring)."""
    words = {t.removesuffix("...") for t in text.split() if not RULE.match(t)}
    return {w for w in words if w and not (measured and (len(w) <= 2 or any(c.isdigit() for c in w)))}


def check_layout(out: str, *, json: bool = False) -> None:
    lines = out.splitlines()
    assert [line for line in lines if line != line.rstrip()] == [], "trailing spaces"
    if not json:
        assert [line for line in lines if cell_len(line) > WIDTH] == [], f"lines over {WIDTH} columns"


def check_words(narrow: str, wide: str, *, measured: bool = False) -> None:
    broken = tokens(narrow, measured=measured) - tokens(wide, measured=measured)
    assert not broken, f"words broken or cut at {WIDTH} columns: {sorted(broken)}"


def check(args: list[str], *, measured: bool = False, json: bool = False) -> str:
    out = invoke(args)
    check_layout(out, json=json)
    if not json:
        check_words(out, invoke(args, WIDE), measured=measured)
    return out


# ---------------------------------------------------------------------------------------------- the commands

COMMANDS = {c.name or c.callback.__name__ for c in app.registered_commands}

FAST = {
    "help": ["--help"],
    "list attention": ["list", "attention"],
    "list": ["list"],
    "plugins": ["plugins"],
    "summary gpt2-small": ["summary", "gpt2-small"],
    "summary mixtral-8x7b": ["summary", "mixtral-8x7b"],
    "summary gpt-tiny depth 3": ["summary", "gpt-tiny", "--depth", "3"],
    "plan llama-3.2-1b": ["plan", "llama-3.2-1b", "--gpu", "h100-80gb", "--gpus", "8"],
    "plan gpt-tiny cpu": ["plan", "gpt-tiny", "--gpu", "cpu"],
    "build gpt2-small": ["build", "gpt2-small", "--device", "meta"],
    "validate": ["validate", "gpt-tiny", "mixtral-8x7b"],
    "diff": ["diff", "mistral-7b-v0.1", "llama-3-70b"],
}
MEASURED = {"bench": ["bench", "gpt-tiny", "--new", "4", "--prompt", "8", "--device", "cpu"]}
"""Commands whose figures are measured (timings): their words are compared, their numbers not."""
COVERED_ELSEWHERE = {"recipes", "schema", "draw", "train", "generate", "eval", "plot", "export", "import", "predict"}
COVERED_ELSEWHERE |= {"chat"}  # a conversation needs a chat template: tests/test_hf_text.py talks with one


def test_every_command_has_a_case():
    covered = {args[0] for args in [*FAST.values(), *MEASURED.values()] if not args[0].startswith("-")}
    assert COMMANDS == covered | COVERED_ELSEWHERE


@pytest.mark.parametrize("args", FAST.values(), ids=FAST.keys())
def test_command_fits(args):
    check(args)


@pytest.mark.parametrize("args", MEASURED.values(), ids=MEASURED.keys())
def test_measuring_command_fits(args):
    check(args, measured=True)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_fits(command):
    check([command, "--help"])


def test_schema_is_json_without_trailing_spaces():
    check(["schema"], json=True)


def test_draw_fits(tmp_path):
    out = invoke(["draw", "gpt-tiny", "-o", str(tmp_path / "a.svg")])
    check_layout(out)


@pytest.mark.slow
def test_recipes_fits_and_keeps_every_name_and_description_word_whole():
    out = check(["recipes"])  # the old table folded "encoder-decod / er" and gave descriptions a word a line
    words = tokens(out)
    for name, path in named_recipes().items():
        recipe = load_recipe(path)
        assert {name, recipe.architecture} <= words, name
        assert set((recipe.description or "").split()) <= words, name


@pytest.mark.slow
def test_a_trained_run_through_every_command_that_reads_it(tmp_path, monkeypatch):
    """train, generate, eval, plot, export, import and predict, at 80 columns and at 400 in two folders (the
    same relative paths, so that the outputs differ only by measurements)."""
    data = tmp_path / "data.txt"
    data.write_text("the quick brown fox jumps over the lazy dog.\n" * 40)
    steps = ["--set", "train.steps=2", "--set", "train.batch_size=2", "--set", "train.eval_interval=1"]
    runs = [
        ["train", "gpt-tiny", *steps, "--out", "run"],
        ["generate", "run", "--prompt", "The ", "--max-new-tokens", "4", "--temperature", "0"],
        ["eval", "run", "--data", str(data)],
        ["plot", "run"],
        ["export", "run", "hf", "--to", "hf"],
        ["import", "hf", "--out", "imported"],
        ["train", "bert-tiny", *steps, "--out", "mlm"],
        ["predict", "mlm", "the [MASK] fox", "--top-k", "3"],
    ]
    outputs: dict[int, list[str]] = {}
    for columns in (WIDTH, WIDE):
        (tmp_path / str(columns)).mkdir()
        monkeypatch.chdir(tmp_path / str(columns))
        outputs[columns] = [invoke(args, columns) for args in runs]
    for narrow, wide in zip(outputs[WIDTH], outputs[WIDE], strict=True):
        check_layout(narrow)
        check_words(narrow, wide, measured=True)


# ---------------------------------------------------------------------------------------------- piped output


def test_piped_output_has_no_trailing_spaces():
    """The real entry point in a child process, its stdout a pipe and COLUMNS unset: the plain width, and no line
    padded to it (rich pads table cells; ``box.SIMPLE_HEAD`` draws its edges as spaces)."""
    from zoo.cli.render import PLAIN_WIDTH

    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    result = subprocess.run(
        [sys.executable, "-m", "zoo.cli", "summary", "gpt-tiny"], capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "Parameters by layer" in lines
    assert [line for line in lines if line != line.rstrip()] == []
    assert max(cell_len(line) for line in lines) <= PLAIN_WIDTH


def test_trimmed_lines_strip_line_ends_only():
    out = io.StringIO()
    stream = TrimmedLines(out)
    for chunk in ("a  b  ", "c   \n", " d \n  ", "e", "   ", "\n", "tail   "):
        stream.write(chunk)
    assert out.getvalue() == "a  b  c\n d\n  e\n" + "tail"  # inner spaces kept; a later write continues a line


def test_a_table_keeps_words_whole_while_another_column_has_room(monkeypatch):
    """Rich alone narrows the widest columns to equal widths, folding a path of 34 characters in two while the
    description beside it could wrap at its spaces; ``render.table`` narrows no column below its longest word
    while another has room to give."""
    monkeypatch.setenv("COLUMNS", "56")
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    path, description = "recipes/encoder-decoder-base.yaml", "a post-norm encoder-decoder with learned positions " * 3
    t = table(None, "path", "description")
    t.add_row(path, description)
    console().print(t)
    text = out.getvalue()
    assert path in text and max(cell_len(line) for line in text.splitlines()) <= 56
    assert tokens(text) == {"path", "description", path, *description.split()}
