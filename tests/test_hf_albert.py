"""ALBERT beyond the parity cases (tests/hf_cases/albert.py): its groups of shared layers arrive shared, what zoo
cannot build is refused by name, a recipe with shared layers exports only as ALBERT, and albert-tiny trains."""

from __future__ import annotations

import json
import math

import pytest
import torch

import zoo
from zoo.errors import HFExportError, HFImportError
from zoo.hf import family_of, from_hf, hf_recipe, to_hf

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

SMALL = dict(vocab_size=64, hidden_size=32, embedding_size=16, num_attention_heads=4, intermediate_size=48)


def albert(**changes) -> transformers.AlbertForMaskedLM:
    torch.manual_seed(0)
    config = transformers.AlbertConfig(**SMALL, max_position_embeddings=32, **changes)
    return transformers.AlbertForMaskedLM(config).eval()


@torch.no_grad()
def test_a_group_of_layers_arrives_as_one_set_of_weights(tmp_path):
    hf = albert(num_hidden_layers=6, num_hidden_groups=3)
    hf.save_pretrained(tmp_path)
    model = from_hf(tmp_path).eval()
    assert model.recipe.layer_groups == 3
    q = [model.blocks[i].attention.q_proj.weight for i in range(6)]
    assert q[0] is q[1] and q[2] is q[3] and q[4] is q[5] and q[1] is not q[2]
    group = hf.albert.encoder.albert_layer_groups[1].albert_layers[0]
    assert torch.equal(q[3], group.attention.query.weight)
    ids = torch.randint(1, 64, (2, 11))
    assert (hf(input_ids=ids).logits - model(ids).logits).abs().max() < 1e-4
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in hf.parameters())


@torch.no_grad()
def test_the_export_writes_one_layer_per_group_and_transformers_reads_it(tmp_path):
    model = zoo.build("albert-tiny").eval()
    to_hf(model, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert (config["model_type"], config["num_hidden_groups"], config["num_hidden_layers"]) == ("albert", 2, 4)
    hf = transformers.AlbertForMaskedLM.from_pretrained(tmp_path).eval()
    ids = torch.randint(1, 256, (2, 9))
    assert (hf(input_ids=ids).logits - model(ids).logits).abs().max() < 1e-4


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"inner_group_num": 2}, "inner_group_num=2 is not supported: zoo's groups are one layer each"),
        ({"num_hidden_groups": 3}, "num_hidden_groups=3 must split num_hidden_layers (4) into groups of equal size"),
    ],
)
def test_what_zoo_cannot_build_is_refused_by_name(tmp_path, changes, message):
    config = {"model_type": "albert", "architectures": ["AlbertForMaskedLM"], "num_hidden_layers": 4, **changes}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(HFImportError, match=message.replace("(", r"\(").replace(")", r"\)")):
        hf_recipe(tmp_path)


def test_shared_layers_export_as_albert_only():
    shared = zoo.load_recipe("bert-tiny", layer_groups=1)
    with pytest.raises(HFExportError) as caught:
        family_of(shared)
    assert "bert: layer_groups is 1, needs None" in str(caught.value)
    assert "albert: embedding.width is None, needs embedding_size (always projected)" in str(caught.value)
    assert family_of(zoo.load_recipe("bert-tiny", layer_groups=1, **{"embedding.width": 16})).name == "albert"


def test_albert_tiny_trains_its_shared_layers(tmp_path):
    from zoo.train import train

    fast = {"train.steps": 3, "train.batch_size": 4, "train.seq_len": 32, "train.warmup_steps": 1}
    fast |= {"train.eval_interval": 0, "train.eval_batches": 1, "train.log_interval": 1, "train.checkpoint_interval": 3}
    result = train("albert-tiny", out=tmp_path / "run", **fast)
    assert math.isfinite(result.eval["loss"])
    trained = zoo.load(tmp_path / "run")
    assert trained.blocks[1].ffn.up_proj.weight is trained.blocks[0].ffn.up_proj.weight
    assert family_of(trained.recipe).name == "albert"
