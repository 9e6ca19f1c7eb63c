"""BERT, RoBERTa, DistilBERT and ModernBERT beyond the parity cases: each family's own numbering, tables and
windows are transformers', what zoo cannot reproduce is refused by name, and every tiny variant trains. (The
published configs import as the named recipes: tests/test_hf_published.py.)"""

from __future__ import annotations

import json
import math

import pytest
import torch
from hf_cases import big_bird

import zoo
from zoo.components.attention import BlockSparse
from zoo.errors import HFExportError, HFImportError
from zoo.hf import family_of, from_hf, hf_recipe, to_hf

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()


def recipe_of(tmp_path, config: dict):
    (tmp_path / "config.json").write_text(json.dumps(config))
    return zoo.load_recipe(hf_recipe(tmp_path))


def nudged(model: torch.nn.Module) -> torch.nn.Module:
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    return model.eval()


# ---------------------------------------------------------------------------------------------- BERT


def untied_bert_mlm() -> transformers.BertForMaskedLM:
    config = transformers.BertConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=32,
        tie_word_embeddings=False,
    )
    return nudged(transformers.BertForMaskedLM(config))


@torch.no_grad()
def test_an_untied_bert_masked_lm_applies_the_decoders_own_bias(tmp_path):
    hf = untied_bert_mlm()
    predictions = hf.cls.predictions
    assert predictions.decoder.bias is not predictions.bias  # transformers 5: two parameters when untied
    hf.save_pretrained(tmp_path)
    model = from_hf(tmp_path).eval()
    assert torch.equal(model.head.proj.bias, predictions.decoder.bias)  # the one forward adds
    assert torch.equal(model.head.bias, predictions.bias)  # kept, never added
    ids = torch.randint(1, 64, (2, 10), generator=torch.Generator().manual_seed(1))
    assert (hf(input_ids=ids).logits - model(ids).logits).abs().max() < 1e-5
    assert zoo.count_parameters(model) == sum(p.numel() for p in hf.parameters())


def test_an_untied_mlm_head_without_the_spare_bias_is_refused_on_export(tmp_path):
    model = zoo.build("bert-tiny", head={"type": "mlm", "tie_embeddings": False})
    with pytest.raises(HFExportError, match="head.spare_bias is False, needs True"):
        to_hf(model, tmp_path)


