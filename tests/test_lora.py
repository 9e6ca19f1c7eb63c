"""LoRA (zoo.lora, train.lora, zoo train --lora, zoo export --merge-lora and the PEFT adapter folder).

Properties, on tiny models: an adapted model starts equal to its base; merging gives the adapted logits; only the
adapters train and the base weights stay bit-identical; a resumed LoRA run equals the uninterrupted one; a folder
with adapters loads back with them; PEFT loads the exported adapter folder onto the Hugging Face export with the
zoo model's logits; targets that match nothing, and adapters PEFT cannot express, are refused by name.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import zoo
from zoo.cli import app
from zoo.errors import ArgumentError, HFExportError, RecipeError
from zoo.lora import LoRALinear, adaptable_linears, apply_lora, lora_modules, merge_lora, select, strip_lora
from zoo.recipe.training import LoRAConfig

TINY = {"train.batch_size": 2, "train.seq_len": 16, "train.eval_interval": 0, "train.warmup_steps": 0}


def adapted(
    recipe: str = "llama-tiny", targets: tuple[str, ...] = ("all",), seed: int = 0, **overrides
) -> torch.nn.Module:
    """A tiny model with adapters whose B is not zero (a fresh adapter adds nothing)."""
    torch.manual_seed(seed)
    model = zoo.build(recipe, **overrides)
    apply_lora(model, LoRAConfig(rank=4, alpha=8, targets=list(targets)))  # what train.lora does in a run
    lora = LoRAConfig(rank=4, alpha=8, targets=list(targets))
    model.recipe = model.recipe.model_copy(update={"train": model.recipe.train.model_copy(update={"lora": lora})})
    for module in lora_modules(model).values():
        torch.nn.init.normal_(module.lora_B, std=0.05)
    return model.eval()


def logits(model: torch.nn.Module, ids: torch.Tensor, **kwargs) -> torch.Tensor:
    with torch.no_grad():
        return model(ids, **kwargs).logits


IDS = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(1))


def test_a_fresh_adapter_changes_nothing_and_shares_the_base_weight():
    torch.manual_seed(0)
    model = zoo.build("llama-tiny").eval()
    before = logits(model, IDS)
    q = model.blocks[0].attention.q_proj
    names = apply_lora(model, LoRAConfig(rank=4, targets=["attention"]))
    assert names[:4] == [f"blocks.0.attention.{p}_proj" for p in "qkvo"] and len(names) == 8
    assert isinstance(model.blocks[0].attention.q_proj, LoRALinear)
    assert model.blocks[0].attention.q_proj.weight is q.weight  # no copy of the base
    assert torch.equal(logits(model, IDS), before)  # B starts at zero


@pytest.mark.parametrize("recipe", ["llama-tiny", "gpt-tiny", "moe-tiny", "bert-tiny", "t5-tiny"])
def test_merged_logits_equal_unmerged(recipe):
    model = adapted(recipe)
    kwargs = {"decoder_input_ids": IDS[:, :5]} if recipe == "t5-tiny" else {}
    unmerged = logits(model, IDS, **kwargs)
    base = logits(strip_lora(adapted(recipe)), IDS, **kwargs)
    assert (unmerged - base).abs().max() > 1e-3  # the adapters do something
    merge_lora(model)
    assert not lora_modules(model) and model.recipe.train.lora is None
    assert all(type(m) is torch.nn.Linear for m in dict(adaptable_linears(model)).values() for m in m[1:])
    assert (logits(model, IDS, **kwargs) - unmerged).abs().max() <= 1e-5


def test_targets_select_kinds_and_names_and_refuse_what_matches_nothing():
    torch.manual_seed(0)
    model = zoo.build("llama-tiny")
    assert {n.rpartition(".")[2] for n in select(model, ["ffn"])} == {"gate_proj", "up_proj", "down_proj"}
    assert {n.rpartition(".")[2] for n in select(model, ["q_proj", "v_proj"])} == {"q_proj", "v_proj"}
    assert len(select(model, ["all"])) == len(adaptable_linears(model)) == 14
    with pytest.raises(RecipeError) as exc:
        select(model, ["router"])
    message = str(exc.value)
    assert "train.lora.targets" in message and "'router'" in message
    assert "q_proj, k_proj, v_proj, o_proj" in message and "gate_proj, up_proj, down_proj" in message
    with pytest.raises(RecipeError, match="no component of this model declares adaptable linears"):
        select(torch.nn.Sequential(torch.nn.Linear(2, 2)), ["all"])
    with pytest.raises(RecipeError, match="targets"):
        zoo.load_recipe("llama-tiny", **{"train.lora.targets": ["q proj"]})


def test_lora_flag_becomes_train_lora_and_refuses_bad_values():
    from zoo.cli.train import lora_overrides
    from zoo.recipe import parse_override

    assert lora_overrides("rank=16,alpha=32,targets=q_proj,v_proj") == [
        "train.lora.rank=16",
        "train.lora.alpha=32",
        "train.lora.targets=[q_proj, v_proj]",
    ]
    recipe = zoo.load_recipe("llama-tiny", **dict(map(parse_override, lora_overrides("rank=2,targets=ffn"))))
    assert recipe.train.lora == LoRAConfig(rank=2, targets=["ffn"])
    for bad, said in [("rank=0", "rank"), ("beta=2", "'beta=2'"), ("rank=2,rank=3", "'rank=3'"), ("alpha=x", "alpha")]:
        with pytest.raises(ArgumentError, match=said):
            lora_overrides(bad)


def train_lora(out: Path, steps: int, **extra) -> object:
    from zoo.train import train

    settings = {**TINY, "train.steps": steps, "train.lr": 1e-2, "train.lora": {"rank": 4, "alpha": 8}, **extra}
    return train("llama-tiny", out=out, device="cpu", **settings)


@pytest.mark.slow
def test_only_adapters_train_and_the_base_stays(tmp_path):
    result = train_lora(tmp_path / "run", 3)
    model = result.model
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(n.endswith(("lora_A", "lora_B")) for n in trainable)
    assert len(trainable) == 2 * 8  # q, k, v, o of two layers
    torch.manual_seed(0)
    base = zoo.build("llama-tiny").state_dict()  # the run's initialisation (train.seed 0)
    state = model.state_dict()
    assert all(torch.equal(base[n], state[n]) for n in base)
    assert all(m.lora_B.abs().max() > 0 for m in lora_modules(model).values())  # the adapters moved
    loaded = zoo.load(tmp_path / "run").eval()  # a run folder loads with its adapters
    assert len(lora_modules(loaded)) == 8
    assert torch.equal(logits(loaded, IDS), logits(model.eval(), IDS))


@pytest.mark.slow
def test_resumed_lora_run_equals_the_uninterrupted_one(tmp_path):
    import shutil

    from zoo.train import train

    settings = {**TINY, "train.steps": 4, "train.lr": 1e-2, "train.lora": {"rank": 4, "alpha": 8}}
    settings["train.checkpoint_interval"] = 2
    whole = train("llama-tiny", out=tmp_path / "whole", device="cpu", **settings).model.state_dict()
    cut = tmp_path / "cut"  # the same run, as if killed after its step-2 checkpoint
    shutil.copytree(tmp_path / "whole", cut)
    shutil.rmtree(cut / "checkpoints" / "step-00000004")
    (cut / "checkpoints" / "latest").write_text("step-00000002")
    assert not torch.equal(
        zoo.load(cut).state_dict()["blocks.0.attention.q_proj.lora_B"], whole["blocks.0.attention.q_proj.lora_B"]
    )
    resumed = train("llama-tiny", out=cut, device="cpu", resume=True, **settings).model.state_dict()
    assert set(resumed) == set(whole)
    assert all(torch.equal(resumed[n], whole[n]) for n in whole)
    changed = {**settings, "train.lora": {"rank": 8, "alpha": 8}}
    with pytest.raises(zoo.errors.TrainError, match="train.lora.rank: 4"):
        train("llama-tiny", out=cut, device="cpu", resume=True, allow_changes=True, **changed)


def saved(model: torch.nn.Module, folder: Path) -> Path:
    zoo.save(model, folder)
    return folder


def test_saved_adapters_load_back(tmp_path):
    model = adapted()
    loaded = zoo.load(saved(model, tmp_path / "m")).eval()
    assert set(lora_modules(loaded)) == set(lora_modules(model))
    assert torch.equal(logits(loaded, IDS), logits(model, IDS))


@pytest.mark.slow
def test_peft_loads_the_adapter_onto_the_hf_export(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from zoo.hf import export_checkpoint

    model = adapted(targets=("attention", "ffn"))
    folder = saved(model, tmp_path / "m")
    want = logits(model, IDS)
    export_checkpoint(folder, tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "adapter" / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == 4 and config["lora_alpha"] == 8
    assert config["target_modules"] == ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]
    from safetensors import safe_open

    with safe_open(str(tmp_path / "hf" / "adapter" / "adapter_model.safetensors"), "pt") as f:
        assert "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" in set(f.keys())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
        plain = logits(hf, IDS)
        peft = PeftModel.from_pretrained(hf, tmp_path / "hf" / "adapter").eval()
        got = logits(peft, IDS)
    assert (plain - want).abs().max() > 1e-3  # the export holds the base weights, not merged ones
    assert (got - want).abs().max() <= 1e-5
    export_checkpoint(folder, tmp_path / "merged", merge_lora=True)
    assert not (tmp_path / "merged" / "adapter").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").eval()
    assert (logits(merged, IDS) - want).abs().max() <= 1e-5


def test_fused_qkv_refuses_the_peft_folder_by_name_and_merges(tmp_path):
    from zoo.hf import export_checkpoint

    folder = saved(adapted("gpt-tiny", targets=("attention",)), tmp_path / "m")
    with pytest.raises(HFExportError) as exc:
        export_checkpoint(folder, tmp_path / "hf")
    assert "blocks.0.attention.q_proj" in str(exc.value) and "transformer.h.0.attn.c_attn.weight" in str(exc.value)
    assert "--merge-lora" in str(exc.value)
    assert not (tmp_path / "hf").exists()  # nothing written
    done = export_checkpoint(folder, tmp_path / "merged", merge_lora=True)
    assert any("merged" in note for note in done.notes)
    with pytest.raises(HFExportError, match="no LoRA adapters"):
        export_checkpoint(tmp_path / "merged", tmp_path / "again", merge_lora=True)


@pytest.mark.slow
def test_zoo_train_lora_flag_and_export_merge_lora(tmp_path):
    run = tmp_path / "run"
    args = ["train", "llama-tiny", "--out", str(run), "--lora", "rank=2,alpha=4,targets=q_proj,v_proj", "--no-summary"]
    args += ["--set", "train.steps=2", "--set", "train.batch_size=2", "--set", "train.seq_len=16", "--device", "cpu"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "LoRA rank 2, alpha 4 on 4 linears (q_proj, v_proj)" in " ".join(result.output.split())
    assert len(lora_modules(zoo.load(run))) == 4
    result = CliRunner().invoke(app, ["export", str(run), str(tmp_path / "hf"), "--merge-lora"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["train", "llama-tiny", "--out", str(tmp_path / "x"), "--lora", "targets=router"])
    assert result.exit_code != 0 and "'router' matches no adaptable linear" in " ".join(result.output.split())
