"""Generation: the KV cache gives exactly the tokens of recomputation, for every family and variant;
batching, padding, sampling and stop tokens behave as a user relies on; the cache holds what it should."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.errors import TrainError
from zoo.generate import generate, sample_next

# Every decoder and encoder-decoder tiny recipe, and the attention / position / FFN variants built from them.
VARIANTS = {
    "gpt-tiny": ("gpt-tiny", {}),
    "llama-tiny (gqa, rope, swiglu)": ("llama-tiny", {}),
    "moe-tiny (moe ffn)": ("moe-tiny", {}),
    "t5-tiny (encoder-decoder)": ("t5-tiny", {}),
    "mqa": ("gpt-tiny", {"attention": {"type": "mqa", "num_heads": 4}}),
    "gqa": ("gpt-tiny", {"attention": {"type": "gqa", "num_heads": 4, "num_kv_heads": 2}}),
    "rope": ("gpt-tiny", {"positional.type": "rope"}),
    "alibi": ("gpt-tiny", {"positional.type": "alibi"}),
    "sinusoidal": ("gpt-tiny", {"positional.type": "sinusoidal"}),
    "t5 relative bias": ("gpt-tiny", {"positional.type": "t5_relative"}),
    "llama alibi": ("llama-tiny", {"positional.type": "alibi"}),
    "moa attention": ("gpt-tiny", {"attention": {"type": "moa", "num_experts": 4, "top_k": 2}}),
    "t5-tiny mqa": ("t5-tiny", {"attention": {"type": "mqa", "num_heads": 4, "bias": False, "scale": 1.0}}),
}
# A larger init makes logits peaked and attention sharp, so a wrong position or a missing key changes tokens.
SHARP = {"init_std": 0.3}


def build(name: str, overrides: dict, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return zoo.build(name, **overrides, **SHARP).eval()


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_cached_greedy_equals_recomputation(variant):
    name, overrides = VARIANTS[variant]
    for seed in range(2):
        model = build(name, overrides, seed)
        prompts = torch.randint(1, 256, (3, 9), generator=torch.Generator().manual_seed(seed)).tolist()
        cached = generate(model, prompts, max_new_tokens=24, use_cache=True)
        recomputed = generate(model, prompts, max_new_tokens=24, use_cache=False)
        assert cached.tokens == recomputed.tokens
        assert all(len(t) == 24 for t in cached.tokens)
        assert len({tuple(t) for t in cached.tokens}) > 1, "the prompts should lead to different continuations"


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_prompt_decodes_the_same_alone_and_in_a_padded_batch(variant):
    name, overrides = VARIANTS[variant]
    model = build(name, overrides)
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(1, 256, (n,), generator=g).tolist() for n in (3, 11, 6)]
    batched = generate(model, prompts, max_new_tokens=16)
    alone = [generate(model, [p], max_new_tokens=16).tokens[0] for p in prompts]
    assert batched.tokens == alone
    assert generate(model, prompts, max_new_tokens=16, use_cache=False).tokens == alone


@pytest.mark.parametrize("variant", ["gpt-tiny", "sinusoidal"])
def test_generation_runs_past_the_position_table_with_the_same_windows_cached_or_not(variant):
    name, overrides = VARIANTS[variant]
    model = build(name, {**overrides, "max_len": 16, "train.seq_len": 16})
    prompts = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14]]  # left padding too
    cached = generate(model, prompts, max_new_tokens=40)
    assert all(len(t) == 40 for t in cached.tokens)
    assert cached.tokens == generate(model, prompts, max_new_tokens=40, use_cache=False).tokens
    assert cached.stats.cache_bytes == 2 * 2 * 2 * 4 * 16 * 16 * 4  # the cache never outgrows the table


def test_cache_is_preallocated_and_stores_only_the_key_value_heads():
    prompt, new = [[1, 2, 3, 4, 5]], 7
    sizes = {}
    for label, attention in {
        "mha": {"type": "mha", "num_heads": 4},
        "gqa": {"type": "gqa", "num_heads": 4, "num_kv_heads": 2},
        "mqa": {"type": "mqa", "num_heads": 4},
    }.items():
        model = build("gpt-tiny", {"attention": attention})
        sizes[label] = generate(model, prompt, max_new_tokens=new).stats.cache_bytes
    # 2 layers x (K and V) x batch 1 x Hkv heads x (prompt + new) positions x 16 dims x 4 bytes
    per_kv_head = 2 * 2 * 1 * (5 + new) * 16 * 4
    assert sizes == {"mha": 4 * per_kv_head, "gqa": 2 * per_kv_head, "mqa": 1 * per_kv_head}


def test_encoder_decoder_computes_cross_attention_keys_once():
    model = build("t5-tiny", {})
    calls = []
    for block in model.decoder.blocks:
        block.cross_attention.k_proj.register_forward_hook(lambda *_: calls.append(1))
    generate(model, [[5, 6, 7, 8]], max_new_tokens=10)
    assert len(calls) == len(model.decoder.blocks)  # once per layer, not once per new token
    calls.clear()
    generate(model, [[5, 6, 7, 8]], max_new_tokens=10, use_cache=False)
    assert len(calls) == 10 * len(model.decoder.blocks)


def test_stop_tokens_end_each_row_on_its_own():
    model = build("gpt-tiny", {})
    prompts = [[10, 20, 30], [40, 50, 60]]
    free = generate(model, prompts, max_new_tokens=12).tokens
    stop = free[0][4]
    stopped = generate(model, prompts, max_new_tokens=12, stop_tokens=[stop]).tokens
    assert stopped[0] == free[0][: free[0].index(stop)]
    row = free[1]
    assert stopped[1] == (row[: row.index(stop)] if stop in row else row)


def test_sampling_is_reproducible_and_greedy_at_the_limits():
    model = build("gpt-tiny", {})
    prompts = [[3, 1, 4, 1, 5]]
    greedy = generate(model, prompts, max_new_tokens=20).tokens
    a = generate(model, prompts, max_new_tokens=20, temperature=1.0, seed=7).tokens
    b = generate(model, prompts, max_new_tokens=20, temperature=1.0, seed=7).tokens
    c = generate(model, prompts, max_new_tokens=20, temperature=1.0, seed=8).tokens
    assert a == b and a != c
    assert generate(model, prompts, max_new_tokens=20, temperature=1.0, top_k=1, seed=3).tokens == greedy
    assert generate(model, prompts, max_new_tokens=20, temperature=1.0, top_p=1e-6, seed=3).tokens == greedy
    cached = generate(model, prompts, max_new_tokens=20, temperature=0.9, top_k=20, seed=5).tokens
    assert (
        cached == generate(model, prompts, max_new_tokens=20, temperature=0.9, top_k=20, seed=5, use_cache=False).tokens
    )


def test_top_k_and_top_p_sample_only_from_their_sets():
    logits = torch.tensor([[4.0, 3.0, 2.0, 1.0, 0.0, -1.0]]).repeat(2000, 1)
    g = torch.Generator().manual_seed(0)
    top2 = sample_next(logits, temperature=1.0, top_k=2, generator=g)
    assert set(top2.tolist()) == {0, 1}
    probs = logits[0].softmax(-1)  # 0.64, 0.23, 0.09, ...: the nucleus of 0.8 is the first two tokens
    assert probs[0] < 0.8 <= probs[:2].sum()
    nucleus = sample_next(logits, temperature=1.0, top_p=0.8, generator=g)
    assert set(nucleus.tolist()) == {0, 1}
    hot = sample_next(logits, temperature=100.0, generator=g)
    assert set(hot.tolist()) == set(range(6))  # a high temperature flattens towards uniform


def test_stats_report_latency_and_throughput():
    stats = generate(build("gpt-tiny", {}), [[1, 2, 3], [4, 5, 6]], max_new_tokens=8).stats
    assert (stats.batch_size, stats.prompt_tokens, stats.new_tokens) == (2, 3, 8)
    assert stats.ttft_s > 0 and stats.tpot_s > 0 and stats.tokens_per_s > 0
    assert generate(build("gpt-tiny", {}), [[1, 2]], max_new_tokens=3, use_cache=False).stats.cache_bytes == 0


def test_stats_give_the_step_time_near_the_start_and_near_the_end():
    stats = generate(build("gpt-tiny", {}), [[1, 2, 3]], max_new_tokens=41).stats
    # 40 steps after the first token; the first and last 10 are averaged, around positions 3 + 5 and 3 + 35
    assert (stats.start_position, stats.end_position) == (8, 38)
    assert stats.tpot_start_s > 0 and stats.tpot_end_s > 0
    short = generate(build("gpt-tiny", {}), [[1]], max_new_tokens=1).stats
    assert (short.tpot_start_s, short.start_position, short.tpot_end_s, short.end_position) == (0.0, 0, 0.0, 0)


def test_bad_requests_are_clear_errors():
    model = build("gpt-tiny", {})
    with pytest.raises(TrainError, match=r"the prompt needs 129 positions, beyond the learned position table"):
        generate(model, [list(range(1, 130))], max_new_tokens=2)
    with pytest.raises(TrainError, match="at least one token"):
        generate(model, [[]], max_new_tokens=2)
    with pytest.raises(TrainError, match="does not generate"):
        generate(zoo.build("vit-tiny"), [[1]], max_new_tokens=2)


def test_last_only_gives_the_last_positions_logits():
    torch.manual_seed(0)
    model = zoo.build("llama-tiny").eval()
    ids = torch.randint(1, 100, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.bool)
    mask[1, :3] = False  # left padding
    full = model(ids, attention_mask=mask).logits
    last = model(ids, attention_mask=mask, last_only=True).logits
    assert last.shape == (2, 1, full.shape[-1])
    torch.testing.assert_close(last[:, 0], full[:, -1])
    with pytest.raises(ValueError, match="last_only computes the logits of the last position only"):
        model(ids, labels=ids, last_only=True)
