"""``zoo plan`` and the memory it predicts: a training step traced on fake tensors against the same step
measured on real ones (live tensor bytes, ``zoo.analysis.live.LiveBytes``, the same instrument for both),
activation checkpointing that changes memory but not results, and the plan's errors."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import zoo
from zoo.analysis.live import LiveBytes
from zoo.analysis.plan import Plan, accelerators, get_accelerator, plan
from zoo.analysis.steptrace import compose, trace_step
from zoo.architectures.blocks import set_activation_checkpointing
from zoo.errors import PlanError
from zoo.recipe import load_recipe
from zoo.train.loop import Trainer

FAMILIES = ["gpt-tiny", "bert-tiny", "t5-tiny", "vit-tiny", "llama-tiny", "moe-tiny"]
SMALL = {"train.batch_size": 8}  # the recipes' own shapes, a smaller batch: the same kernels, quicker steps
TOLERANCE = 0.10


def small_recipe(name: str, precision: str, checkpointing: str, **more):
    overrides = {**SMALL, "train.precision": precision, "train.activation_checkpointing": checkpointing, **more}
    if name not in ("t5-tiny", "vit-tiny"):
        overrides["train.seq_len"] = 64
    if checkpointing == "every_k":
        overrides["train.checkpoint_every"] = 2
    return load_recipe(name, **overrides)


def predicted_peak(recipe) -> int:
    t = recipe.train
    seq = recipe.max_len if recipe.architecture == "vit" else (t.seq_len or recipe.max_len)
    trace = trace_step(
        recipe,
        micro_batch=t.batch_size,
        seq_len=seq,
        precision=t.precision,
        checkpointing=t.activation_checkpointing,
        checkpoint_every=t.checkpoint_every,
    )
    timeline = compose(trace)
    return trace.weights + trace.optimizer + int(timeline.total.max())


def measured_peak(recipe, run: Path) -> int:
    """Live tensor bytes at the peak of the trainer's second step (the optimizer state exists by then)."""
    trainer = Trainer(recipe, data=None, out=run, device="cpu", resume=False, callback=None)
    try:
        trainer.train_step(1)
        with LiveBytes(trainer.model, trainer.optimizer) as live:
            trainer.train_step(2)
        return live.peak
    finally:
        trainer.close()


@pytest.mark.parametrize("name", ["gpt-tiny", "moe-tiny"])
def test_live_bytes_agrees_with_torchs_mem_tracker(name):
    """The instrument: the same peak as ``torch.distributed._tools.mem_tracker.MemTracker`` on a real step."""
    from torch.distributed._tools.mem_tracker import MemTracker

    from zoo.train.loop import parameter_groups

    torch.manual_seed(0)
    model = zoo.build(name).train()
    optimizer = torch.optim.AdamW(parameter_groups(model, 0.1), fused=True)
    ids = torch.randint(0, 200, (8, 64))

    def step() -> None:
        model(ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()
    tracker = MemTracker()
    tracker.track_external(model, optimizer)
    with tracker:
        step()
    with LiveBytes(model, optimizer) as live:
        step()
    assert live.peak == tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]
    assert live.peak_phase in ("forward", "backward", "optimizer")


def test_meta_tensors_run_as_cpu_tensors_without_memory():
    """The plan's fake tensors: CPU autocast applies to them, views share their storage, nothing is allocated."""
    from zoo.analysis.metatensor import MetaMode, MetaTensor

    with MetaMode():
        x = torch.zeros(8, 64)
        weight = torch.nn.Parameter(torch.empty(32, 64))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.nn.functional.linear(x, weight)
        view = x.view(64, 8)[2:]
        made = [torch.arange(10), torch.rand(3, 3), torch.full((2,), 1.0), torch.scalar_tensor(2.0), x.clone()]
        y.float().sum().backward()
    assert isinstance(y, MetaTensor) and y.dtype == torch.bfloat16 and y.shape == (8, 32)
    assert x.device == torch.device("cpu") and not x.is_meta and x.untyped_storage().device.type == "meta"
    assert view.untyped_storage() is x.untyped_storage()
    assert all(isinstance(t, MetaTensor) and t.untyped_storage().device.type == "meta" for t in made)
    assert isinstance(weight.grad, MetaTensor) and weight.grad.shape == weight.shape
    with MetaMode(), pytest.raises(RuntimeError, match="meta"):
        torch.zeros(3).sum().item()  # no values


