"""Speculative decoding: greedy output equals the target's, sampling keeps the target's distribution, refusals."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.errors import ArgumentError, TrainError
from zoo.generate import generate
from zoo.speculative import speculative_generate, verify

PROMPTS = [[5, 17, 3], [9], [40, 2, 2, 7, 100, 31]]


def randomised(recipe: str, seed: int, **overrides) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = zoo.build(recipe, **overrides).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


@pytest.mark.parametrize("recipe", ["gpt-tiny", "llama-tiny", "moe-tiny"])
@pytest.mark.parametrize("draft_tokens", [1, 3, 6])
def test_greedy_tokens_are_the_targets_whatever_the_draft(recipe, draft_tokens):
    target = randomised(recipe, 0)
    draft = randomised(recipe, 1, num_layers=2)
    expected = generate(target, PROMPTS, max_new_tokens=20).tokens
    out = speculative_generate(target, draft, PROMPTS, max_new_tokens=20, draft_tokens=draft_tokens)
    assert out.tokens == expected
    s = out.stats
    assert s.new_tokens == 60 and 0 <= s.accepted <= s.proposed
    # every target pass gives one token plus the proposals it kept
    assert s.new_tokens == s.target_passes + s.accepted


def test_a_draft_that_is_the_target_is_always_right():
    target = randomised("gpt-tiny", 0)
    out = speculative_generate(target, target, PROMPTS, max_new_tokens=21, draft_tokens=4)
    assert out.tokens == generate(target, PROMPTS, max_new_tokens=21).tokens
    assert out.stats.acceptance_rate == 1.0
    assert out.stats.target_passes == 3 * (1 + 4)  # prefill, then 4 rounds of 4 kept + 1 per row
    sampled = speculative_generate(target, target, PROMPTS, max_new_tokens=21, temperature=1.0, seed=3)
    assert sampled.stats.acceptance_rate == 1.0  # p / q = 1: nothing is rejected


def test_stop_tokens_end_a_row_where_the_target_would():
    target, draft = randomised("gpt-tiny", 0), randomised("gpt-tiny", 1, num_layers=1)
    plain = generate(target, PROMPTS, max_new_tokens=20).tokens
    stop = plain[0][5]
    expected = generate(target, PROMPTS, max_new_tokens=20, stop_tokens=[stop]).tokens
    assert speculative_generate(target, draft, PROMPTS, max_new_tokens=20, stop_tokens=[stop]).tokens == expected


def test_verification_draws_from_the_targets_distribution():
    """One proposal from q, then accept or resample: the token's frequencies are p's, not q's."""
    g = torch.Generator().manual_seed(0)
    p = torch.tensor([0.5, 0.3, 0.15, 0.05])
    q = torch.tensor([0.1, 0.2, 0.3, 0.4])
    counts = torch.zeros(4)
    trials = 8000
    for _ in range(trials):
        d = torch.multinomial(q, 1, generator=g)
        kept, following = verify(torch.stack([p, p]), q[None], d, greedy=False, generator=g)
        counts[int(d) if kept else following] += 1
    torch.testing.assert_close(counts / trials, p, rtol=0, atol=0.03)


def test_sampled_speculative_decoding_is_reproducible_with_a_seed():
    target, draft = randomised("gpt-tiny", 0), randomised("gpt-tiny", 1, num_layers=1)
    a = speculative_generate(target, draft, PROMPTS, max_new_tokens=15, temperature=0.8, top_k=20, seed=7)
    b = speculative_generate(target, draft, PROMPTS, max_new_tokens=15, temperature=0.8, top_k=20, seed=7)
    assert a.tokens == b.tokens and [len(t) for t in a.tokens] == [15, 15, 15]


def test_drafts_that_cannot_serve_are_refused():
    target = randomised("gpt-tiny", 0)
    other_vocab = randomised("llama-tiny", 1, vocab_size=300)
    with pytest.raises(ArgumentError, match=r"the draft's vocabulary \(300 tokens, 'llama-tiny'\) is not the target's"):
        speculative_generate(target, other_vocab, PROMPTS, max_new_tokens=4)
    with pytest.raises(ArgumentError, match=r"draft_tokens is 0; it must be 1 \.\. 64"):
        speculative_generate(target, target, PROMPTS, max_new_tokens=4, draft_tokens=0)
    window = randomised("llama-tiny", 1, vocab_size=256, **{"attention.window": 4})
    with pytest.raises(TrainError, match="layer 0 keeps a RollingKVCache, which cannot drop positions"):
        speculative_generate(target, window, PROMPTS, max_new_tokens=4)
    with pytest.raises(TrainError, match="needs two decoders; the draft is a EncoderDecoderModel"):
        speculative_generate(target, zoo.build("t5-tiny", vocab_size=256), PROMPTS, max_new_tokens=4)
    with pytest.raises(TrainError, match="speculative decoding of 'gpt-tiny'"):
        speculative_generate(target, target, PROMPTS, max_new_tokens=200)


def test_zoo_generate_with_a_draft_prints_the_same_text_and_the_acceptance(tmp_path):
    from typer.testing import CliRunner

    from zoo.cli import app

    def train(name: str, layers: int):
        sets = ["--set", "train.steps=3", "--set", "train.batch_size=2", "--set", "train.seq_len=16"]
        sets += ["--set", f"num_layers={layers}", "--set", "train.eval_interval=3"]
        result = CliRunner().invoke(app, ["train", "gpt-tiny", "--out", str(tmp_path / name), "--device", "cpu", *sets])
        assert result.exit_code == 0, result.output

    train("target", 2)
    train("draft", 1)
    ask = ["generate", str(tmp_path / "target"), "--prompt", "The ", "--max-new-tokens", "12", "--temperature", "0"]
    plain = CliRunner().invoke(app, ask)
    fast = CliRunner().invoke(app, [*ask, "--draft", str(tmp_path / "draft"), "--stats"])
    assert plain.exit_code == 0 and fast.exit_code == 0, fast.output
    assert fast.output.startswith(plain.output.strip())
    assert "acceptance rate" in fast.output and "new tokens per target pass" in fast.output
