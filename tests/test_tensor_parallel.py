"""Tensor parallelism and device meshes: ``train.parallel: {replicate, shard, tensor}``; each component's own plan
(``shard_tensor``) and the refusals of what cannot split; and, under torchrun (gloo, 4 CPU processes), gpt-tiny,
llama-tiny, moe-tiny and t5-tiny trained on three meshes following the single-process run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fake_ranks import fake_ranks

from zoo.builder import build
from zoo.errors import RecipeError, TrainError
from zoo.recipe import load_recipe
from zoo.tensor_parallel import TensorPlanError
from zoo.train import checkpoint as ckpt
from zoo.train import read_metrics, train
from zoo.train.distributed import Distributed, choose_layout
from zoo.train.objectives import loss_weight
from zoo.train.tensor import parallelize, uncovered

SETTINGS = {
    "train.steps": 20,
    "train.batch_size": 4,
    "train.seq_len": 32,
    "train.lr": 3e-3,
    "train.warmup_steps": 2,
    "train.log_interval": 1,
    "train.eval_interval": 10,
    "train.eval_batches": 2,
    "train.checkpoint_interval": 20,
}
MODELS = ("gpt-tiny", "llama-tiny", "moe-tiny", "t5-tiny")
MESHES = {
    "tp2-fsdp2": {"tensor": 2, "shard": 2},
    "fsdp4": {"shard": 4},
    "hsdp2x2": {"replicate": 2, "shard": 2},
}
SEQUENCE = {"tensor": 2, "shard": 2, "sequence": True}
"""Sequence parallelism too, for the decoders (t5-tiny's targets, 11 positions with [eos], do not split in two)."""


# ---------------------------------------------------------------------------------------------- the mesh setting


def test_a_mesh_is_a_recipe_setting():
    recipe = load_recipe("gpt-tiny", **{"train.parallel": {"replicate": 1, "shard": 2, "tensor": 2}})
    assert (recipe.train.parallel.shard, recipe.train.parallel.tensor, recipe.train.parallel.world_size) == (2, 2, 4)
    assert load_recipe("gpt-tiny", **{"train.parallel": "fsdp"}).train.parallel == "fsdp"  # the names still work
    with pytest.raises(RecipeError, match="pipeline"):
        load_recipe("gpt-tiny", **{"train.parallel": {"pipeline": 2}})
    with pytest.raises(RecipeError, match=r"a mesh says it itself: \{replicate: nodes, shard: processes per node\}"):
        load_recipe("gpt-tiny", **{"train.parallel": {"shard": 2}, "train.fsdp_sharding": "hybrid"})
    with pytest.raises(RecipeError, match=r"fsdp_offload offloads FSDP2's shards, and parallel \{replicate: 2"):
        load_recipe("gpt-tiny", **{"train.parallel": {"replicate": 2}, "train.fsdp_offload": True})


def test_the_layout_of_each_setting():
    model = torch.nn.Linear(2, 2)
    four = Distributed(rank=3, world_size=4)
    mesh = load_recipe("gpt-tiny", **{"train.parallel": {"replicate": 2, "tensor": 2}}).train.parallel
    layout = choose_layout(model, four, mesh)
    assert (layout.strategy, layout.data, layout.data_rank(3)) == ("fsdp", 2, 1)  # HSDP of shard 1 over TP
    assert choose_layout(model, four, "ddp").replicate == 4
    assert str(choose_layout(model, four, "fsdp")) == "{replicate: 1, shard: 4, tensor: 1}"
    assert choose_layout(model, Distributed(), "auto").strategy == "none"


def test_a_mesh_of_another_size_than_the_world_is_refused(tmp_path):
    with pytest.raises(TrainError) as info:
        train("gpt-tiny", out=tmp_path / "run", device="cpu", **{**SETTINGS, "train.parallel": {"tensor": 2}})
    assert str(info.value) == (
        "train.parallel {replicate: 1, shard: 1, tensor: 2} needs replicate x shard x tensor = 2 processes, and this "
        "run has one process (no torchrun): start torchrun with --nproc-per-node 2 (all nodes together), or change "
        "the mesh to multiply to the number of processes"
    )


# ---------------------------------------------------------------------------------------------- the plans


@pytest.mark.parametrize("name", [*MODELS, "bert-tiny", "roberta-tiny", "mt5-tiny", "bart-tiny", "m2m100-tiny"])
def test_every_builtin_component_of_these_models_declares_a_plan(name):
    assert uncovered(build(load_recipe(name))) == []


def test_a_module_with_weights_and_no_plan_is_refused_by_name():
    model = build(load_recipe("gpt-tiny"))
    model.blocks[0].extra = torch.nn.Linear(64, 64)  # weights no component's plan covers
    with pytest.raises(TrainError) as info:
        with fake_ranks(2) as mesh:
            parallelize(model, mesh)
    assert str(info.value) == (
        "train.parallel tensor 2: blocks.0.extra (Linear) declares no tensor-parallel plan (a `shard_tensor` method "
        "on its module, see zoo.tensor_parallel); train this model with tensor: 1"
    )


REFUSED = [
    (
        "gpt-tiny",
        {},
        3,
        "train.parallel tensor 3: blocks.0.attention: attention of 4 heads: tensor parallelism over 3 ranks splits "
        "num_heads (4) and num_kv_heads (4), which must be divisible by 3: choose a tensor size that divides 4, 4",
    ),
    (
        "llama-tiny",
        {"attention": {"type": "mqa", "num_heads": 4, "bias": False}},
        2,
        "train.parallel tensor 2: blocks.0.attention: attention of 4 heads: tensor parallelism over 2 ranks splits "
        "num_kv_heads (1), which must be divisible by 2: choose a tensor size that divides 4, 1",
    ),
    (
        "llama-tiny",
        {"attention": {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "sinks": True}},
        2,
        "train.parallel tensor 2: blocks.0.attention: attention of 4 heads: sinks (one learned logit per head) has no "
        "tensor-parallel plan; train it with tensor: 1 (data parallelism: shard or replicate), not tensor: 2",
    ),
    (
        "llama-tiny",
        {"ffn": {"type": "swiglu", "hidden": 175}},
        2,
        "train.parallel tensor 2: blocks.0.ffn: GatedMLP of hidden width 175: tensor parallelism over 2 ranks splits "
        "hidden (175), which must be divisible by 2: choose a tensor size that divides 175",
    ),
    (
        "gpt-tiny",
        {"vocab_size": 255},
        2,
        "train.parallel tensor 2: embedding: token embedding: tensor parallelism over 2 ranks splits vocab_size (255), "
        "which must be divisible by 2: choose a tensor size that divides 255",
    ),
    (
        "moe-tiny",
        {
            "layers": [
                {
                    "select": "1::2",
                    "ffn": {"type": "moe", "num_experts": 3, "top_k": 2, "expert": {"type": "swiglu", "hidden": 96}},
                }
            ]
        },
        2,
        "train.parallel tensor 2: blocks.1.ffn: MoE of 3 experts: tensor parallelism over 2 ranks splits num_experts "
        "(3), which must be divisible by 2: choose a tensor size that divides 3",
    ),
]


@pytest.mark.parametrize(("name", "changes", "size", "message"), REFUSED, ids=lambda v: "")
def test_what_cannot_split_is_refused_by_name(name, changes, size, message):
    model = build(load_recipe(name, **changes))
    with pytest.raises(TrainError) as info, fake_ranks(size) as mesh:
        parallelize(model, mesh)
    assert str(info.value) == message


def test_plan_errors_are_value_errors_a_plugin_can_raise():
    assert issubclass(TensorPlanError, ValueError)


# ---------------------------------------------------------------------------------------------- the loss weights


def test_data_groups_weight_their_losses_by_their_share_of_the_positions():
    from zoo.train.objectives import Objective

    labels = torch.tensor([[1, 2, 3, -100], [4, -100, -100, -100], [5, 6, -100, -100], [7, 8, 9, 10]])
    batch, objective = {"labels": labels}, Objective("test", None)
    weights = [loss_weight(objective, batch, 2, rank) for rank in (0, 1)]
    assert weights == [4 * 2 / 10, 6 * 2 / 10]  # 4 and 6 of the 10 labelled positions
    assert loss_weight(objective, {"targets": torch.ones(4, 3)}, 2, 0) == 1.0  # every position counts: equal
    assert loss_weight(objective, batch, 1, 0) == 1.0


# ---------------------------------------------------------------------------------------------- 4 processes

WORKER = """
import json, os, sys
import torch.distributed as dist
from zoo.train import train
out, settings, runs = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
dist.init_process_group("gloo")  # one group for every run: each builds its own mesh from it
for name, label, mesh in runs:
    train(name, out=os.path.join(out, f"{name}-{label}"), device="cpu", **settings, **{"train.parallel": mesh})
dist.destroy_process_group()
"""


def torchrun(out: Path, processes: int, runs: list[tuple[str, str, dict]], settings: dict = SETTINGS) -> Path:
    """Each (model, label, mesh) of ``runs``, in one torchrun of ``processes`` processes (one start for all)."""
    script = out / "worker.py"
    script.write_text(WORKER)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(processes)]
    args = [str(out), json.dumps(settings), json.dumps(runs)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([*cmd, str(script), *args], env=env, capture_output=True, text=True, timeout=900)
    first_error = done.stderr.find("Traceback")
    assert done.returncode == 0, done.stderr[first_error : first_error + 4000] if first_error >= 0 else done.stderr
    return out


def assert_follows_one_process(
    runs: Path, name: str, labels: list[str], single: Path, settings: dict = SETTINGS
) -> None:
    """Each mesh's losses within 1e-5 of one process's, and its weights, read whole from the shards, close."""
    train(name, out=single, device="cpu", **settings)
    reference = [r for r in read_metrics(single) if r["split"] in ("train", "eval")]
    weights = ckpt.read_model_state(ckpt.latest_checkpoint(single))
    for label in labels:
        run = runs / f"{name}-{label}"
        records = [r for r in read_metrics(run) if r["split"] in ("train", "eval")]
        assert [(r["split"], r["step"]) for r in records] == [(r["split"], r["step"]) for r in reference]
        for got, want in zip(records, reference, strict=True):  # fp32: equal up to the order of sums
            assert abs(got["loss"] - want["loss"]) < 1e-5, (name, label, got["split"], got["step"])
        whole = ckpt.read_model_state(ckpt.latest_checkpoint(run))  # the shards, read as one state dict
        assert whole.keys() == weights.keys()
        for key, tensor in weights.items():
            torch.testing.assert_close(whole[key], tensor, rtol=0, atol=5e-5)  # AdamW magnifies sum order


@pytest.fixture(scope="module")
def four_process_runs(tmp_path_factory) -> Path:
    runs = [(name, label, mesh) for name in MODELS for label, mesh in MESHES.items()]
    runs += [(name, "tp2-sp-fsdp2", SEQUENCE) for name in MODELS if name != "t5-tiny"]
    return torchrun(tmp_path_factory.mktemp("meshes"), 4, runs)


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_every_mesh_follows_one_process(four_process_runs, tmp_path, name):
    labels = [*MESHES, *(["tp2-sp-fsdp2"] if name != "t5-tiny" else [])]
    assert_follows_one_process(four_process_runs, name, labels, tmp_path / "single")
    assert ckpt.read_info(ckpt.latest_checkpoint(four_process_runs / f"{name}-fsdp4"))["world_size"] == 4


@pytest.mark.slow
def test_the_plugin_attentions_split_as_they_declare(tmp_path):
    """zoo-sliding-window (GQA's plan, inherited) and zoo-retnet (its own: heads, decays, group-norm channels),
    with sequence parallelism."""
    plugins = ("mistral-tiny", "retnet-tiny")
    # retnet-tiny at train.lr 3e-3 spikes (gradient norms of 12 and 144 by step 13), which magnifies the order of
    # sums past 1e-5; at 1e-3 it trains smoothly.
    settings = {**SETTINGS, "train.lr": 1e-3}
    runs = torchrun(tmp_path, 2, [(name, "tp2", {"tensor": 2, "sequence": True}) for name in plugins], settings)
    for name in plugins:
        assert_follows_one_process(runs, name, ["tp2"], tmp_path / f"single-{name}", settings)


def test_each_component_splits_as_it_declares():
    model = build(load_recipe("moe-tiny"))
    with fake_ranks(2) as mesh:
        parallelize(model, mesh)
        attention, moe = model.blocks[0].attention, model.blocks[1].ffn
        assert (attention.num_heads, attention.num_kv_heads) == (2, 1)  # this rank's heads
        assert attention.q_proj.weight.to_local().shape == (32, 64)  # column-wise: its heads' rows
        assert attention.o_proj.weight.to_local().shape == (64, 32)  # row-wise: its heads' columns
        assert model.blocks[0].ffn.down_proj.weight.to_local().shape == (64, 88)  # SwiGLU hidden 176 / 2
        assert moe.local_experts == range(0, 2) and moe.experts.down_proj.to_local().shape == (2, 64, 96)
        assert not hasattr(moe.router.weight, "to_local")  # every rank routes alike
        assert model.embedding.token.weight.to_local().shape == (128, 64)  # the vocabulary, split
        assert model.head.proj.weight is model.embedding.token.weight  # and still tied
        assert not hasattr(model.blocks[0].attention_norm.weight, "to_local")  # norms stay whole


MLA = {
    "type": "mla",
    "num_heads": 4,
    "q_lora_rank": 16,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 8,
    "qk_rope_head_dim": 8,
    "v_head_dim": 8,
}
SHARED = {"type": "moe", "num_experts": 4, "top_k": 2, "expert": {"type": "swiglu", "hidden": 96}}
SHARED["shared_expert"] = {"type": "swiglu", "hidden": 64}
SPLITS = {  # recipe, overrides: components and options beyond the four trained above
    "mla": ("llama-tiny", {"attention": MLA}),
    "mla-no-q-latent": ("llama-tiny", {"attention": {**MLA, "q_lora_rank": None}}),
    "qk-norm": ("llama-tiny", {"attention.qk_norm": "rmsnorm"}),
    "shared-expert": (
        "moe-tiny",
        {
            "layers": [
                {
                    "select": "1::2",
                    "ffn": {
                        "type": "moe",
                        "num_experts": 4,
                        "top_k": 2,
                        "expert": {"type": "swiglu", "hidden": 96},
                        "shared_expert": {"type": "swiglu", "hidden": 64},
                    },
                }
            ]
        },
    ),
    "untied-mlp-gelu": ("gpt-tiny", {"head.tie_embeddings": False}),
    "bert-mlm": ("bert-tiny", {"embedding.padding_idx": None}),  # (a padding row is refused)
    "t5": ("t5-tiny", {}),
}
SPLIT_WORKER = """
import copy, json, sys
import torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from zoo.builder import build
from zoo.recipe import load_recipe
from zoo.train.tensor import WholeLogits, parallelize
dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
out = {}
for label, (name, overrides) in json.loads(sys.argv[2]).items():
    torch.manual_seed(0)
    whole = build(load_recipe(name, **overrides))
    split = copy.deepcopy(whole)
    parallelize(split, mesh)
    ids = torch.randint(1, 200, (2, 12))
    seq2seq = "decoder_input_ids" in whole.forward.__code__.co_varnames
    inputs = {"input_ids": ids, **({"decoder_input_ids": ids[:, :7]} if seq2seq else {})}
    a, b = WholeLogits(split)(**inputs).logits, whole(**inputs).logits
    a.float().pow(2).mean().backward()
    b.float().pow(2).mean().backward()
    grads, largest = 0.0, 0.0  # the largest difference, relative to the largest gradient
    for (n, p), (_, q) in zip(split.named_parameters(), whole.named_parameters(), strict=True):
        if q.grad is None:
            continue
        g = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
        grads, largest = max(grads, (g - q.grad).abs().max().item()), max(largest, q.grad.abs().max().item())
    out[label] = {"logits": (a - b).abs().max().item(), "grads": grads / largest}
if dist.get_rank() == 0:
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_split_models_compute_what_whole_ones_do(tmp_path):
    """On 2 ranks: logits of each split model equal the whole model's, and so do its gradients (gathered)."""
    script, result = tmp_path / "split.py", tmp_path / "split.json"
    script.write_text(SPLIT_WORKER)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([*cmd, str(result), json.dumps(SPLITS)], env=env, capture_output=True, text=True)
    first_error = done.stderr.find("Traceback")
    assert done.returncode == 0, done.stderr[first_error : first_error + 4000] if first_error >= 0 else done.stderr
    for label, diff in json.loads(result.read_text()).items():
        assert diff["logits"] < 1e-5 and diff["grads"] < 1e-5, (label, diff)
