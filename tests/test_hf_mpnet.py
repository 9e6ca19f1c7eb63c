"""MPNet beyond the parity cases: its relative bias counts every token (pads too) while its positions skip token
id 1, an imported all-mpnet-base-v2-style MPNetModel gives sentence-transformers' mean pooling, what zoo cannot
reproduce is refused by name, all-mpnet-base-v2 has the bare model's size, and mpnet-tiny trains."""

from __future__ import annotations

import json
import math
import shutil

import pytest
import torch
from run_files import write_run
from test_embed import TEXTS, reference, sentence_transformers_files

import zoo
from zoo.errors import HFExportError, HFImportError
from zoo.hf import family_of, from_hf, hf_recipe
from zoo.testing import RecipeContract

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

TINY = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48)


def saved(tmp_path, hf_class: str = "MPNetModel", bias_scale: float = 1.0, **config) -> torch.nn.Module:
    """A random HF MPNet of ``hf_class``, its parameters nudged off their init (the relative bias scaled by
    ``bias_scale``), saved into ``tmp_path``."""
    torch.manual_seed(0)
    hf = getattr(transformers, hf_class)(transformers.MPNetConfig(**{**TINY, "max_position_embeddings": 40, **config}))
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(0.02 * torch.randn_like(p))
        hf.base_model.encoder.relative_attention_bias.weight.mul_(bias_scale)
    hf.eval().save_pretrained(tmp_path)
    return hf


@torch.no_grad()
def test_the_bias_counts_every_token_and_the_positions_skip_token_id_1(tmp_path):
    hf = saved(tmp_path, "MPNetForMaskedLM", bias_scale=100.0)  # scores that the bias moves
    model = from_hf(tmp_path).eval()
    ids = torch.randint(2, 64, (2, 24), generator=torch.Generator().manual_seed(1))
    ids[0, [3, 4, 10]] = 1  # token id 1 inside the text: no position of its own, but a place in the bias
    ids[1, :5] = 1  # left padding, attended (all-ones mask): transformers' bias still counts it
    expected = hf(input_ids=ids).logits
    assert (expected - model(ids).logits).abs().max().item() < 1e-4
    by_position = zoo.build(model.recipe, **{"positional.relative_to": "positions"}).eval()
    by_position.load_state_dict(model.state_dict())
    assert (expected - by_position(ids).logits).abs().max().item() > 1e-3  # the other reading is not MPNet's


@torch.no_grad()
def test_an_imported_mpnet_model_gives_sentence_transformers_mean_pooling(tmp_path):
    hf = saved(tmp_path)
    imported = from_hf(tmp_path).eval()
    model = zoo.build(imported.recipe, head={"type": "embedding", "pool": "mean", "normalize": True}).eval()
    kept = {k: v for k, v in imported.state_dict().items() if not k.startswith("head.")}  # no pooler
    model.load_state_dict(kept)
    ids = torch.randint(2, 64, (3, 12), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, -4:] = mask[2, -7:] = 0
    ids[mask == 0] = 1  # right-padded with the pad id
    h = hf(input_ids=ids, attention_mask=mask).last_hidden_state
    mean = (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)  # sentence-transformers' Pooling, by hand
    torch.testing.assert_close(model(ids, attention_mask=mask).logits, torch.nn.functional.normalize(mean, dim=-1))
    torch.testing.assert_close(imported(ids, attention_mask=mask).hidden_states[mask.bool()], h[mask.bool()])


def test_zoo_predict_embed_pools_an_mpnet_checkpoint_as_sentence_transformers(tmp_path):
    pytest.importorskip("tokenizers")
    from zoo.hf import export_checkpoint
    from zoo.predict import embed
    from zoo.train.tokenizer import ByteTokenizer

    torch.manual_seed(0)
    write_run(tmp_path / "run", zoo.build("mpnet-tiny"), ByteTokenizer(), objective="masked_lm", labels=None)
    export_checkpoint(tmp_path / "run", tmp_path / "hf")
    folder = tmp_path / "st"
    shutil.copytree(tmp_path / "hf", folder)
    sentence_transformers_files(folder, "mean", True)
    result = embed(folder, TEXTS)
    assert (result.pooling, result.normalized) == ("mean", True)
    for text, vector in zip(TEXTS, result.vectors, strict=True):
        torch.testing.assert_close(torch.tensor(vector), reference(folder, text, "mean", True), rtol=0, atol=1e-5)


