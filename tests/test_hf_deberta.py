"""DeBERTa-v2/v3 beyond the parity cases (tests/hf_cases/deberta_v2.py): the masked LM's newer head layout (the
published v3 checkpoints', with their unread tensors) imports and exports as the legacy one with the same outputs,
what zoo cannot build is refused by name, a recipe of disentangled attention exports as deberta-v2 only, and
deberta-v3-tiny trains."""

from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import load_file, save_file

import zoo
from zoo.errors import HFExportError, HFImportError
from zoo.hf import family_of, from_hf, hf_recipe, to_hf

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

SMALL = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48)
V3 = dict(relative_attention=True, position_buckets=8, norm_rel_ebd="layer_norm", share_att_key=True)
V3 |= dict(pos_att_type="p2c|c2p", position_biased_input=False, type_vocab_size=0, max_position_embeddings=32)


@torch.no_grad()
def test_the_newer_masked_lm_layout_imports_and_exports_as_the_legacy_one(tmp_path):
    torch.manual_seed(0)
    hf = transformers.DebertaV2ForMaskedLM(transformers.DebertaV2Config(**SMALL, **V3, legacy=False)).eval()
    for p in hf.parameters():
        p.add_(0.02 * torch.randn_like(p))
    hf.save_pretrained(tmp_path / "new")
    saved = load_file(tmp_path / "new" / "model.safetensors")
    assert "lm_predictions.lm_head.dense.weight" in saved
    # As the published v3 checkpoints: an unread absolute table and the replaced-token detector, which HF drops.
    extra = {"deberta.embeddings.position_embeddings.weight": torch.randn(32, 32)}
    extra |= {f"mask_predictions.{m}.weight": torch.randn(n, 32) for m, n in (("dense", 32), ("classifier", 1))}
    save_file({**saved, **extra}, tmp_path / "new" / "model.safetensors", metadata={"format": "pt"})
    model = from_hf(tmp_path / "new").eval()
    ids = torch.randint(1, 64, (2, 13))
    assert (hf(input_ids=ids).logits - model(ids).logits).abs().max() < 1e-4
    to_hf(model, tmp_path / "legacy")
    assert json.loads((tmp_path / "legacy" / "config.json").read_text())["legacy"] is True
    names = set(load_file(tmp_path / "legacy" / "model.safetensors"))
    assert "cls.predictions.transform.dense.weight" in names and not any(n.startswith("lm_predictions") for n in names)
    legacy = transformers.DebertaV2ForMaskedLM.from_pretrained(tmp_path / "legacy").eval()
    assert (legacy(input_ids=ids).logits - hf(input_ids=ids).logits).abs().max() < 1e-4


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"conv_kernel_size": 3},
            "conv_kernel_size=3 is not supported: zoo builds no convolution layer",
        ),
        (
            {"relative_attention": False},
            "relative_attention=False is not supported: zoo imports DeBERTa's relative",
        ),
        ({"pos_att_type": "c2p|p2p"}, "pos_att_type='c2p|p2p' is not supported: the terms are c2p and p2c"),
        ({"attention_head_size": 16}, "attention_head_size=16 is not supported: heads are hidden_size / num_attent"),
        ({"tie_word_embeddings": False}, "tie_word_embeddings=False is not supported: the masked LM reads the word"),
        ({"pooler_hidden_act": "mish"}, "pooler_hidden_act='mish' is not supported: the pooler's activation must"),
        (
            {"embedding_size": 16, "type_vocab_size": 2},
            "embedding_size=16 with token types (type_vocab_size=2) or absolute positions (position_biased_input="
            "False) is not supported: DeBERTa adds them before projecting to hidden_size, zoo after",
        ),
        (
            {"architectures": ["DebertaV2Model"]},
            "architectures=['DebertaV2Model'] is not supported: zoo imports deberta-v2 checkpoints of "
            "DebertaV2ForMaskedLM, DebertaV2ForSequenceClassification, DebertaV2ForTokenClassification",
        ),
        (
            {"architectures": ["DebertaV2ForSequenceClassification"], "pooler_hidden_size": 16},
            "pooler_hidden_size=16 is not supported: the pooler keeps hidden_size",
        ),
    ],
)
def test_what_zoo_cannot_build_is_refused_by_name(tmp_path, changes, message):
    config = {"model_type": "deberta-v2", "architectures": ["DebertaV2ForMaskedLM"], **SMALL, **V3, **changes}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(HFImportError) as caught:
        hf_recipe(tmp_path)
    assert message in str(caught.value)


def test_disentangled_attention_exports_as_deberta_only():
    assert family_of(zoo.load_recipe("deberta-v3-tiny", hf_family=None)).name == "deberta-v2"
    assert family_of(zoo.load_recipe("bert-tiny")).name == "bert"
    off_table = zoo.load_recipe("deberta-v3-tiny", **{"positional.eps": 1e-5})
    with pytest.raises(HFExportError, match=r"positional.eps is 1e-05, needs norm.eps \(1e-07\): one layer_norm_eps"):
        family_of(off_table)


def test_deberta_v3_tiny_trains(tmp_path):
    from zoo.train import train

    fast = {"train.steps": 3, "train.batch_size": 4, "train.seq_len": 32, "train.warmup_steps": 1}
    fast |= {"train.eval_interval": 0, "train.eval_batches": 1, "train.log_interval": 1, "train.checkpoint_interval": 3}
    result = train("deberta-v3-tiny", out=tmp_path / "run", **fast)
    assert math.isfinite(result.eval["loss"])
    trained = zoo.load(tmp_path / "run")
    assert family_of(trained.recipe).name == "deberta-v2"