@pytest.mark.slow
def test_tracing_a_step_does_not_import_torch_dynamo():
    code = (
        "import sys, torch\n"
        "from zoo.analysis.steptrace import trace_step\n"
        "from zoo.recipe import load_recipe\n"
        "trace_step(load_recipe('moe-tiny'), micro_batch=2, seq_len=16, precision='bf16')\n"
        "print('torch._dynamo' in sys.modules, 'torch.distributed.tensor' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False False"  # seconds and 0.8 s to import: longer than the trace


def test_meta_operators_keep_their_tensors_and_follow_metadata_changes():
    """In-place operators return the MetaTensor they were given; one that changes sizes or strides (in place,
    or by resizing an ``out=``) changes the MetaTensor's, and later operators see them."""
    from zoo.analysis.metatensor import MetaMode, MetaTensor

    with MetaMode():
        x = torch.zeros(4, 6)
        same = [x.add_(1), x.mul_(2), x.uniform_(), x.copy_(torch.ones(6)), x.zero_()]
        y = torch.zeros(4, 6)
        y.unsqueeze_(0)
        y_after = y + torch.zeros(1, 4, 6)
        z = torch.zeros(4, 6)
        z.t_()
        out = torch.empty(0)
        returned = torch.add(torch.zeros(2, 3), 1.0, out=out)
        r = torch.zeros(3)
        r.resize_(2, 5)
        r_after = r.sum(0)
    assert all(t is x for t in same) and x.shape == (4, 6)
    assert y.shape == (1, 4, 6) and y_after.shape == (1, 4, 6)
    assert z.shape == (6, 4) and z.stride() == (1, 6)
    assert returned is out and isinstance(out, MetaTensor) and out.shape == (2, 3)
    assert r.shape == (2, 5) and r_after.shape == (5,)
    with MetaMode(), pytest.raises(RuntimeError):
        torch.zeros(4, 6).copy_(torch.ones(5))  # a shape that does not broadcast is refused, as on the CPU


@pytest.mark.parametrize("checkpointing", ["none", "every"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("name", FAMILIES)
def test_predicted_peak_is_within_ten_percent_of_the_measured_step(tmp_path, name, precision, checkpointing):
    recipe = small_recipe(name, precision, checkpointing)
    predicted, measured = predicted_peak(recipe), measured_peak(recipe, tmp_path / "run")
    assert abs(predicted / measured - 1) < TOLERANCE, (predicted, measured)


@pytest.mark.parametrize("name", ["gpt-tiny", "llama-tiny", "t5-tiny", "moe-tiny"])
@pytest.mark.parametrize("mode", ["every", "every_k", "attention"])
def test_checkpointing_keeps_loss_and_gradients(name, mode):
    torch.manual_seed(0)
    model = zoo.build(name).train()
    batch = {
        "input_ids": torch.randint(1, 200, (4, 24)),
        "labels": torch.randint(1, 200, (4, 24 + (name == "t5-tiny"))),
    }

    def step(checkpointing: str) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        m = copy.deepcopy(model)
        set_activation_checkpointing(m, checkpointing, 2)
        torch.manual_seed(1)  # the same dropout masks
        loss = m(**batch).loss
        loss.backward()
        return loss.detach(), {k: p.grad for k, p in m.named_parameters() if p.grad is not None}

    loss, grads = step("none")
    loss_ck, grads_ck = step(mode)
    torch.testing.assert_close(loss_ck, loss, rtol=1e-6, atol=1e-6)
    assert grads_ck.keys() == grads.keys()
    for key, grad in grads.items():
        torch.testing.assert_close(grads_ck[key], grad, rtol=1e-5, atol=1e-6, msg=key)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("name", ["gpt-tiny", "llama-tiny"])
def test_checkpointing_saves_the_share_of_memory_the_plan_predicted(tmp_path, name, precision):
    predicted, measured = {}, {}
    for mode in ("none", "every", "attention"):
        recipe = small_recipe(name, precision, mode, **{"num_layers": 4})
        predicted[mode] = predicted_peak(recipe)
        measured[mode] = measured_peak(recipe, tmp_path / mode)
    for mode in ("every", "attention"):
        saved_predicted = 1 - predicted[mode] / predicted["none"]
        saved_measured = 1 - measured[mode] / measured["none"]
        assert saved_measured > 0.05, (mode, measured)
        assert abs(saved_predicted - saved_measured) < 0.02, (mode, saved_predicted, saved_measured)


def test_composing_one_block_of_each_kind_equals_tracing_every_block():
    recipe = load_recipe(
        "llama-tiny", num_layers=5, **{"train.activation_checkpointing": "every_k", "train.checkpoint_every": 2}
    )
    kwargs = dict(micro_batch=2, seq_len=32, precision="bf16", checkpointing="every_k", checkpoint_every=2)
    reduced, whole = trace_step(recipe, **kwargs), trace_step(recipe, whole=True, **kwargs)
    assert sorted(set(reduced.full_blocks[""])) == ["blocks.0", "blocks.1"]  # checkpointed, not checkpointed
    assert whole.reduced_weights == whole.weights and whole.reduced_optimizer == whole.optimizer
    for trace in (reduced, whole):
        t = compose(trace)
        trace.composed = trace.weights + trace.optimizer + int(t.total.max())
    assert whole.composed == whole.traced_peak
    assert reduced.composed == pytest.approx(whole.traced_peak, rel=1e-3)  # first and last blocks differ slightly


def test_activations_scale_with_the_micro_batch():
    recipe = load_recipe("gpt-tiny")
    one = compose(trace_step(recipe, micro_batch=2, seq_len=64))
    two = compose(trace_step(recipe, micro_batch=4, seq_len=64))
    assert len(one.activations) == len(two.activations)
    transient_one = (one.activations + one.temporaries).max()  # casts of weights: one copy at any batch
    transient_two = (two.activations + two.temporaries).max()
    assert transient_two == pytest.approx(2 * transient_one, rel=0.01)
    assert one.gradients.max() == two.gradients.max()


def test_plan_breaks_the_peak_down_and_finds_the_largest_micro_batch():
    p = plan("gpt-tiny", gpu="l4", batch=8, seq_len=128)
    m = p.memory
    assert p.fits and p.strategy == "none" and p.precision == "bf16"
    assert m.weights >= p.parameters * 4  # fp32, each tensor rounded up to the allocator's 512 bytes
    assert m.optimizer >= 2 * p.parameters * 4
    assert m.needed == m.peak + m.reserve and m.reserve > 1 << 30  # the CUDA context at least
    assert p.max_micro_batch > 8
    # Traced at 8 and scaled: the largest fits when traced at its own size, and 2% more does not.
    fits = plan("gpt-tiny", gpu="l4", batch=p.max_micro_batch, seq_len=128)
    too_big = plan("gpt-tiny", gpu="l4", batch=round(p.max_micro_batch * 1.02), seq_len=128)
    assert fits.fits and not too_big.fits
    assert too_big.advice and "does not fit" in too_big.advice[0]
    names = [u.name for u in p.units]
    assert "blocks.0-1" in names and names[-1] == "head and loss"
    assert p.time.tokens_per_step == 8 * 128 and p.time.step_s >= p.time.roofline_s > 0
    assert p.serving.kv_bytes_per_token == 2 * 2 * 64 * 2  # K and V, 2 layers, E=64, bf16
    assert json.loads(json.dumps(p.to_dict()))["memory"]["peak"] == m.peak


def test_sharding_divides_the_state_and_offload_moves_it_to_the_cpu():
    ddp = plan("gpt2-small", gpu="h100-80gb", gpus=8, batch=8, seq_len=256, parallel="ddp")
    fsdp = plan("gpt2-small", gpu="h100-80gb", gpus=8, batch=8, seq_len=256, parallel="fsdp")
    offload = plan("gpt2-small", gpu="h100-80gb", gpus=8, batch=8, seq_len=256, parallel="fsdp", offload=True)
    hybrid = plan("gpt2-small", gpu="h100-80gb", gpus=16, batch=16, seq_len=256, parallel="fsdp", sharding="hybrid")
    assert fsdp.memory.optimizer == pytest.approx(ddp.memory.optimizer / 8, rel=1e-3)
    assert fsdp.memory.weights == pytest.approx(ddp.memory.weights / 8, rel=1e-3)
    assert fsdp.memory.gathered > 0 and fsdp.memory.peak < ddp.memory.peak
    assert offload.memory.weights == offload.memory.optimizer == 0 and offload.memory.offloaded > 0
    assert hybrid.memory.optimizer == pytest.approx(fsdp.memory.optimizer, rel=1e-3)  # shards within a node of 8
    assert ddp.time.comm_bytes == pytest.approx(2 * 7 / 8 * ddp.parameters * 4, rel=1e-3)
    assert fsdp.time.comm_s > 0 and hybrid.time.comm_s > fsdp.time.comm_s  # across nodes: the slower network


def test_a_model_that_does_not_fit_at_micro_batch_one_is_a_clear_error():
    p = plan("llama-3-70b", gpu="h100-80gb", gpus=1, batch=1, seq_len=1024)
    assert not p.fits and p.max_micro_batch == 0 and p.advice
    with pytest.raises(
        PlanError,
        match=r"llama-3-70b does not fit on 1 x h100-80gb: at micro-batch 1 a device needs .*--checkpointing every",
    ):
        p.check()
    casts = sum(u.casts_each * u.count for u in p.units)  # bf16 copies of the weights, kept for the backward
    assert casts == pytest.approx(2 * p.parameters, rel=0.05)


def test_unknown_accelerators_zero_devices_and_uneven_batches_are_refused():
    with pytest.raises(PlanError) as excinfo:
        get_accelerator("h900")
    for known in ("h100-80gb", "h200", "a100-80gb", "a100-40gb", "l4", "mi300x", "cpu"):
        assert known in str(excinfo.value)
    with pytest.raises(PlanError, match="--gpus must be at least 1"):
        plan("gpt-tiny", gpus=0)
    with pytest.raises(PlanError, match="must split evenly"):
        plan("gpt-tiny", gpus=3, batch=8)
    with pytest.raises(PlanError, match="--mfu"):
        plan("gpt-tiny", mfu=1.5)


def test_accelerator_figures_name_their_source():
    for acc in accelerators().values():
        assert acc.memory_bytes > 0 and acc.flops > 0 and acc.bandwidth > 0 and acc.link > 0
        assert set(acc.source) == {"memory", "flops", "bandwidth", "link", "network"}
        assert all(acc.source.values())


def test_checkpointing_options_are_validated():
    from zoo.errors import RecipeError

    with pytest.raises(RecipeError, match="every_k needs checkpoint_every"):
        load_recipe("gpt-tiny", **{"train.activation_checkpointing": "every_k"})
    with pytest.raises(RecipeError, match="checkpoint_every .* applies to activation_checkpointing: every_k"):
        load_recipe("gpt-tiny", **{"train.checkpoint_every": 2})
    with pytest.raises(RecipeError, match="apply to parallel: fsdp"):
        load_recipe("gpt-tiny", **{"train.parallel": "ddp", "train.fsdp_offload": True})


def zoo_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "80"}
    return subprocess.run([sys.executable, "-m", "zoo.cli", *args], capture_output=True, text=True, env=env)


@pytest.mark.slow
def test_zoo_plan_renders_at_80_columns_and_as_json():
    done = zoo_cli("plan", "gpt-tiny", "--gpu", "a100-40gb", "--gpus", "2", "--batch", "8", "--tokens", "1e9")
    assert done.returncode == 0, done.stderr
    for header in ("Memory per device", "Activations kept per unit", "Step time", "Serving"):
        assert header in done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) <= 80
    as_json = zoo_cli("plan", "gpt-tiny", "--gpu", "cpu", "--json")
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["fits"] and data["memory"]["peak"] > 0 and data["error"] is None


@pytest.mark.slow
def test_zoo_plan_errors_render_without_a_traceback():
    unknown = zoo_cli("plan", "gpt-tiny", "--gpu", "tpu")
    assert unknown.returncode == 2 and "unknown accelerator 'tpu'" in unknown.stderr and "h200" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    none = zoo_cli("plan", "gpt-tiny", "--gpus", "0")
    assert none.returncode == 2 and "--gpus must be at least 1" in none.stderr


@pytest.mark.slow
def test_zoo_plan_mixtral_on_eight_h100s_says_what_would_fit():
    done = zoo_cli("plan", "mixtral-8x7b", "--gpu", "h100-80gb", "--gpus", "8", "--batch", "8", "--seq", "4096")
    assert done.returncode == 2 and "does not fit on 8 x h100-80gb: at micro-batch 1 a device" in done.stderr
    assert "Memory per device" in done.stdout and "--checkpointing every" in done.stderr
    fits = zoo_cli(
        "plan", "mixtral-8x7b", "--gpu", "h100-80gb", "--gpus", "8", "--batch", "8", "--seq", "4096",
        "--checkpointing", "every", "--offload", "--json",
    )  # fmt: skip
    assert fits.returncode == 0, fits.stderr
    assert json.loads(fits.stdout)["max_micro_batch"] >= 1


FSDP_WORKER = """
import json, os, sys, warnings
warnings.simplefilter("ignore")
from zoo.analysis.live import LiveBytes
from zoo.recipe import load_recipe
from zoo.train.loop import Trainer
recipe = load_recipe("gpt-tiny", **{overrides!r})
trainer = Trainer(recipe, data=None, out=sys.argv[1], device="cpu", resume=False, callback=None)
trainer.train_step(1)
with LiveBytes(trainer.model, trainer.optimizer) as live:
    trainer.train_step(2)
with open(os.path.join(sys.argv[1], f"peak{{os.environ['RANK']}}.json"), "w") as f:
    json.dump(live.peak, f)
trainer.close()
"""


@pytest.mark.slow
def test_fsdp2_per_rank_peak_is_within_ten_percent_of_the_plan(tmp_path):
    overrides = {"train.parallel": "fsdp", "train.precision": "fp32", "train.activation_checkpointing": "every"}
    script = tmp_path / "worker.py"
    script.write_text(FSDP_WORKER.format(overrides=overrides))
    run = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        str(script),
        str(run),
    ]
    done = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    predicted: Plan = plan(load_recipe("gpt-tiny", **overrides), gpu="cpu", gpus=2)
    assert predicted.strategy == "fsdp"
    for rank in (0, 1):
        measured = json.loads((run / f"peak{rank}.json").read_text())
        assert abs(predicted.memory.peak / measured - 1) < TOLERANCE, (rank, predicted.memory.peak, measured)