def test_the_same_head_named_electra_exports_as_electras_generator(tmp_path):
    model = nudged(zoo.build("bert-tiny", head={"type": "mlm", "tie_embeddings": False}, hf_family="electra"))
    to_hf(model, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "electra"
    hf = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    ids = torch.randint(1, 256, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert (hf(input_ids=ids).logits - model.eval()(ids).logits).abs().max() < 1e-5


def test_a_config_that_carries_relative_key_imports_when_the_weights_are_absolute(tmp_path):
    config = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2)
    config.position_embedding_type = "relative_key"  # transformers 5 never reads it
    hf = nudged(transformers.BertModel(config))
    hf.save_pretrained(tmp_path)
    model = from_hf(tmp_path).eval()
    ids = torch.randint(1, 64, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert (hf(input_ids=ids).pooler_output - model(ids).logits).abs().max() < 1e-5


def test_weights_of_relative_positions_are_refused_by_name(tmp_path):
    from safetensors.torch import save_file

    hf = transformers.BertModel(
        transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2)
    )
    hf.save_pretrained(tmp_path)
    state = {n: t.contiguous() for n, t in hf.state_dict().items()}
    state["encoder.layer.0.attention.self.distance_embedding.weight"] = torch.zeros(1023, 16)
    save_file(state, tmp_path / "model.safetensors")
    with pytest.raises(HFImportError, match="position_embedding_type=.*distance_embedding"):
        from_hf(tmp_path)


# ---------------------------------------------------------------------------------------------- RoBERTa


@pytest.mark.parametrize("pad", [0, 1, 3])
def test_roberta_positions_skip_padding_and_start_after_the_pad_id(pad):
    from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

    g = torch.Generator().manual_seed(pad)
    ids = torch.randint(0, 8, (4, 16), generator=g)  # pad tokens anywhere, as transformers reads them
    ids[1, -5:] = pad
    model = zoo.build(
        "roberta-tiny", pad_token_id=pad, positional={"type": "learned", "offset": pad + 1, "padding_idx": pad}
    )
    rows = model.positional.positions_from_ids(ids) + model.positional.offset
    assert torch.equal(rows, RobertaEmbeddings.create_position_ids_from_input_ids(ids, pad))
    assert (rows[ids == pad] == pad).all()


def test_roberta_refuses_a_table_without_room_for_a_position(tmp_path):
    with pytest.raises(HFImportError, match="max_position_embeddings=2 with pad_token_id=1"):
        recipe_of(tmp_path, {"model_type": "roberta", "max_position_embeddings": 2})


def test_bert_and_roberta_tell_their_positions_apart():
    assert family_of(zoo.load_recipe("bert-tiny")).name == "bert"
    assert family_of(zoo.load_recipe("roberta-tiny")).name == "roberta"
    assert family_of(zoo.load_recipe("distilbert-tiny")).name == "distilbert"
    assert family_of(zoo.load_recipe("modernbert-tiny")).name == "modernbert"
    assert family_of(zoo.load_recipe("bigbird-tiny")).name == "big_bird"


# ---------------------------------------------------------------------------------------------- DistilBERT


def test_distilbert_sinusoidal_table_is_transformers():
    from transformers.models.distilbert.modeling_distilbert import _create_sinusoidal_embeddings

    expected = _create_sinusoidal_embeddings(40, 32, torch.empty(40, 32))
    model = zoo.build("distilbert-tiny", max_len=40, d_model=32, **{"train.seq_len": 40})
    assert torch.equal(model.positional.embedding.weight.detach(), expected)
    assert model.positional.embedding.weight.requires_grad  # still trained, as in transformers 5


# ---------------------------------------------------------------------------------------------- ModernBERT


@pytest.mark.parametrize("local_attention", [2, 4, 7, 128])
def test_modernbert_local_layers_see_keys_half_the_window_away(local_attention, tmp_path):
    config = {"model_type": "modernbert", "local_attention": local_attention, "num_hidden_layers": 2}
    recipe = recipe_of(tmp_path, {**config, "layer_types": ["sliding_attention", "full_attention"]})
    attention = zoo.build(recipe, device="meta").blocks[0].attention
    window = attention.window
    index = torch.arange(40)
    seen = attention.key_mask(index, index)
    assert torch.equal(seen, (index[:, None] - index[None, :]).abs() <= local_attention // 2)
    assert window == local_attention // 2 + 1


def test_modernbert_first_layer_reads_the_normalised_embeddings():
    model = zoo.build("modernbert-tiny")
    assert isinstance(model.blocks[0].attention_norm, torch.nn.Identity)
    assert not any(isinstance(block.attention_norm, torch.nn.Identity) for block in model.blocks[1:])


@pytest.mark.parametrize(
    "config,refused",
    [
        ({"model_type": "modernbert", "mlp_dropout": 0.1}, "mlp_dropout=0.1"),
        ({"model_type": "modernbert", "hidden_activation": "gelu_fast"}, "hidden_activation='gelu_fast'"),
        (
            {"model_type": "modernbert", "rope_parameters": {"full_attention": {"rope_type": "yarn", "factor": 2.0}}},
            "rope_parameters.full_attention.rope_type='yarn'",
        ),
        ({"model_type": "distilbert", "activation": "mish"}, "activation='mish'"),
        ({"model_type": "roberta", "is_decoder": True}, "is_decoder=True"),
        ({"model_type": "distilbert", "architectures": ["DistilBertModel"]}, "DistilBertModel"),
    ],
)
def test_what_zoo_cannot_reproduce_is_refused_by_name(config, refused, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(HFImportError, match=refused):
        hf_recipe(tmp_path)


# ---------------------------------------------------------------------------------------------- BigBird


@pytest.mark.parametrize(("blocks", "size", "random"), [(9, 2, 1), (12, 3, 2), (20, 1, 3), (8, 4, 0), (10, 2, 1)])
def test_each_block_sparse_query_sees_its_window_the_globals_and_its_random_blocks(blocks, size, random):
    from zoo.components.attention import block_sparse_mask, random_block_choice

    length = blocks * size - (size > 1)  # a last block shorter than the others too
    index = torch.arange(length)
    seen = block_sparse_mask(index, index, size, random, seed=7)
    n = -(-length // size)
    if length <= (5 + 2 * random) * size:
        assert seen is None  # as transformers, every key
        return
    chosen = random_block_choice(n, random, 7)
    for q in range(length):
        qb = q // size
        if qb in (0, n - 1):
            expected = set(range(n))  # a global block sees every block
        else:
            fixed = {0, n - 1, qb - 1, qb, qb + 1}
            randoms = {int(b) for b in chosen[qb] if b >= 0}
            assert len(randoms) == min(random, n - len(fixed)) and not randoms & fixed  # others, as many as asked
            expected = fixed | randoms
        assert {k // size for k in range(length) if seen[q, k]} == expected, q


def test_random_blocks_are_fixed_by_the_seed_and_differ_between_seeds():
    from zoo.components.attention import random_block_choice

    assert torch.equal(random_block_choice(16, 3, 0), random_block_choice(16, 3, 0))
    assert not torch.equal(random_block_choice(16, 3, 0), random_block_choice(16, 3, 1))


def test_block_sparse_covering_the_sequence_is_full_attention():
    from zoo.components.attention import block_sparse_mask

    index = torch.arange(40)  # 10 blocks of 4: 5 + 2 * 1 = 7 < 10, so the sparse pattern applies ...
    assert not block_sparse_mask(index, index, 4, 1).all()
    covered = block_sparse_mask(index, index, 4, 5)  # ... yet every block is seen with 5 random blocks of 5 left
    assert covered is None or covered.all()
    index = torch.arange(64)
    assert block_sparse_mask(index, index, 2, 30, seed=3) is None  # short for 30 random blocks: every key


@torch.no_grad()
@pytest.mark.parametrize("length", [20, 56])
def test_block_sparse_equals_full_attention_where_the_blocks_cover_the_sequence(length):
    sparse = nudged(zoo.build("bigbird-tiny"))
    full = zoo.build("bigbird-tiny", **{"attention.sparse_block_size": None}).eval()
    full.load_state_dict(sparse.state_dict())
    ids = torch.randint(1, 256, (2, length), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, -5:] = 0
    assert torch.equal(sparse(ids, attention_mask=mask).logits, full(ids, attention_mask=mask).logits)
    longer = torch.randint(1, 256, (1, 100), generator=torch.Generator().manual_seed(2))  # 13 blocks: sparse
    assert not torch.allclose(sparse(longer).logits, full(longer).logits)


@torch.no_grad()
def test_block_sparse_big_bird_matches_transformers_where_both_attend_fully(tmp_path):
    config = transformers.BigBirdConfig(**big_bird.CASES["big_bird-mlm-sparse-short-untied-rescaled"]["config"])
    hf = nudged(transformers.BigBirdForMaskedLM(config))
    hf.save_pretrained(tmp_path)
    model = from_hf(tmp_path).eval()
    assert model.blocks[0].attention.pattern == BlockSparse(block_size=2, random_blocks=1, seed=0)
    ids = torch.randint(4, 96, (2, 14), generator=torch.Generator().manual_seed(1))  # (5 + 2) * 2 tokens
    assert (hf(input_ids=ids).logits - model(ids).logits).abs().max() < 1e-4


@torch.no_grad()
def test_a_big_bird_pre_training_checkpoint_round_trips_with_its_next_sentence_head(tmp_path):
    from safetensors.torch import load_file

    config = transformers.BigBirdConfig(**big_bird.CASES["big_bird-mlm-full"]["config"])
    hf = nudged(transformers.BigBirdForPreTraining(config))
    hf.save_pretrained(tmp_path / "hf")
    model = from_hf(tmp_path / "hf").eval()
    assert zoo.count_parameters(model) == sum(p.numel() for p in hf.parameters())
    ids = torch.randint(4, 96, (2, 12), generator=torch.Generator().manual_seed(1))
    assert (hf(input_ids=ids).prediction_logits - model(ids).logits).abs().max() < 1e-4
    to_hf(model, tmp_path / "back")
    before, after = load_file(tmp_path / "hf" / "model.safetensors"), load_file(tmp_path / "back" / "model.safetensors")
    assert sorted(before) == sorted(after) and all(torch.equal(before[n], after[n]) for n in before)
    assert type(transformers.AutoModelForPreTraining.from_pretrained(tmp_path / "back")) is type(hf)


# ---------------------------------------------------------------------------------------------- training

FAST = {
    "train.steps": 3,
    "train.batch_size": 4,
    "train.seq_len": 32,
    "train.warmup_steps": 1,
    "train.eval_interval": 0,
    "train.eval_batches": 1,
    "train.log_interval": 1,
    "train.checkpoint_interval": 3,
}


@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        ("roberta-tiny", {}),
        ("distilbert-tiny", {}),
        ("modernbert-tiny", {}),
        ("bigbird-tiny", {}),
        ("ernie-tiny", {}),
        ("electra-tiny", {"head": {"type": "mlm"}}),  # the generator (the discriminator needs ELECTRA's objective)
        ("roberta-tiny", {"head": {"type": "classification", "pooler": True}, "num_classes": 4}),
    ],
    ids=[
        "roberta-mlm",
        "distilbert-mlm",
        "modernbert-mlm",
        "bigbird-mlm",
        "ernie-mlm",
        "electra-mlm",
        "roberta-classifier",
    ],
)
def test_every_tiny_encoder_family_trains(tmp_path, name, overrides):
    from zoo.train import train

    result = train(name, out=tmp_path / "run", **FAST, **overrides)
    assert math.isfinite(result.eval["loss"])
    family = {"bigbird-tiny": "big_bird"}.get(name, name.removesuffix("-tiny"))
    assert family_of(zoo.load(tmp_path / "run").recipe).name == family


# ---------------------------------------------------------------------------------------------- the commands


@pytest.mark.parametrize("name", ["roberta-tiny", "distilbert-tiny", "modernbert-tiny", "bigbird-tiny", "ernie-tiny"])
def test_zoo_import_and_export_round_trip_each_family(name, tmp_path):
    import typer
    from safetensors.torch import load_file
    from typer.testing import CliRunner

    from zoo.cli.hf import register

    app = typer.Typer()
    register(app)
    model = nudged(zoo.build(name))
    to_hf(model, tmp_path / "hf")
    runner = CliRunner()
    result = runner.invoke(app, ["import", str(tmp_path / "hf"), "--out", str(tmp_path / "zoo")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["export", str(tmp_path / "zoo"), "--to", "hf", str(tmp_path / "back")])
    assert result.exit_code == 0, result.output
    before, after = load_file(tmp_path / "hf" / "model.safetensors"), load_file(tmp_path / "back" / "model.safetensors")
    assert sorted(before) == sorted(after) and all(torch.equal(before[n], after[n]) for n in before)
    hf = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "back").eval()
    ids = torch.randint(1, 256, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert (hf(input_ids=ids).logits - model(ids).logits).abs().max() < 1e-4


@pytest.mark.parametrize(
    ("family", "overrides", "message"),
    [
        ("bert", {"head": {"type": "pooler", "pool": "mean"}}, "head.pool is 'mean', needs 'cls'"),
        ("big_bird", {"head": {"type": "pooler", "pool": "mean"}}, "head.pool is 'mean', needs 'cls'"),
        ("bert", {"head.proj_dim": 16, "head.tie_embeddings": False}, "head.proj_dim is 16, needs None"),
        ("bert", {"head": {"type": "token_classification", "transform": True}}, "head.transform is True"),
        ("bert", {"head": {"type": "classification", "pooler": True, "pooler_norm": True}}, "head.pooler_norm is"),
    ],
)
def test_a_head_that_the_class_does_not_build_is_refused_by_name(family, overrides, message):
    recipe = zoo.load_recipe("bert-tiny", num_classes=3, hf_family=family, **overrides)
    with pytest.raises(HFExportError, match=message):
        family_of(recipe)
