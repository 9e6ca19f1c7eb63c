"""An imported checkpoint reads text with its own tokenizer: ``zoo generate``, ``zoo eval``, ``zoo chat`` and
``zoo train --init-from`` on a Hugging Face folder, and on its ``zoo import``, give transformers' own ids and text;
a model without a tokenizer is refused with how to give it one, never read as bytes; generation streams."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import zoo
from zoo.cli import app
from zoo.errors import TrainError
from zoo.generate import ChatSession, generate, generate_text
from zoo.train.run import load_run

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
transformers.logging.set_verbosity_error()

TOOL = Path(__file__).resolve().parents[1] / "tools" / "imported_model_check.py"
spec = importlib.util.spec_from_file_location("imported_model_check", TOOL)
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)  # the plain-install job's tiny Llama and its tokenizer, shared
TEXT = check.TEXT


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A tiny random Llama saved with its tokenizer (``hf``), its ``zoo import`` (``zoo``), and the same weights
    without any tokenizer (``bare``) with its import (``bare-zoo``)."""
    root = tmp_path_factory.mktemp("text")
    torch.manual_seed(0)
    model = check.tiny_llama(hidden=32)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    model.save_pretrained(root / "bare")
    model.save_pretrained(root / "hf")
    check.save_tokenizer(root / "hf")
    runner = CliRunner()
    for source, out in (("hf", "zoo"), ("bare", "bare-zoo")):
        done = runner.invoke(app, ["import", str(root / source), "--out", str(root / out)])
        assert done.exit_code == 0, done.output
    (root / "heldout.txt").write_text(TEXT, encoding="utf-8")
    return root


def chat_ids(tok, messages) -> list[int]:
    """transformers' ids of a conversation with the assistant's turn opened (a list, whatever its version returns)."""
    out = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(out["input_ids"] if hasattr(out, "keys") else out)


def reference(folder):
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    return tok, transformers.AutoModelForCausalLM.from_pretrained(folder).eval()


@pytest.mark.parametrize("which", ["hf", "zoo"])
def test_generate_gives_the_text_of_transformers_pipeline(folders, which):
    tok, model = reference(folders / "hf")
    pipe = transformers.pipeline("text-generation", model=model, tokenizer=tok)
    expected = pipe("The quick", max_new_tokens=20, do_sample=False)[0]["generated_text"]
    texts, _ = generate_text(folders / which, "The quick", max_new_tokens=20)
    assert "The quick" + texts[0] == expected
    done = CliRunner().invoke(
        app, ["generate", str(folders / which), "--prompt", "The quick", "--new", "20"] + ["--temperature", "0"]
    )
    assert done.exit_code == 0, done.output
    assert expected in done.stdout.replace("\n", "")


def test_the_ids_are_transformers_own(folders):
    tok, _ = reference(folders / "hf")
    ours = load_run(folders / "zoo").tokenizer
    for text in ("The quick brown fox", " a zoo\n of", "unseen wörds ✓"):
        assert ours.encode_prompt(text) == tok(text)["input_ids"]
        assert ours.encode(text) == tok(text, add_special_tokens=False)["input_ids"]
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo"},
        {"role": "user", "content": "a?"},
    ]
    assert ours.encode_chat(messages) == chat_ids(tok, messages)


def test_generation_stops_at_the_checkpoints_eos(folders):
    run = load_run(folders / "zoo")
    assert run.tokenizer.stop_ids == (1,)
    _, model = reference(folders / "hf")
    ids = run.tokenizer.encode_prompt("The lazy")
    with torch.no_grad():
        expected = model.generate(torch.tensor([ids]), max_new_tokens=40, do_sample=False)[0, len(ids) :].tolist()
    out = generate(run.model, [ids], max_new_tokens=40, stop_tokens=run.tokenizer.stop_ids).tokens[0]
    assert out == [t for t in expected if t != 1][: len(out)] and (len(out) == 40 or expected[len(out)] == 1)