TRAIN_WORKER = """
import json, os, sys, warnings
warnings.simplefilter("ignore")
from zoo.train import train
result = train("gpt-tiny", out=sys.argv[1], device="cpu", **json.loads(sys.argv[2]))
with open(os.path.join(sys.argv[1], f"loss{os.environ['RANK']}.json"), "w") as f:
    json.dump(result.train_loss, f)
"""


@pytest.mark.slow
def test_fsdp2_hybrid_sharding_cpu_offload_and_checkpointing_train_like_one_process(tmp_path):
    settings = {"train.steps": 4, "train.batch_size": 4, "train.seq_len": 32, "train.eval_interval": 0}
    settings["train.checkpoint_interval"] = 2  # writing a checkpoint gathers the offloaded shards
    options = {"train.parallel": "fsdp", "train.fsdp_sharding": "hybrid", "train.fsdp_offload": True}
    options["train.activation_checkpointing"] = "attention"
    script = tmp_path / "worker.py"
    script.write_text(TRAIN_WORKER)
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [*cmd, str(run), json.dumps({**settings, **options})], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-4000:]
    from zoo.train import train

    single = train("gpt-tiny", out=tmp_path / "single", device="cpu", **settings)
    for rank in (0, 1):
        assert json.loads((run / f"loss{rank}.json").read_text()) == pytest.approx(single.train_loss, rel=1e-4)


