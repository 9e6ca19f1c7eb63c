"""A plugin's component that fails at run time is named: which plugin, which component, where. No traceback
unless --debug, and a SystemExit from its code is an error too, not a silent exit status."""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import create_model
from torch import nn
from typer.testing import CliRunner

import zoo
from zoo.cli import app
from zoo.config import ComponentConfig

FAST = ["--set", "train.steps=2", "--no-summary", "--device", "cpu"]


class BrokenNorm(nn.Module):
    """A norm whose forward fails, as a plugin's bug would."""

    failure: BaseException = ValueError("boom: the plugin's bug")

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise self.failure


class Broken:
    @zoo.hookimpl
    def register_components(self, register):
        config = create_model("BrokenConfig", __base__=ComponentConfig, type=(Literal["brokennorm"], "brokennorm"))
        register("norm", "brokennorm", BrokenNorm, config)


def train(tmp_path, *more):
    return CliRunner().invoke(
        app, ["train", "gpt-tiny", "--set", "norm=brokennorm", "--out", str(tmp_path / "r"), *FAST, *more]
    )


def test_a_failing_plugin_component_is_named_and_the_run_can_resume(register_plugin, tmp_path):
    register_plugin(Broken(), "zoo-broken")
    result = train(tmp_path)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr
    said = " ".join(result.stderr.split())
    assert "error: plugin 'zoo-broken' (component norm 'brokennorm', test_plugin_runtime.py:" in said
    assert "in forward) failed: ValueError: boom: the plugin's bug (a run keeps its last complete checkpoint" in said
    debug = train(tmp_path, "--debug")
    assert "Traceback (most recent call last)" in debug.stderr and "plugin 'zoo-broken'" in debug.stderr


def test_a_system_exit_from_a_plugin_is_an_error_with_a_message(register_plugin, tmp_path, monkeypatch):
    register_plugin(Broken(), "zoo-broken")
    monkeypatch.setattr(BrokenNorm, "failure", SystemExit(3))
    result = train(tmp_path)
    assert result.exit_code == 2 and "plugin 'zoo-broken'" in result.stderr and "failed: SystemExit: 3" in result.stderr


def test_zoos_own_errors_are_not_blamed_on_a_plugin(register_plugin, tmp_path):
    register_plugin(Broken(), "zoo-broken")
    result = CliRunner().invoke(app, ["train", "gpt-tiny", "--out", str(tmp_path / "r"), "--resume", *FAST])
    assert result.exit_code == 2 and "plugin" not in result.stderr and "holds no run to continue" in result.stderr