def test_chat_prompt_is_the_chat_template_and_generates_as_transformers(folders):
    tok, model = reference(folders / "hf")
    ids = chat_ids(tok, [{"role": "user", "content": "hello"}])
    with torch.no_grad():
        new = model.generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False)[0, len(ids) :]
    texts, _ = generate_text(folders / "zoo", "hello", max_new_tokens=12, chat=True)
    assert texts[0] == tok.decode(new, skip_special_tokens=True)


def test_stream_pieces_join_to_the_text(folders):
    whole, _ = generate_text(folders / "zoo", "A zoo", max_new_tokens=24)
    pieces = list(generate_text(folders / "zoo", "A zoo", max_new_tokens=24, stream=True))
    assert len(pieces) > 1 and "".join(pieces) == whole[0]


def test_ctrl_c_keeps_what_was_printed_and_exits_130(folders, monkeypatch):
    import zoo.generate.text as text

    real = text.stream_text

    def interrupted(steps, tokenizer):
        pieces = real(steps, tokenizer)
        yield next(pieces)
        yield next(pieces)
        raise KeyboardInterrupt

    monkeypatch.setattr(text, "stream_text", interrupted)
    whole, _ = generate_text(folders / "zoo", "A zoo", max_new_tokens=24)
    done = CliRunner().invoke(app, ["generate", str(folders / "zoo"), "--prompt", "A zoo", "--temperature", "0"])
    assert done.exit_code == 130
    printed = done.stdout.strip().removeprefix("A zoo")
    assert printed and whole[0].startswith(printed)


def test_chat_keeps_its_cache_and_answers_as_a_fresh_computation(folders):
    session = ChatSession(folders / "zoo", max_new_tokens=10)
    first = "".join(session.send("hello"))
    held = len(session.cached)
    second = "".join(session.send("and then?"))
    assert len(session.cached) > held  # the second turn prefilled only what followed
    tok, model = reference(folders / "hf")
    messages = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": first}]
    messages.append({"role": "user", "content": "and then?"})
    ids = chat_ids(tok, messages)
    with torch.no_grad():
        new = model.generate(torch.tensor([ids]), max_new_tokens=10, do_sample=False)[0, len(ids) :]
    assert second == tok.decode(new, skip_special_tokens=True)


def test_zoo_chat_command_talks_turn_by_turn(folders):
    done = CliRunner().invoke(app, ["chat", str(folders / "zoo"), "--new", "8"], input="hello\nand then?\n")
    assert done.exit_code == 0, done.output
    session = ChatSession(folders / "zoo", max_new_tokens=8)
    replies = ["".join(session.send("hello")), "".join(session.send("and then?"))]
    # printed as they came, but no line ends in spaces (zoo's output never does)
    assert all(reply.rstrip(" \t") in done.stdout for reply in replies), (replies, done.stdout)