def test_the_readme_flagship_plan_assumes_4096_tokens_and_fits_and_says_so():
    """``zoo plan llama-3.2-1b --gpu h100-80gb --gpus 8`` (max_len 131,072, no train.seq_len) plans 4,096."""
    p = plan("llama-3.2-1b", gpu="h100-80gb", gpus=8)
    assert p.seq_len == 4096 and p.fits and p.error() is None
    assert "4,096 tokens per sequence: train.seq_len is unset (zoo train would take max_len, 131,072); --seq to " in (
        "\n".join(p.notes)
    )
    assert plan("llama-3.2-1b", gpu="h100-80gb", gpus=8, seq_len=2048).seq_len == 2048
    assert plan("gpt-tiny", gpu="cpu").seq_len == load_recipe("gpt-tiny").train.seq_len  # the training config's
    with pytest.raises(PlanError, match=r"--seq must be at least 1 \(got 0\): the tokens per sequence"):
        plan("gpt-tiny", gpu="cpu", seq_len=0)


def test_a_short_max_len_is_planned_whole_and_said_so():
    recipe = load_recipe("llama-tiny", **{"train.seq_len": None})
    p = plan(recipe, gpu="cpu")
    assert p.seq_len == recipe.max_len <= 4096
    assert f"train.seq_len is unset: max_len ({recipe.max_len:,}), as zoo train takes it" in "\n".join(p.notes)


def test_the_verdict_is_at_the_tables_micro_batch_and_names_micro_batch_one():
    p = plan("llama-3-70b", gpu="h100-80gb", gpus=1, batch=2, seq_len=1024)
    assert p.micro_batch == 2 and p.max_micro_batch == 0
    message = p.error()
    needed = f"{p.memory.needed / 2**30:.2f} GiB"
    assert f"at micro-batch 2 a device needs {needed} (weights" in message
    assert p.needed_at_one is not None and p.needed_at_one < p.memory.needed
    assert f"; micro-batch 1 needs {p.needed_at_one / 2**30:.2f} GiB" in message
    assert "even at micro-batch 1" not in message


def test_zero_gradients_at_the_peak_say_why(capsys):
    from zoo.cli.plan import _memory

    p = plan("gpt2-small", gpu="h100-80gb", gpus=1, seq_len=256)
    assert p.memory.gradients == 0
    from rich.console import Console

    console = Console(width=120, record=True)
    console.print(_memory(p))
    assert "gradients (none yet at the peak: the backward has made none)" in console.export_text()
