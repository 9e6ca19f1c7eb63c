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
    assert model.recipe.train.lora == LoRAConfig(rank=4, alpha=8, targets=list(targets))  # saves as such
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
    from zoo.recipe import parse_override
    from zoo.train.lora import lora_assignments as lora_overrides

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


# ---------------------------------------------------------------------------------------------- JSONL and chat data

CHATML = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CONVERSATIONS = [
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another?"},
        {"role": "assistant", "content": "Green, then red."},
    ],
    [{"role": "user", "content": "Two plus two?"}, {"role": "assistant", "content": "Four."}],
    [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi!"}],
]


def chat_tokenizer():
    """A byte-level BPE (the tokenizers library) with ChatML's specials and template, as a checkpoint ships it."""
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from zoo.train.tokenizer import HFTokenizer

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([m["content"] for c in CONVERSATIONS for m in c] * 20, trainer)
    return HFTokenizer(tok, {"chat_template": CHATML, "eos_token": "<|im_end|>", "pad_token": "<|im_end|>"})


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_chat_jsonl_learns_the_assistant_tokens_only(tmp_path):
    from zoo.train.jsonl import IGNORE, ChatSet, read_jsonl
    from zoo.train.objectives import make_objective

    tokenizer = chat_tokenizer()
    data = write_jsonl(tmp_path / "chat.jsonl", [{"messages": c} for c in CONVERSATIONS * 2])
    kind, records = read_jsonl(data, data.read_text())
    chats = ChatSet.from_records(data, records, tokenizer, val_fraction=0.2, length=256)
    for (ids, targets), conversation in zip(chats.train, CONVERSATIONS * 2, strict=False):
        full = tokenizer.encode(tokenizer.apply_chat_template(conversation))
        assert ids.tolist() == full[:-1]  # the pieces tokenize as the whole text does
        learned = [t for t in targets.tolist() if t != IGNORE]
        answers = "".join(m["content"] + "<|im_end|>\n" for m in conversation if m["role"] == "assistant")
        assert tokenizer._tok.decode(learned, skip_special_tokens=False) == answers
        expected: list[int] = []  # ChatML by hand: each header is context, each assistant answer is learned
        for m in conversation:
            expected += [IGNORE] * len(tokenizer.encode(f"<|im_start|>{m['role']}\n"))
            answer = tokenizer.encode(m["content"] + "<|im_end|>\n")
            expected += answer if m["role"] == "assistant" else [IGNORE] * len(answer)
        assert targets.tolist() == expected[1:]  # exactly: target i is token i + 1, or -100
        kept = targets != IGNORE
        assert sum(kept.tolist()) == len(tokenizer.encode(answers))
    torch.manual_seed(0)
    model = zoo.build("llama-tiny", vocab_size=320)
    recipe = model.recipe
    objective = make_objective(recipe, model, tokenizer, data, 32)
    batch = objective.batch(torch.Generator().manual_seed(0), 4)
    assert batch["input_ids"].shape == batch["targets"].shape == (4, 32)
    assert torch.isfinite(objective.loss(model, batch))
    text = write_jsonl(tmp_path / "text.jsonl", [{"text": "Some prose. " * 40}, {"text": "More of it. " * 40}])
    stream = make_objective(recipe, model, tokenizer, text, 32)
    assert (stream.batch(torch.Generator().manual_seed(0), 2)["targets"] != IGNORE).all()


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        (['{"text": "a"}', '{"messages": []}'], "line 2: a chat record in a file of text records"),
        (['{"text": "a"}', "not json"], "line 2: not JSON"),
        (['{"prompt": "a"}'], "line 1: expected an object with a 'text' string or a 'messages' list"),
    ],
)
def test_jsonl_refuses_a_bad_line_by_number(tmp_path, lines, said):
    from zoo.errors import TrainError
    from zoo.train.data import load_documents

    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(lines) + "\n")
    with pytest.raises(TrainError, match=said):
        load_documents(data)


