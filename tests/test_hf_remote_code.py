"""The remote-code export (``zoo.hf.remote``): a recipe that fits no Hugging Face family exports as a folder with a
generated ``modeling_zoo.py`` and ``torch.export`` programs, which ``from_pretrained(..., trust_remote_code=True)``
loads with zoo's logits (padded batches) and greedy tokens, without importing zoo; what cannot be traced is refused
by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
import typer
from typer.testing import CliRunner

import zoo
from zoo.cli.hf import register
from zoo.errors import HFExportError
from zoo.generate import generate
from zoo.hf import export_checkpoint
from zoo.hf.remote import remote_checkpoint

transformers = pytest.importorskip("transformers")

CUSTOM = {
    "name": "my-llama-moe",
    "extends": "llama-tiny",
    "num_layers": 4,
    "attention": {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "bias": False, "qk_norm": {"type": "rmsnorm"}},
    "layers": [
        {"select": "1::2", "ffn": {"type": "moe", "num_experts": 4, "top_k": 2, "expert": {"type": "swiglu"}}},
        {"select": "2", "attention": {"type": "retention", "num_heads": 4}},  # the zoo-retnet plugin's mixer
    ],
}
TOLERANCE = 1e-5


def _model(recipe, seed: int = 0) -> torch.nn.Module:
    """A built model with weights wide enough that greedy decoding does not repeat one token."""
    torch.manual_seed(seed)
    model = zoo.build(recipe).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1 and "norm" not in name:
                p.normal_(0.0, 0.3)
    return model


def _export(model, tmp_path: Path, name: str) -> tuple[Path, object]:
    zoo.save(model, tmp_path / f"{name}-zoo")
    done = export_checkpoint(tmp_path / f"{name}-zoo", tmp_path / name)
    return tmp_path / name, done


def _padded(vocab: int, n: int = 3, length: int = 9, *, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(1, vocab, (n, length), generator=generator)
    mask = torch.ones(n, length, dtype=torch.long)
    if left:
        mask[0, :3] = 0
    else:
        mask[0, -3:] = 0
    return ids.masked_fill(mask == 0, 0), mask


@pytest.fixture(scope="module")
def custom(tmp_path_factory) -> tuple[torch.nn.Module, Path, object]:
    tmp_path = tmp_path_factory.mktemp("custom")
    model = _model(CUSTOM)
    folder, done = _export(model, tmp_path, "hf")
    return model, folder, done


@pytest.mark.slow
def test_a_custom_decoder_with_moe_qk_norm_and_a_plugin_mixer_reloads_with_zoos_logits_and_greedy_tokens(custom):
    model, folder, done = custom
    assert (done.family, done.hf_class) == ("remote code", "ZooForCausalLM")
    assert (
        "recipe 'my-llama-moe' fits no Hugging Face family, so it is written as remote code (closest:" in done.notes[0]
    )
    config = json.loads((folder / "config.json").read_text())
    assert config["auto_map"]["AutoModelForCausalLM"] == "modeling_zoo.ZooForCausalLM"
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)

    ids, mask = _padded(256, left=True)
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)  # zoo's generation numbers a left-padded row so
    with torch.no_grad():
        expected = model(ids, attention_mask=mask, positions=positions).logits
        got = hf(input_ids=ids, attention_mask=mask).logits
    real = mask.bool()
    assert (expected[real] - got[real]).abs().max().item() <= TOLERANCE

    prompts = [[5, 6, 7, 8, 9], [40, 41]]
    tokens = generate(model, prompts, max_new_tokens=12, pad_token_id=0).tokens  # zoo decodes from its cache
    assert len(set(tokens[0])) > 2  # not one token repeated
    batch = torch.tensor([[5, 6, 7, 8, 9], [0, 0, 0, 40, 41]])
    hf.generation_config.eos_token_id = None  # zoo's generate above stops at no token
    out = hf.generate(batch, attention_mask=(batch != 0).long(), max_new_tokens=12, do_sample=False, pad_token_id=0)
    assert out[:, 5:].tolist() == tokens


@pytest.mark.slow
def test_the_export_holds_the_weights_once_and_does_not_import_zoo(custom, tmp_path):
    model, folder, _ = custom
    with zipfile.ZipFile(folder / "forward.pt2") as archive:  # no weights, no sample inputs: its data is tiny
        data = sum(i.file_size for i in archive.infolist() if i.filename.startswith("archive/data/"))
    assert data < 4096 < (folder / "model.safetensors").stat().st_size
    assert torch.export.load(folder / "forward.pt2").state_dict == {}
    for name in ("modeling_zoo.py", "configuration_zoo.py"):
        assert "import zoo" not in (folder / name).read_text() and "from zoo" not in (folder / name).read_text()

    ids, mask = _padded(256, left=True)
    torch.save({"ids": ids, "mask": mask}, tmp_path / "inputs.pt")
    script = (
        "import sys, torch\n"
        "sys.modules['zoo'] = None\n"  # any import of zoo now fails
        "from transformers import AutoModelForCausalLM\n"
        f"hf = AutoModelForCausalLM.from_pretrained({str(folder)!r}, trust_remote_code=True)\n"
        f"x = torch.load({str(tmp_path / 'inputs.pt')!r})\n"
        "with torch.no_grad():\n"
        "    logits = hf(input_ids=x['ids'], attention_mask=x['mask']).logits\n"
        f"torch.save(logits, {str(tmp_path / 'logits.pt')!r})\n"
        "print(sorted(m for m in sys.modules if m == 'zoo' or m.startswith('zoo.')))\n"
    )
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules")}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "['zoo']"  # only the None placeholder
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    with torch.no_grad():
        expected = model(ids, attention_mask=mask, positions=positions).logits
    real = mask.bool()
    assert (expected[real] - torch.load(tmp_path / "logits.pt")[real]).abs().max().item() <= TOLERANCE


@pytest.mark.slow
def test_the_readmes_fine_tuned_classifier_exports_as_a_sequence_classifier(tmp_path):
    recipe = {"extends": "bert-tiny", "name": "topics", "head": {"type": "classification"}, "num_classes": 4}
    model = _model(recipe)
    folder, done = _export(model, tmp_path, "hf")
    assert done.hf_class == "ZooForSequenceClassification"
    assert "bert (1 misfit: head.pooler is False, needs True" in done.notes[0]
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)
    assert hf.config.num_labels == 4
    ids, mask = _padded(256, left=False)
    types = (torch.arange(9) >= 5).long().expand(3, 9)
    with torch.no_grad():
        for kwargs in ({}, {"token_type_ids": types}):
            expected = model(ids, attention_mask=mask, **kwargs).logits
            got = hf(input_ids=ids, attention_mask=mask, **kwargs).logits
            assert (expected - got).abs().max().item() <= TOLERANCE


@pytest.mark.slow
@pytest.mark.parametrize(
    ("head", "auto", "hf_class", "field"),
    [
        ({"type": "mlm"}, "AutoModelForMaskedLM", "ZooForMaskedLM", "logits"),
        ({"type": "token_classification"}, "AutoModelForTokenClassification", "ZooForTokenClassification", "logits"),
        ({"type": "pooler"}, "AutoModel", "ZooModel", "pooler_output"),
    ],
)
def test_every_encoder_head_loads_as_its_auto_class_even_where_a_family_fits(tmp_path, head, auto, hf_class, field):
    model = _model({"extends": "bert-tiny", "name": "heads", "head": head, "num_classes": 5})
    zoo.save(model, tmp_path / "zoo")
    done = export_checkpoint(tmp_path / "zoo", tmp_path / "hf", remote_code=True)
    assert done.hf_class == hf_class and not any("closest" in note for note in done.notes)
    hf = getattr(transformers, auto).from_pretrained(tmp_path / "hf", trust_remote_code=True)
    assert type(hf).__name__ == hf_class
    ids, mask = _padded(256, left=False)
    with torch.no_grad():
        got = getattr(hf(input_ids=ids, attention_mask=mask), field)
        assert (model(ids, attention_mask=mask).logits - got).abs().max().item() <= TOLERANCE


@pytest.mark.slow
def test_an_encoder_decoder_reloads_with_zoos_logits_and_greedy_tokens(tmp_path):
    model = _model({"extends": "t5-tiny", "name": "t5-layernorm", "norm": {"type": "layernorm", "eps": 1e-6}})
    folder, done = _export(model, tmp_path, "hf")
    assert done.hf_class == "ZooForConditionalGeneration"
    assert done.notes[0].startswith("recipe 't5-layernorm' fits no Hugging Face family")
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True)
    ids, mask = _padded(256, left=False)
    target = torch.randint(1, 256, (3, 6), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = model(ids, target, attention_mask=mask).logits
        got = hf(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits
    assert (expected - got).abs().max().item() <= TOLERANCE

    sources = [[10, 20, 30, 40, 50], [7, 8, 9]]
    tokens = generate(model, sources, max_new_tokens=8, pad_token_id=0).tokens
    assert len(set(tokens[0])) > 2
    batch = torch.tensor([[10, 20, 30, 40, 50], [7, 8, 9, 0, 0]])
    hf.generation_config.eos_token_id = None
    out = hf.generate(batch, attention_mask=(batch != 0).long(), max_new_tokens=8, do_sample=False)
    assert out[:, 1:].tolist() == tokens  # after the decoder's start token


@pytest.mark.slow
def test_a_vit_reloads_as_an_image_classifier_with_zoos_logits(tmp_path):
    model = _model({"extends": "vit-tiny", "name": "vit-rmsnorm", "norm": {"type": "rmsnorm", "eps": 1e-6}})
    folder, done = _export(model, tmp_path, "hf")
    assert done.hf_class == "ZooForImageClassification"
    assert done.notes[0].startswith("recipe 'vit-rmsnorm' fits no Hugging Face family")
    hf = transformers.AutoModelForImageClassification.from_pretrained(folder, trust_remote_code=True)
    images = torch.randn(5, 1, 8, 8, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert (model(images).logits - hf(pixel_values=images).logits).abs().max().item() <= TOLERANCE


@pytest.mark.slow
def test_a_plugin_mixer_that_does_not_trace_is_refused_by_name(tmp_path):
    zoo.save(zoo.build("hyena-tiny"), tmp_path / "zoo")
    with pytest.raises(HFExportError) as caught:
        export_checkpoint(tmp_path / "zoo", tmp_path / "hf")
    assert str(caught.value) == (
        "recipe 'hyena-tiny': attention 'hyena' (plugin zoo-hyena; decoder layer 0) cannot be exported for "
        "trust_remote_code: torch.export cannot trace it over a dynamic batch and sequence length; export a recipe "
        "without it, or one that fits a Hugging Face family"
    )
    assert not (tmp_path / "hf").exists()  # nothing half-written


def test_a_head_without_a_remote_code_class_is_refused_by_name():
    recipe = {"extends": "gpt-tiny", "name": "pooled", "head": {"type": "classification"}, "num_classes": 3}
    model = zoo.build(recipe, device="meta")
    with pytest.raises(HFExportError) as caught:
        remote_checkpoint(model)
    assert str(caught.value).startswith(
        "recipe 'pooled': a decoder with head 'classification' has no remote-code export (it exports decoder with "
        "head 'lm', encoder with head 'mlm', "
    )


@pytest.mark.slow
def test_the_cli_writes_remote_code_when_asked_even_where_a_family_fits(tmp_path):
    app = typer.Typer()
    register(app)
    zoo.save(_model("gpt-tiny"), tmp_path / "zoo")
    result = CliRunner().invoke(app, ["export", str(tmp_path / "zoo"), str(tmp_path / "hf"), "--remote-code"])
    assert result.exit_code == 0, result.output
    assert "as ZooForCausalLM (remote code, " in " ".join(result.output.split())
    assert "load it with trust_remote_code=True" in " ".join(result.output.split())
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["model_type"] == "zoo"
    assert (tmp_path / "hf" / "modeling_zoo.py").is_file()
