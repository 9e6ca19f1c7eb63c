"""``zoo bench``: the grid of cells, the bounds computed from the rates, refusals, and the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import zoo
from zoo.analysis.flops import flop_estimate
from zoo.analysis.parts import model_parts
from zoo.bench import DeviceRates, bench, measure_rates
from zoo.errors import ArgumentError, TrainError

RATES = DeviceRates("cpu", "float32", bandwidth=2e9, matmul=5e9)
"""Stated rates: the bounds are then exact functions of the model and the cell."""


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return zoo.build("gpt-tiny").eval()


def test_every_cell_of_the_grid_is_timed_and_bounded_by_the_stated_rates(model):
    report = bench(model, batches=(1, 3), prompts=(5, 9), new=6, rates=RATES)
    assert [(c.prompt, c.batch) for c in report.cells] == [(5, 1), (5, 3), (9, 1), (9, 3)]
    r = model.recipe
    params = sum(p.numel() for p in model.parameters())  # tied: the head is the embedding, counted once
    assert report.parameters == params and report.weight_bytes == 4 * params
    for c in report.cells:
        assert c.new == 6 and c.ttft_s > 0 and c.tpot_start_s > 0 and c.tpot_end_s > 0 and c.tokens_per_s > 0
        assert c.prompt <= c.start_position < c.end_position < c.prompt + c.new
        # keys and values of every layer, for the prompt and the new tokens, in fp32
        assert c.cache_bytes == 2 * r.num_layers * c.batch * (c.prompt + c.new) * r.d_model * 4
        memory = (report.weight_bytes + c.cache_bytes) / RATES.bandwidth
        assert c.decode_bound_s == max(memory, 2 * params * c.batch / RATES.matmul)
        flops = flop_estimate(model_parts(model), seq_len=c.prompt, batch=c.batch).forward_per_batch
        assert c.prefill_bound_s == flops / RATES.matmul
        assert c.decode_efficiency == c.decode_bound_s / c.tpot_end_s
        assert c.prefill_tokens_per_s == c.batch * c.prompt / c.ttft_s


def test_the_rates_are_measured_on_the_device():
    rates = measure_rates("cpu", torch.float32, seconds=0.01)
    assert rates.device == "cpu" and rates.dtype == "float32" and rates.bandwidth > 1e8 and rates.matmul > 1e8


def test_bad_grids_and_prompts_past_the_positions_are_refused(model):
    with pytest.raises(ArgumentError, match=r"batch size 0 is outside 1 \.\. 4096"):
        bench(model, batches=(0,), rates=RATES)
    with pytest.raises(ArgumentError, match="at least 2 new tokens"):
        bench(model, new=1, rates=RATES)
    with pytest.raises(TrainError, match=r"a prompt of 120 and 16 new tokens make 136 positions; 'gpt-tiny' has 128"):
        bench(model, prompts=(120,), new=16, rates=RATES)
    with pytest.raises(TrainError, match="does not generate"):
        bench(zoo.build("vit-tiny"), rates=RATES)


def zoo_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "80"}
    return subprocess.run([sys.executable, "-m", "zoo.cli", *args], capture_output=True, text=True, env=env)


@pytest.mark.slow
def test_zoo_bench_renders_at_80_columns_and_as_json(tmp_path):
    done = zoo_cli("bench", "gpt-tiny", "--batch", "1,2", "--prompt", "8", "--new", "4")
    assert done.returncode == 0, done.stderr
    assert "Prefill: time to first token" in done.stdout and "Decode: time per output token" in done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) <= 80
    folder = tmp_path / "model"
    assert zoo_cli("build", "llama-tiny", "--out", str(folder)).returncode == 0
    as_json = zoo_cli("bench", str(folder), "--prompt", "4,6", "--new", "3", "--json")
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["model"] == "llama-tiny" and [c["prompt"] for c in data["cells"]] == [4, 6]
    assert data["rates"]["bandwidth"] > 0 and all(c["decode_bound_s"] > 0 for c in data["cells"])


@pytest.mark.slow
def test_zoo_bench_errors_render_without_a_traceback():
    bad = zoo_cli("bench", "gpt-tiny", "--batch", "1,x")
    assert bad.returncode == 2 and "--batch takes comma-separated whole numbers" in bad.stderr
    assert "Traceback" not in bad.stderr
    long = zoo_cli("bench", "gpt-tiny", "--prompt", "200")
    assert long.returncode == 2 and "'gpt-tiny' has 128" in long.stderr
