"""``zoo predict --embed``: a sentence encoder's vector of each text, pooled as its sentence-transformers files say
(mean, [CLS] or last token, normalized or not), equal to what sentence-transformers computes from transformers'
model; the pooling chosen, the notes, JSON, and clean errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from clean_errors import assert_clean_error, cli
from run_files import write_run

import zoo
from zoo.errors import PredictError
from zoo.predict import embed
from zoo.train.tokenizer import ByteTokenizer

TEXTS = ["The orchestra tuned up before the concert.", "naïve café 🙂"]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> Path:
    """A bert-tiny exported as a Hugging Face folder (tokenizer.json included), with random weights."""
    pytest.importorskip("tokenizers")
    from zoo.hf import export_checkpoint

    root = tmp_path_factory.mktemp("embed")
    torch.manual_seed(0)
    write_run(root / "run", zoo.build("bert-tiny"), ByteTokenizer(), objective="masked_lm", labels=None)
    export_checkpoint(root / "run", root / "hf")
    return root / "hf"


def sentence_transformers_files(folder: Path, mode: str, normalize: bool) -> None:
    """modules.json and 1_Pooling/config.json as sentence-transformers writes them."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]
    modules.append({"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"})
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    config = {"word_embedding_dimension": 64, "pooling_mode_cls_token": mode == "cls"}
    config.update(pooling_mode_mean_tokens=mode == "mean", pooling_mode_max_tokens=False, pooling_mode_lasttoken=False)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(config))


def reference(folder: Path, text: str, mode: str, normalize: bool) -> torch.Tensor:
    """What sentence-transformers computes: transformers' model, its last hidden states pooled over the mask."""
    import tokenizers
    from transformers import AutoModel

    model = AutoModel.from_pretrained(folder).eval()
    ids = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text).ids
    with torch.no_grad():
        h = model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids))).last_hidden_state[0]
    v = h.mean(dim=0) if mode == "mean" else h[0]
    return torch.nn.functional.normalize(v, dim=0) if normalize else v


@pytest.mark.parametrize(("mode", "normalize"), [("mean", True), ("cls", False)])
def test_vectors_equal_sentence_transformers_pooling(encoder, tmp_path, mode, normalize):
    pytest.importorskip("transformers")
    import shutil

    folder = tmp_path / "st"
    shutil.copytree(encoder, folder)
    sentence_transformers_files(folder, mode, normalize)
    result = embed(folder, TEXTS)
    assert (result.pooling, result.normalized) == (mode, normalize)
    assert result.notes == (f"{folder}: a Hugging Face checkpoint, converted on load",)  # the pooling was said
    for text, vector in zip(TEXTS, result.vectors, strict=True):
        assert len(vector) == 64
        torch.testing.assert_close(torch.tensor(vector), reference(folder, text, mode, normalize), rtol=0, atol=1e-5)
    if normalize:
        assert all(abs(sum(x * x for x in v) - 1) < 1e-5 for v in result.vectors)


def test_without_a_pooling_config_an_encoder_averages_and_says_so(encoder):
    result = embed(encoder, TEXTS[:1])
    assert result.pooling == "mean" and not result.normalized
    assert result.notes[-1] == "no sentence-transformers pooling config: mean pooling (--pooling to choose)"
    last = embed(encoder, TEXTS[:1], pooling="last", normalize=True)
    assert last.pooling == "last" and abs(sum(x * x for x in last.vectors[0]) - 1) < 1e-5
    assert last.vectors != result.vectors


def test_a_decoder_takes_its_last_token(tmp_path):
    torch.manual_seed(0)
    model = zoo.build("gpt-tiny")
    write_run(tmp_path / "run", model, ByteTokenizer(), objective="causal_lm", labels=None)
    result = embed(tmp_path / "run", ["abc"])
    ids = torch.tensor([[ByteTokenizer.cls_id, *ByteTokenizer().encode("abc")]])
    with torch.no_grad():
        expected = model.eval()(ids).hidden_states[0, -1]
    assert result.pooling == "last"
    torch.testing.assert_close(torch.tensor(result.vectors[0]), expected, rtol=0, atol=1e-6)


def test_bad_poolings_and_models_are_refused(encoder, tmp_path):
    with pytest.raises(PredictError, match="pooling 'max': choose mean, cls, last"):
        embed(encoder, TEXTS, pooling="max")
    with pytest.raises(PredictError, match="no inputs"):
        embed(encoder, [])
    folder = tmp_path / "two"
    import shutil

    shutil.copytree(encoder, folder)
    sentence_transformers_files(folder, "mean", False)
    config = json.loads((folder / "1_Pooling" / "config.json").read_text())
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({**config, "pooling_mode_max_tokens": True}))
    with pytest.raises(PredictError, match="zoo embeds with one of mean, cls, last; give --pooling"):
        embed(folder, TEXTS)
    t5 = tmp_path / "t5"
    write_run(t5, zoo.build("t5-tiny"), ByteTokenizer(), objective="seq2seq", labels=None)
    assert_clean_error(cli("predict", str(t5), "hi", "--embed"), "encoder-decoder model", "--embed")


def test_the_command_prints_vectors_and_json(encoder):
    table = cli("predict", str(encoder), *TEXTS, "--embed")
    assert table.exit_code == 0, table.output
    assert "64 dims, mean pooling" in table.output and "norm" in table.output
    as_json = cli("predict", str(encoder), *TEXTS, "--embed", "--pooling", "cls", "--normalize", "--json")
    data = json.loads(as_json.output)
    assert (data["task"], data["pooling"], data["normalized"]) == ("feature-extraction", "cls", True)
    assert [e["input"] for e in data["embeddings"]] == TEXTS
    assert data["embeddings"][0]["vector"] == pytest.approx(
        list(embed(encoder, TEXTS[:1], pooling="cls", normalize=True).vectors[0])
    )