@pytest.mark.parametrize("which", ["hf", "zoo"])
def test_eval_reads_the_text_with_the_checkpoints_tokenizer(folders, which):
    result = zoo.train.evaluate(folders / which, folders / "heldout.txt")
    tok, model = reference(folders / "hf")
    ids = tok(TEXT * 0 + open(folders / "heldout.txt").read(), add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        loss = model(torch.tensor([ids]), labels=torch.tensor([ids])).loss.item()
    assert result.metrics["loss"] == pytest.approx(loss, abs=1e-4)


@pytest.mark.parametrize(
    ("command", "use"),
    [
        (["generate", "{m}", "--prompt", "hi"], "generate text with"),
        (["eval", "{m}", "--data", "{root}/heldout.txt"], "turn {root}/heldout.txt into token ids"),
        (["chat", "{m}"], "chat with"),
    ],
)
def test_a_model_without_a_tokenizer_is_refused_with_how_to_add_one(folders, command, use):
    for which, fix in (
        ("bare", "save the checkpoint's tokenizer into it (AutoTokenizer...save_pretrained('{m}'))"),
        (
            "bare-zoo",
            "copy the checkpoint's tokenizer.json and tokenizer_config.json into {m}/hf (zoo import "
            "carries them from a Hugging Face folder that has them), or train it with zoo train",
        ),
    ):
        m = str(folders / which)
        args = [a.format(m=m, root=folders) for a in command]
        done = CliRunner().invoke(app, args)
        assert done.exit_code != 0
        expected = f"error: {m} has no tokenizer to {use.format(root=folders)}: {fix.format(m=m)}"
        assert " ".join(expected.split()) in " ".join(done.output.split()), done.output


def test_train_init_from_an_import_reads_its_tokenizer(folders, tmp_path):
    data = tmp_path / "my.txt"
    data.write_text(TEXT, encoding="utf-8")
    recipe = zoo.load(folders / "zoo").recipe
    (tmp_path / "r.yaml").write_text(json.dumps(recipe.model_dump(mode="json")), encoding="utf-8")
    args = ["train", str(tmp_path / "r.yaml"), "--init-from", str(folders / "zoo"), "--data", str(data)]
    args += ["--set", "train.steps=2", "--set", "train.seq_len=32", "--set", "train.batch_size=2", "--no-summary"]
    done = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "run"), "--device", "cpu"])
    assert done.exit_code == 0, done.output
    saved = json.loads(next((tmp_path / "run" / "checkpoints").glob("step-*/tokenizer.json")).read_text())
    assert saved["type"] == "hf"
    assert load_run(tmp_path / "run").tokenizer.encode("The quick") == load_run(folders / "zoo").tokenizer.encode(
        "The quick"
    )
    done = CliRunner().invoke(app, ["export", str(tmp_path / "run"), str(tmp_path / "hf-out")])
    assert done.exit_code == 0, done.output
    theirs, exported = reference(folders / "hf")[0], transformers.AutoTokenizer.from_pretrained(tmp_path / "hf-out")
    messages = [{"role": "user", "content": "hi there"}]
    assert exported("The quick")["input_ids"] == theirs("The quick")["input_ids"]
    assert chat_ids(exported, messages) == chat_ids(theirs, messages)
    bare = [*args[:3], str(folders / "bare-zoo"), *args[4:], "--out", str(tmp_path / "bare-run"), "--device", "cpu"]
    done = CliRunner().invoke(app, bare)
    assert done.exit_code != 0 and f"{folders / 'bare-zoo'} has no tokenizer to train it on text with" in done.output


def test_no_tokenizer_is_never_bytes(folders):
    with pytest.raises(TrainError, match="has no tokenizer"):
        generate_text(folders / "bare-zoo", "hi", max_new_tokens=2)


def hub_cache(root, repo_id: str, source) -> str:
    """A hub cache folder in the hub's own layout: ``models--owner--name/{refs/main, snapshots/REV, blobs}``, each
    file of the snapshot a link into the blobs."""
    import hashlib
    import os

    repo = root / f"models--{repo_id.replace('/', '--')}"
    revision = hashlib.sha1(repo_id.encode()).hexdigest()
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    snapshot, blobs = repo / "snapshots" / revision, repo / "blobs"
    snapshot.mkdir(parents=True)
    blobs.mkdir()
    for file in source.iterdir():
        data = file.read_bytes()
        blob = blobs / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        os.symlink(os.path.relpath(blob, snapshot), snapshot / file.name)
    return str(root)


def test_a_hub_id_reads_from_the_hub_cache_offline(folders, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", hub_cache(tmp_path / "cache", "tiny-org/tiny-llama", folders / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    expected, _ = generate_text(folders / "hf", "The quick", max_new_tokens=12)
    assert generate_text("tiny-org/tiny-llama", "The quick", max_new_tokens=12)[0] == expected
    done = CliRunner().invoke(app, ["import", "tiny-org/tiny-llama"])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "models" / "tiny-llama" / "hf" / "tokenizer.json").is_file()
    assert generate_text(tmp_path / "models" / "tiny-llama", "The quick", max_new_tokens=12)[0] == expected
    done = CliRunner().invoke(app, ["summary", "tiny-org/tiny-llama"])
    assert done.exit_code == 0, done.output


def test_a_hub_id_not_cached_while_offline_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(app, ["import", "nobody/nothing"])
    assert done.exit_code == 2
    assert " ".join(done.output.split()) == (
        "error: nobody/nothing is not a folder, and not in the Hugging Face cache while HF_HUB_OFFLINE is set: "
        "download it where the hub is reachable (hf download nobody/nothing), or unset HF_HUB_OFFLINE"
    )