def test_all_mpnet_base_v2_has_the_bare_models_parameters_and_pools_by_mean():
    recipe = zoo.load_recipe("all-mpnet-base-v2")
    assert (recipe.head.type, recipe.head.pool, recipe.head.normalize) == ("embedding", "mean", True)
    config = transformers.MPNetConfig(**{k: v for k, v in json.loads(_published()).items() if k != "architectures"})
    with torch.device("meta"):
        bare = transformers.MPNetModel(config, add_pooling_layer=False)  # sentence-transformers reads no pooler
    expected = sum(p.numel() for p in bare.parameters())
    assert zoo.count_parameters(zoo.build("all-mpnet-base-v2", device="meta")) == expected == 108_895_872


def _published() -> str:
    from hf_cases.mpnet import MPNET_BASE

    return json.dumps(MPNET_BASE)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"architectures": ["MPNetForQuestionAnswering"]},
            "architectures=['MPNetForQuestionAnswering'] is not supported: zoo imports mpnet checkpoints of "
            "MPNetModel, MPNetForMaskedLM, MPNetForSequenceClassification, MPNetForTokenClassification",
        ),
        (
            {"architectures": ["MPNetForMultipleChoice"]},
            "architectures=['MPNetForMultipleChoice'] is not supported",
        ),
        (
            {"relative_attention_num_buckets": 64},
            "relative_attention_num_buckets=64 is not supported: transformers' MPNet computes 32 buckets whatever "
            "this says (compute_position_bias's default)",
        ),
        (
            {"max_position_embeddings": 2},
            "max_position_embeddings=2 with MPNet's pad id 1: the table holds no position (positions start at row 2)",
        ),
    ],
)
def test_what_zoo_cannot_build_is_refused_by_name(tmp_path, changes, message):
    config = {"model_type": "mpnet", "architectures": ["MPNetForMaskedLM"], **TINY, **changes}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(HFImportError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        hf_recipe(tmp_path)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"positional.relative_to": "positions"}, "positional.relative_to is 'positions', needs 'index'"),
        ({"positional.num_buckets": 64}, "positional.num_buckets is 64, needs 32"),
        (
            {"positional.padding_idx": 0, "positional.offset": 1},
            "positional.padding_idx is 0 and offset 1, needs 1 and 2 (MPNet numbers positions from MPNet's pad id 1)",
        ),
        (
            {"head": {"type": "classification", "pooler": True, "dropout": 0.3}, "num_classes": 2},
            "head.dropout is 0.3, needs dropout (0.0): the config has one dropout",
        ),
    ],
)
def test_what_mpnet_cannot_say_is_refused_on_export(overrides, message):
    with pytest.raises(HFExportError, match=message.replace("(", r"\(").replace(")", r"\)")):
        family_of(zoo.load_recipe("mpnet-tiny", **overrides))


def test_all_mpnet_base_v2_does_not_export_its_pooling_as_a_pooler():
    message = "head.type is 'embedding', needs one of 'pooler', 'mlm', 'classification', 'token_classification'"
    with pytest.raises(HFExportError, match=message):
        family_of(zoo.load_recipe("all-mpnet-base-v2"))


def test_mpnet_tiny_trains_and_exports_as_mpnet(tmp_path):
    from zoo.train import train

    fast = {"train.steps": 3, "train.batch_size": 4, "train.seq_len": 32, "train.warmup_steps": 1}
    fast |= {"train.eval_interval": 0, "train.eval_batches": 1, "train.log_interval": 1, "train.checkpoint_interval": 3}
    result = train("mpnet-tiny", out=tmp_path / "run", **fast)
    assert math.isfinite(result.eval["loss"])
    assert family_of(zoo.load(tmp_path / "run").recipe).name == "mpnet"


class TestMpnetTinyLearns(RecipeContract):
    """Every parameter (the bias table too) gets a finite gradient each step, and the loss comes down."""

    recipes = ("mpnet-tiny",)