def test_chat_needs_a_template_and_an_assistant(tmp_path):
    from zoo.errors import TrainError
    from zoo.train.jsonl import ChatSet, chat_tokens
    from zoo.train.tokenizer import ByteTokenizer

    with pytest.raises(TrainError, match="has none: train from an imported chat model"):
        chat_tokens(ByteTokenizer(), CONVERSATIONS[1], "chat.jsonl, line 1")
    with pytest.raises(TrainError, match="line 1: no assistant message"):
        chat_tokens(chat_tokenizer(), CONVERSATIONS[1][:1], "chat.jsonl, line 1")
    with pytest.raises(TrainError, match="give at least 2"):
        ChatSet.from_records(
            tmp_path / "c.jsonl", [(1, CONVERSATIONS[1])], chat_tokenizer(), val_fraction=0.1, length=8
        )


@pytest.mark.slow
def test_lora_on_chat_jsonl_from_a_model_folder_with_its_chat_template(tmp_path):
    from zoo.train import train

    tokenizer = chat_tokenizer()
    torch.manual_seed(0)
    folder = saved(zoo.build("llama-tiny", vocab_size=320), tmp_path / "model")
    for name, text in tokenizer.files().items():
        (folder / name).write_text(text, encoding="utf-8")
    data = write_jsonl(tmp_path / "chat.jsonl", [{"messages": c} for c in CONVERSATIONS * 4])
    settings = {**TINY, "train.steps": 2, "train.seq_len": 48, "train.lora": {"rank": 2, "targets": ["q_proj"]}}
    result = train(folder, out=tmp_path / "run", init_from=folder, data=data, device="cpu", **settings)
    assert result.eval and all(v == v for v in result.eval.values())  # finite held-out figures
    assert len(lora_modules(zoo.load(tmp_path / "run"))) == 2


DEEPSEEK_TINY = {  # DeepSeek-V2's network at toy size: MLA with a query latent, a dense layer, then MoE
    "vocab_size": 256,
    "d_model": 64,
    "num_layers": 2,
    "max_len": 64,
    "attention.num_heads": 2,
    "attention.kv_lora_rank": 16,
    "attention.q_lora_rank": 16,
    "attention.qk_nope_head_dim": 8,
    "attention.qk_rope_head_dim": 8,
    "attention.v_head_dim": 8,
    "attention.scale": 0.3974065412802184,  # what the deepseek_v2 family derives (YaRN's mscale)
    "positional.original_max_len": 16,
    "ffn.num_experts": 4,
    "ffn.top_k": 2,
    "ffn.expert.hidden": 32,
    "ffn.shared_expert.hidden": 32,
    "layers": [{"select": ":1", "ffn": {"type": "swiglu", "hidden": 64}}],
    "expect": None,
}


@pytest.mark.slow
def test_mla_adapters_merge_and_load_in_peft_and_moe_mlps_are_refused_for_peft(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from zoo.hf import export_checkpoint

    model = adapted("deepseek-v2-lite", targets=("attention",), **DEEPSEEK_TINY)
    names = {n.rpartition(".")[2] for n in lora_modules(model)}
    assert names == {"q_a_proj", "q_b_proj", "kv_a_proj", "kv_b_proj", "o_proj"}
    want = logits(model, IDS)
    export_checkpoint(saved(model, tmp_path / "m"), tmp_path / "hf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
        got = logits(PeftModel.from_pretrained(hf, tmp_path / "hf" / "adapter").eval(), IDS)
    assert (got - want).abs().max() <= 1e-5
    merge_lora(model)
    assert (logits(model, IDS) - want).abs().max() <= 1e-5
    folder = saved(adapted("deepseek-v2-lite", targets=("ffn",), **DEEPSEEK_TINY), tmp_path / "ffn")
    with pytest.raises(HFExportError, match="blocks.0.ffn.gate_proj .*fused experts.*--merge-lora"):
        export_checkpoint(folder, tmp_path / "hf-ffn")
