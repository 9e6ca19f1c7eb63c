"""The accelerator catalogue: sourced figures, forgiving names, --gpu-spec files and plugin-registered devices."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import zoo
from zoo import plugins
from zoo.accelerator_hooks import FIGURES, catalogue
from zoo.analysis.accelerators import accelerators, choose_accelerator, get_accelerator, read_gpu_spec
from zoo.analysis.plan import Accelerator, plan
from zoo.cli import app
from zoo.errors import PlanError

ENTRY = """\
my-gpu:
  title: My GPU 40GB
  memory: 40 GB HBM
  memory_gib: 39.0
  flops: 200e12
  bandwidth: 1.5e12
  link: 100e9
  network: 12.5e9
  per_node: 4
"""


def spec_file(tmp_path: Path, text: str = ENTRY) -> Path:
    path = tmp_path / "my.yaml"
    path.write_text(text)
    return path


def test_every_catalogue_entry_has_positive_figures_and_a_source_for_each():
    entries = catalogue()
    for name in ("h100-80gb", "h100-pcie", "b200", "gb200", "l40s", "t4", "v100-16gb", "mi325x", "tpu-v6e", "gaudi3"):
        assert name in entries
    for acc in entries.values():
        assert acc.flops > 0 and acc.bandwidth > 0 and acc.link > 0 and acc.network > 0 and acc.per_node >= 1
        assert acc.memory_bytes > 0  # cpu: this machine's memory (memory_gib is null in the file)
        assert set(acc.source) == set(FIGURES) and all(acc.source.values()), acc.name
    for name in ("t4", "v100-32gb", "v100-16gb"):
        assert "no bf16 tensor cores" in entries[name].source["flops"]


def test_names_are_case_insensitive():
    assert get_accelerator("H200").name == "h200"
    assert get_accelerator(" TPU-v5p ").name == "tpu-v5p"


def test_an_unknown_name_suggests_the_closest_ones():
    names = ", ".join(accelerators())
    with pytest.raises(PlanError) as excinfo:
        get_accelerator("H100")
    expected = f"unknown accelerator 'H100': did you mean h100-80gb, h100-pcie? --gpu takes one of {names}"
    assert str(excinfo.value) == expected
    with pytest.raises(PlanError) as excinfo:
        get_accelerator("zz")
    assert str(excinfo.value) == f"unknown accelerator 'zz'; --gpu takes one of {names}"


def test_a_gpu_spec_file_joins_the_catalogue(tmp_path):
    path = spec_file(tmp_path)
    mine = choose_accelerator(None, path)  # the file's one entry, without --gpu
    assert (mine.name, mine.title, mine.per_node, mine.source) == ("my-gpu", "My GPU 40GB", 4, {})
    assert mine.memory_bytes == round(39.0 * 2**30)
    assert choose_accelerator("MY-GPU", path) == mine and choose_accelerator("h200", path).name == "h200"
    assert choose_accelerator(mine) is mine
    two = spec_file(tmp_path, ENTRY + ENTRY.replace("my-gpu", "other"))
    with pytest.raises(PlanError, match=r"holds 2 accelerators: pick one with --gpu \(my-gpu, other\)"):
        choose_accelerator(None, two)


def test_gpu_spec_through_the_cli(tmp_path):
    path = spec_file(tmp_path)
    result = CliRunner().invoke(app, ["plan", "gpt-tiny", "--gpu-spec", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert '"name": "my-gpu"' in result.output


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            ENTRY.replace("  flops: 200e12\n", ""),
            "accelerator 'my-gpu': flops is missing; add it: dense bf16 FLOP/s per device, e.g. 989.4e12",
        ),
        (
            ENTRY.replace("flops: 200e12", "flops: fast"),
            "accelerator 'my-gpu': flops: input should be a valid number, unable to parse string as a number "
            "(got 'fast'); flops is dense bf16 FLOP/s per device, e.g. 989.4e12",
        ),
        (
            ENTRY.replace("per_node: 4", "per_node: 0"),
            "accelerator 'my-gpu': per_node: input should be greater than or equal to 1 (got 0); "
            "per_node is devices in a node, a whole number, e.g. 8",
        ),
        (
            ENTRY.replace("flops:", "flop:"),
            "2 problems\n  accelerator 'my-gpu': flops is missing; add it: dense bf16 FLOP/s per device, e.g. 989.4e12"
            "\n  accelerator 'my-gpu': flop is not a field; the fields are title, memory, memory_gib, flops, "
            "bandwidth, link, network, per_node, source",
        ),
    ],
)
def test_a_bad_gpu_spec_names_the_file_the_entry_and_the_field(tmp_path, text, problem):
    path = spec_file(tmp_path, text)
    with pytest.raises(PlanError) as excinfo:
        read_gpu_spec(path)
    assert str(excinfo.value) == f"{path}: {problem}"
    result = CliRunner().invoke(app, ["plan", "gpt-tiny", "--gpu-spec", str(path)])
    assert result.exit_code == 2 and problem.splitlines()[-1].strip() in result.output


def test_a_missing_or_clashing_gpu_spec_says_how_to_fix_it(tmp_path):
    missing = tmp_path / "nope.yaml"
    expected = (
        f"--gpu-spec {missing}: no such file; give a YAML file of accelerator entries in the format of "
        "zoo/data/accelerators.yaml"
    )
    with pytest.raises(PlanError) as excinfo:
        read_gpu_spec(missing)
    assert str(excinfo.value) == expected
    result = CliRunner().invoke(app, ["plan", "gpt-tiny", "--gpu-spec", str(missing)])
    assert result.exit_code == 2 and "no such file" in result.output
    clash = spec_file(tmp_path, ENTRY.replace("my-gpu", "H200"))
    with pytest.raises(PlanError, match=r"accelerator 'h200' is already known to zoo .*e.g. 'h200-custom'"):
        read_gpu_spec(clash)


def test_a_plugin_registers_an_accelerator_that_plan_uses(register_plugin):
    class Devices:
        @zoo.hookimpl
        def register_accelerators(self):
            return [{"name": "Test-NPU", **_entry()}]

    info = register_plugin(Devices(), "test-devices")
    assert info.ok and info.accelerators == ["test-npu"]
    assert get_accelerator("test-npu").title == "My GPU 40GB"
    p = plan("gpt-tiny", gpu="TEST-NPU", batch=2, seq_len=8)
    assert p.accelerator.name == "test-npu" and p.fits


def test_a_plugin_with_a_bad_or_taken_accelerator_fails_whole(register_plugin):
    class Taken:
        @zoo.hookimpl
        def register_accelerators(self):
            return [Accelerator("h200", "Mine", "1 GB", 2**30, 1e12, 1e9, 1e9, 1e9, 1, {})]

    with pytest.warns(plugins.PluginWarning, match="accelerator 'h200' is registered twice: by zoo's catalogue"):
        info = register_plugin(Taken(), "test-taken")
    assert info.status == "failed" and "test-taken" not in str(accelerators())

    class Bad:
        @zoo.hookimpl
        def register_accelerators(self):
            return [{"name": "bad", **_entry(), "bandwidth": -1}]

    with pytest.warns(plugins.PluginWarning, match="accelerator 'bad': bandwidth: input should be greater than 0"):
        info = register_plugin(Bad(), "test-bad")
    assert info.status == "failed" and "bad" not in accelerators()


def _entry() -> dict:
    import yaml

    return yaml.safe_load(ENTRY)["my-gpu"]
