"""``zoo predict``: a text classifier's labels (the run's own) with probabilities that sum to 1, a masked LM's
tokens for each [MASK], a ViT's labels for image files; every kind of folder; JSON that agrees with the
table; clean errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from clean_errors import FAST, assert_clean_error, cli
from run_files import write_run

import zoo
from zoo.errors import ArgumentError, PredictError
from zoo.predict import MASK_MARKER, predict
from zoo.train.tokenizer import ByteTokenizer

TEXTS = ["The orchestra tuned up before the concert.", "naïve café — “quoted” 🙂"]


@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory) -> Path:
    """A text classifier trained for two steps by zoo train: three classes from the embedded topics."""
    from zoo.train import train

    run = tmp_path_factory.mktemp("predict") / "run"
    train("bert-tiny", out=run, **{**FAST, "head": {"type": "classification", "pooler": True}, "num_classes": 3})
    return run


def run_labels(run: Path) -> list[str]:
    from zoo.locate import latest_checkpoint

    return json.loads((latest_checkpoint(run) / "run.json").read_text())["labels"]


def test_classifier_gives_the_runs_labels_with_probabilities_that_sum_to_one(classifier_run):
    labels = run_labels(classifier_run)
    assert len(labels) == 3
    result = predict(classifier_run, TEXTS)
    assert result.task == "text-classification"
    assert result.notes == (f"run {classifier_run}: its latest complete checkpoint, step-00000002",)
    assert [p.input for p in result.predictions] == TEXTS
    for p in result.predictions:
        assert sorted(c.label for c in p.candidates) == sorted(labels)  # top-k: 5 or the number of labels
        assert sum(c.probability for c in p.candidates) == pytest.approx(1.0, abs=1e-6)
        assert [c.probability for c in p.candidates] == sorted((c.probability for c in p.candidates), reverse=True)
        assert all(labels[c.id] == c.label for c in p.candidates)
    (top,) = predict(classifier_run, TEXTS[:1], top_k=1).predictions
    assert top.candidates == result.predictions[0].candidates[:1]


def test_probabilities_are_the_models_softmax_over_cls_and_the_text(classifier_run):
    from zoo.locate import latest_checkpoint

    model = zoo.load(classifier_run).eval()
    ids = torch.tensor([[ByteTokenizer.cls_id, *ByteTokenizer().encode(TEXTS[1])]])
    with torch.no_grad():
        expected = model(ids).logits[0].softmax(-1).tolist()
    (p,) = predict(latest_checkpoint(classifier_run), TEXTS[1:]).predictions  # the checkpoint folder itself
    assert {c.id: c.probability for c in p.candidates} == pytest.approx(dict(enumerate(expected)), abs=1e-6)


def test_model_and_hugging_face_folders_predict_what_the_run_does(classifier_run, tmp_path):
    pytest.importorskip("tokenizers")
    from zoo.hf import export_checkpoint

    expected = predict(classifier_run, TEXTS).predictions
    zoo.save(zoo.load(classifier_run), tmp_path / "model")  # no labels, no tokenizer: LABEL_i, bytes
    export_checkpoint(classifier_run, tmp_path / "hf")  # labels in id2label, tokenizer.json
    saved = predict(tmp_path / "model", TEXTS)
    assert any("vocabulary is the 256 bytes" in note for note in saved.notes)
    for folder, names in ((tmp_path / "model", [f"LABEL_{i}" for i in range(3)]), (tmp_path / "hf", None)):
        for p, q in zip(predict(folder, TEXTS).predictions, expected, strict=True):
            assert [c.id for c in p.candidates] == [c.id for c in q.candidates]
            assert [c.label for c in p.candidates] == [names[c.id] if names else c.label for c in q.candidates]
            assert [c.probability for c in p.candidates] == pytest.approx([c.probability for c in q.candidates])


def test_json_parses_and_agrees_with_the_table(classifier_run):
    table = cli("predict", str(classifier_run), *TEXTS, "--top-k", "2")
    assert table.exit_code == 0, table.output
    as_json = cli("predict", str(classifier_run), *TEXTS, "--top-k", "2", "--json")
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.output)
    assert data["task"] == "text-classification" and data["model"] == str(classifier_run)
    assert "its latest complete checkpoint, step-00000002" in " ".join(table.output.split())
    rows = [line.split() for line in table.output.splitlines()]
    shown = [(r[0], r[1]) for r in rows if len(r) == 2 and r[0] in run_labels(classifier_run)]
    expected = [(c["label"], f"{c['probability']:.4f}") for p in data["predictions"] for c in p["top"]]
    assert shown == expected and len(expected) == 4
    assert [p["input"] for p in data["predictions"]] == TEXTS


def test_a_long_text_is_cut_to_the_position_table_and_said_so(classifier_run):
    long = "word " * 100  # 500 bytes; bert-tiny has 128 positions
    (p,) = predict(classifier_run, [long]).predictions
    assert p.truncated and sum(c.probability for c in p.candidates) == pytest.approx(1.0, abs=1e-6)
    result = cli("predict", str(classifier_run), long)
    assert "its end was left out" in result.output


def test_masked_lm_fills_each_mask_with_its_likeliest_tokens(tmp_path):
    torch.manual_seed(0)
    model = zoo.build("bert-tiny")
    write_run(tmp_path / "run", model, ByteTokenizer(), objective="masked_lm", labels=None)
    text = f"hel{MASK_MARKER}o th{MASK_MARKER}re"
    result = predict(tmp_path / "run", [text], top_k=3)
    assert result.task == "fill-mask"
    assert [(p.input, p.mask, len(p.candidates)) for p in result.predictions] == [(text, 0, 3), (text, 1, 3)]
    ids = torch.tensor([[*b"hel", ByteTokenizer.mask_id, *b"o th", ByteTokenizer.mask_id, *b"re"]])
    with torch.no_grad():
        probs = model.eval()(ids).logits[0].softmax(-1)
    for p, place in zip(result.predictions, (3, 8), strict=True):
        top = probs[place].topk(3)
        assert [c.id for c in p.candidates] == top.indices.tolist()
        assert [c.probability for c in p.candidates] == pytest.approx(top.values.tolist(), abs=1e-6)
    every = predict(tmp_path / "run", [text], top_k=256).predictions
    assert all(sum(c.probability for c in p.candidates) == pytest.approx(1.0, abs=1e-5) for p in every)
    assert {c.label for c in every[0].candidates} >= {"a", " ", "<mask>", "<0xC3>"}  # a byte of no character
    data = json.loads(cli("predict", str(tmp_path / "run"), text, "--top-k", "2", "--json").output)
    assert [p["mask"] for p in data["predictions"]] == [0, 1]


def test_vit_labels_image_files_as_the_training_read_them(tmp_path):
    image = pytest.importorskip("PIL.Image")
    torch.manual_seed(0)
    model = zoo.build("vit-tiny")
    labels = [f"digit {d}" for d in range(10)]
    stats = {"image_mean": [0.3], "image_std": [0.2]}
    write_run(tmp_path / "run", model, None, objective="image_classification", labels=labels, **stats)
    pixels = torch.randint(0, 256, (8, 8), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    image.fromarray(pixels.numpy(), mode="L").save(tmp_path / "a.png")
    image.new("L", (20, 20), 200).save(tmp_path / "b.png")  # resized to 8x8
    result = predict(tmp_path / "run", [tmp_path / "a.png", tmp_path / "b.png"], top_k=10)
    assert result.task == "image-classification"
    for p in result.predictions:
        assert sorted(c.label for c in p.candidates) == sorted(labels)
        assert sum(c.probability for c in p.candidates) == pytest.approx(1.0, abs=1e-6)
    with torch.no_grad():
        expected = model.eval()(((pixels.float() / 255 - 0.3) / 0.2)[None, None]).logits[0].softmax(-1)
    first = {c.id: c.probability for c in result.predictions[0].candidates}
    assert first == pytest.approx(dict(enumerate(expected.tolist())), abs=1e-6)
    (alone,) = predict(tmp_path / "run", [tmp_path / "a.png"]).predictions  # top 5 by default
    assert [c.id for c in alone.candidates] == [c.id for c in result.predictions[0].candidates[:5]]


def test_images_without_pillow_say_what_to_install(tmp_path, monkeypatch):
    write_run(tmp_path / "run", zoo.build("vit-tiny"), None, objective="image_classification", labels=None)
    (tmp_path / "a.png").write_bytes(b"")
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(PredictError, match=r'pip install "zoo\[data\]"'):
        predict(tmp_path / "run", [tmp_path / "a.png"])


def test_errors_are_clean(classifier_run, tmp_path):
    zoo.save(zoo.build("gpt-tiny"), tmp_path / "decoder")
    assert_clean_error(cli("predict", str(tmp_path / "decoder"), "hello"), "decoder", "zoo generate")
    zoo.save(zoo.build("t5-tiny"), tmp_path / "t5")
    assert_clean_error(cli("predict", str(tmp_path / "t5"), "hello"), "encoder-decoder", "zoo generate")
    write_run(tmp_path / "mlm", zoo.build("bert-tiny"), ByteTokenizer(), objective="masked_lm", labels=None)
    assert_clean_error(cli("predict", str(tmp_path / "mlm"), "no marker here"), "has no [MASK]")
    write_run(tmp_path / "vit", zoo.build("vit-tiny"), None, objective="image_classification", labels=None)
    assert_clean_error(cli("predict", str(tmp_path / "vit"), str(tmp_path / "nope.png")), "no such image file")
    (tmp_path / "bad.png").write_text("not an image")
    assert_clean_error(cli("predict", str(tmp_path / "vit"), str(tmp_path / "bad.png")), "is not a readable image")
    assert_clean_error(cli("predict", str(classifier_run), "hi", "--top-k", "0"), "top_k must be >= 1")
    assert_clean_error(cli("predict", str(tmp_path / "nowhere"), "hi"), "no such folder")
    zoo.save(zoo.build("bert-tiny", vocab_size=300, head={"type": "classification"}, num_classes=2), tmp_path / "m")
    assert_clean_error(cli("predict", str(tmp_path / "m"), "hi"), "holds no tokenizer", "run folder")
    with pytest.raises(ArgumentError):
        predict(classifier_run, ["hi"], top_k=0)
    with pytest.raises(PredictError, match="no inputs"):
        predict(classifier_run, [])
