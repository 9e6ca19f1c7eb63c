"""Exports that ``transformers.pipeline`` uses as they are: the tokenizer of the run (byte-level or trained
BPE) gives zoo's ids, greedy text generation gives zoo's text, a classifier keeps its labels, and an
imported checkpoint's own tokenizer files survive import -> export. Tiny models, written locally."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from clean_errors import cli
from run_files import write_run

import zoo
from zoo.generate import generate_text
from zoo.hf import export_checkpoint
from zoo.train.tokenizer import BPETokenizer, ByteTokenizer

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

TEXTS = [
    "The quick brown fox.",
    "naïve café — “quoted” 日本語 🙂",  # two-, three- and four-byte UTF-8
    "tabs\tand\nnewlines, <eos> and <pad> spelled out",
]
PROMPTS = ["The cat ", "naïve café "]


def tokenizer(kind: str):
    if kind == "byte":
        return ByteTokenizer()
    return BPETokenizer.train(["the quick brown fox jumps over the lazy dog; naïve café " * 40], vocab_size=300)


def decoder_run(tmp_path: Path, kind: str) -> Path:
    """A run folder of a small decoder with weights wide enough to generate varied bytes."""
    torch.manual_seed(0)
    tok = tokenizer(kind)
    model = zoo.build("gpt-tiny", vocab_size=tok.vocab_size)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)
    write_run(tmp_path / "run", model, tok, objective="causal_lm", labels=None)
    return tmp_path / "run"


@pytest.mark.parametrize("kind", ["byte", "bpe"])
def test_pipeline_generates_the_text_zoo_generates(tmp_path, kind):
    run = decoder_run(tmp_path, kind)
    export_checkpoint(run, tmp_path / "hf")
    pipe = transformers.pipeline("text-generation", model=str(tmp_path / "hf"), tokenizer=str(tmp_path / "hf"))
    for prompt in PROMPTS:
        texts, _ = generate_text(run, [prompt], max_new_tokens=24)
        out = pipe(prompt, max_new_tokens=24, do_sample=False)[0]["generated_text"]
        assert out == prompt + texts[0]
        assert len(texts[0]) > 0


@pytest.mark.parametrize("kind", ["byte", "bpe"])
def test_auto_tokenizer_gives_zoo_ids_and_special_tokens(tmp_path, kind):
    run = decoder_run(tmp_path, kind)
    zoo_tok = tokenizer(kind)
    export_checkpoint(run, tmp_path / "hf")
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    for text in TEXTS:
        ids = zoo_tok.encode(text)
        assert hf_tok(text)["input_ids"] == ids, text
        assert hf_tok.decode(ids, skip_special_tokens=True) == zoo_tok.decode(ids)
    specials = {"bos_token_id": zoo_tok.bos_id, "eos_token_id": zoo_tok.eos_id, "pad_token_id": zoo_tok.pad_id}
    assert {k: getattr(hf_tok, k) for k in specials} == specials
    generation = json.loads((tmp_path / "hf" / "generation_config.json").read_text())
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert {k: generation[k] for k in specials} == specials == {k: config[k] for k in specials}


def test_byte_tokenizer_maps_every_byte_to_its_own_id(tmp_path):
    export_checkpoint(decoder_run(tmp_path, "byte"), tmp_path / "hf")
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    every_char = "".join(chr(c) for c in range(1, 0x250)) + "\U0001f600\uffff"
    assert hf_tok(every_char)["input_ids"] == list(every_char.encode("utf-8"))
    assert hf_tok("a\x00b")["input_ids"] == ByteTokenizer().encode("a\x00b") == [97, 98]  # zoo drops NUL


def test_classifier_export_names_its_labels_and_reads_text_as_the_training_did(tmp_path):
    from zoo.predict import predict

    torch.manual_seed(0)
    model = zoo.build("bert-tiny", head={"type": "classification", "pooler": True}, num_classes=3)
    labels = ["art", "music", "sport"]
    write_run(tmp_path / "run", model, ByteTokenizer(), objective="classification", labels=labels)
    export_checkpoint(tmp_path / "run", tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["id2label"] == {"0": "art", "1": "music", "2": "sport"}
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert hf_tok("hi there")["input_ids"] == [ByteTokenizer.cls_id, *b"hi there"]  # [cls] first
    texts = ["the orchestra played", "a goal in the last minute"]
    pipe = transformers.pipeline("text-classification", model=str(tmp_path / "hf"))
    ours = predict(tmp_path / "run", texts).predictions
    for hf, mine in zip(pipe(texts, top_k=None), ours, strict=True):
        expected = {c.label: c.probability for c in mine.candidates}
        assert {d["label"]: d["score"] for d in hf} == pytest.approx(expected, abs=1e-5)


def test_masked_lm_export_fills_its_mask_token_in_the_fill_mask_pipeline(tmp_path):
    from zoo.predict import predict

    torch.manual_seed(0)
    write_run(tmp_path / "run", zoo.build("bert-tiny"), ByteTokenizer(), objective="masked_lm", labels=None)
    export_checkpoint(tmp_path / "run", tmp_path / "hf")
    pipe = transformers.pipeline("fill-mask", model=str(tmp_path / "hf"))
    hf = pipe("hel<mask>o there", top_k=3)
    (ours,) = predict(tmp_path / "run", ["hel[MASK]o there"], top_k=3).predictions
    assert [d["token"] for d in hf] == [c.id for c in ours.candidates]
    assert [d["score"] for d in hf] == pytest.approx([c.probability for c in ours.candidates], abs=1e-6)


def test_run_export_says_which_checkpoint_and_tokenizer_it_wrote(tmp_path):
    run = decoder_run(tmp_path, "byte")
    result = cli("export", str(run), "--to", "hf", str(tmp_path / "hf"))
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "its latest complete checkpoint, step-00000010" in text
    assert "tokenizer.json + tokenizer_config.json: zoo's byte-level tokenizer, of" in text


def test_model_folder_without_tokenizer_gets_the_byte_tokenizer_only_when_its_vocab_is_the_bytes(tmp_path):
    zoo.save(zoo.build("gpt-tiny"), tmp_path / "bytes")  # vocab_size 256, train.tokenizer byte
    result = cli("export", str(tmp_path / "bytes"), "--to", "hf", str(tmp_path / "bytes-hf"))
    assert result.exit_code == 0, result.output
    assert "holds no tokenizer but its vocabulary is the 256 bytes" in " ".join(result.output.split())
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "bytes-hf")
    assert hf_tok(TEXTS[1])["input_ids"] == ByteTokenizer().encode(TEXTS[1])

    zoo.save(zoo.build("llama-tiny", vocab_size=300), tmp_path / "other")
    result = cli("export", str(tmp_path / "other"), "--to", "hf", str(tmp_path / "other-hf"))
    assert result.exit_code == 0, result.output
    assert "holds no tokenizer" in " ".join(result.output.split())
    assert sorted(p.name for p in (tmp_path / "other-hf").iterdir()) == ["config.json", "model.safetensors"]


def test_import_then_export_keeps_the_checkpoints_tokenizer_files(tmp_path):
    from zoo.hf.tokenizer import backend, byte_symbols

    hf = tmp_path / "hf"
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend(ByteTokenizer()), bos_token="<bos>", eos_token="<eos>", pad_token="<pad>"
    )
    tok.save_pretrained(hf)
    (hf / "vocab.json").write_text(json.dumps({s: b for b, s in byte_symbols().items()}))
    (hf / "merges.txt").write_text("#version: 0.2\n")
    (hf / "special_tokens_map.json").write_text(json.dumps({"eos_token": "<eos>", "bos_token": "<bos>"}))
    config = transformers.GPT2Config(
        vocab_size=256, n_positions=32, n_embd=32, n_layer=2, n_head=4, bos_token_id=254, eos_token_id=255
    )
    transformers.GPT2LMHeadModel(config).save_pretrained(hf)  # writes generation_config.json too
    carried = sorted(p.name for p in hf.iterdir() if p.name not in ("config.json", "model.safetensors"))
    assert {"generation_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json"} <= set(carried)

    result = cli("import", str(hf), "--out", str(tmp_path / "zoo"))
    assert result.exit_code == 0, result.output
    assert "carried along" in result.output
    result = cli("export", str(tmp_path / "zoo"), "--to", "hf", str(tmp_path / "back"))
    assert result.exit_code == 0, result.output
    for name in carried:
        assert (tmp_path / "back" / name).read_bytes() == (hf / name).read_bytes(), name
    back = json.loads((tmp_path / "back" / "config.json").read_text())
    assert (back["bos_token_id"], back["eos_token_id"]) == (254, 255)
    again = transformers.AutoTokenizer.from_pretrained(tmp_path / "back")
    assert again(TEXTS[1])["input_ids"] == tok(TEXTS[1])["input_ids"]
