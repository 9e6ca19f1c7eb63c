"""Numbers at the ends of their documented ranges work, and numbers outside them are refused by name."""

from __future__ import annotations

import json
import math

import pytest
import torch

from zoo.analysis.plan import plan
from zoo.errors import PlanError
from zoo.generate.sampling import next_token_probs, sample_next


@pytest.mark.parametrize("temperature", [1e-300, 5e-324, 1e-30, 1e-7])
def test_the_smallest_temperatures_sample_the_likeliest_token(temperature):
    logits = torch.tensor([[0.5, 3.0, -1.0, 2.9], [10.0, -10.0, 0.0, 9.0]])
    probs = next_token_probs(logits, temperature=temperature)
    assert torch.isfinite(probs).all() and torch.equal(probs.argmax(-1), torch.tensor([1, 0]))
    assert torch.equal(sample_next(logits, temperature=temperature), torch.tensor([1, 0]))


@pytest.mark.parametrize("top_p", [1e-300, 1e-45, 1e-3])
def test_the_smallest_nucleus_keeps_the_likeliest_token(top_p):
    logits = torch.tensor([[0.5, 3.0, -1.0, 2.9]])
    probs = next_token_probs(logits, temperature=0.8, top_p=top_p)
    assert torch.equal(probs, torch.tensor([[0.0, 1.0, 0.0, 0.0]]))


def test_temperature_still_shapes_the_distribution():
    logits = torch.tensor([[1.0, 2.0, 3.0]])
    for t in (0.5, 1.0, 2.0):
        assert torch.allclose(next_token_probs(logits, temperature=t), (logits / t).softmax(-1), atol=1e-7)


@pytest.mark.parametrize("tokens", [math.nan, math.inf, -1.0, 0.0])
def test_plan_refuses_tokens_that_are_not_a_positive_finite_number(tokens):
    with pytest.raises(PlanError, match=r"--tokens must be a positive finite number, such as 1e9 \(got "):
        plan("gpt-tiny", gpu="cpu", tokens=tokens)


def test_a_prompt_longer_than_a_rope_models_context_is_refused():
    import zoo
    from zoo.errors import TrainError
    from zoo.generate import generate

    model = zoo.build("llama-tiny")
    limit = model.recipe.max_len
    with pytest.raises(TrainError, match=rf"the prompt needs {limit + 1:,} positions, beyond the {limit:,} the model"):
        generate(model, torch.zeros(1, limit + 1, dtype=torch.long), max_new_tokens=1)
    assert generate(model, torch.zeros(1, limit, dtype=torch.long), max_new_tokens=2) is not None


def test_a_tokenizer_larger_than_the_models_vocabulary_is_refused(tmp_path):
    import shutil

    from typer.testing import CliRunner

    from zoo.cli import app

    fast = ["--set", "train.steps=1", "--set", "train.tokenizer=bpe", "--no-summary", "--device", "cpu"]
    for name, vocab in (("small", 300), ("large", 400)):
        result = CliRunner().invoke(
            app, ["train", "gpt-tiny", "--out", str(tmp_path / name), "--set", f"vocab_size={vocab}", *fast]
        )
        assert result.exit_code == 0, result.output
    step = tmp_path / "small" / "checkpoints" / "step-00000001"
    shutil.copyfile(tmp_path / "large" / "checkpoints" / "step-00000001" / "tokenizer.json", step / "tokenizer.json")
    info = json.loads((step / "run.json").read_text())
    info["sha256"].pop("tokenizer.json", None)  # as a tool that records no checksum would leave it
    (step / "run.json").write_text(json.dumps(info))
    result = CliRunner().invoke(app, ["generate", str(tmp_path / "small"), "--prompt", "The ", "--new", "2"])
    assert result.exit_code == 2, result.output
    assert "has 400 tokens, more than the model's vocabulary (300)" in " ".join(result.stderr.split())
