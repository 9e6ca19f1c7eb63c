"""The static KV cache and the compiled decode step give the tokens of recomputation, for every tiny recipe
that generates (plugins' mixers included); the cache's own contract; clear refusals."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.utils import counters

import zoo
from zoo.cache import KVCache, RollingKVCache, StaticKVCache, static_cache
from zoo.errors import ArgumentError, TrainError
from zoo.generate import COMPILED_CACHE_QUANTUM, generate
from zoo.recipe.loading import named_recipes

GENERATING = ("decoder", "encoder-decoder")
TINY = sorted(
    name
    for name in named_recipes()
    if name.endswith("-tiny")
    and zoo.load_recipe(name).architecture in GENERATING
    and zoo.load_recipe(name).encoder_embedding is None  # token prompts (whisper-tiny hears audio: test_whisper.py)
)
PROMPTS = [[5, 17, 3, 8, 8], [9], [40, 2, 2, 7, 100, 31, 4]]  # left-padded to 7: three paddings differ


def randomised(recipe: str, seed: int = 0) -> torch.nn.Module:
    """A tiny model whose greedy choices are not ties (its init alone can leave near-uniform logits)."""
    torch.manual_seed(seed)
    model = zoo.build(recipe).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


def test_every_generating_family_is_here():
    assert {"gpt-tiny", "llama-tiny", "moe-tiny", "t5-tiny", "bart-tiny"} <= set(TINY)


SLOW_TO_TRACE = {
    *("jamba-tiny", "mamba-tiny", "mamba2-tiny", "rwkv-tiny", "retnet-tiny", "hyena-tiny"),
    *("moe-tiny", "mt5-tiny", "umt5-tiny"),
}
"""Recipes whose decode step takes dynamo two seconds or more to trace (recurrent mixers, experts, per-layer
relative biases): their cases are marked slow; the others stay in the quick tier."""


@pytest.mark.parametrize(
    "recipe", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW_TO_TRACE else name for name in TINY]
)
def test_static_and_compiled_greedy_equal_recomputation(recipe):
    model = randomised(recipe)
    expected = generate(model, PROMPTS, max_new_tokens=6, use_cache=False).tokens
    assert generate(model, PROMPTS, max_new_tokens=6, static_cache=True).tokens == expected
    torch._dynamo.reset()
    assert generate(model, PROMPTS, max_new_tokens=6, compile="eager").tokens == expected


@pytest.mark.parametrize("recipe", ["llama-tiny", "t5-tiny"])
def test_one_graph_serves_every_step_and_every_later_call(recipe):
    model = randomised(recipe)
    torch._dynamo.reset()
    counters.clear()
    generate(model, PROMPTS, max_new_tokens=12, compile="eager")
    graphs = counters["stats"]["unique_graphs"]
    assert graphs <= 2  # an encoder-decoder's first step also computes the cross-attention keys
    generate(model, [[3, 1], [4, 1, 5, 9, 2, 6, 5], [2]], max_new_tokens=12, compile="eager")  # same shapes
    assert counters["stats"]["unique_graphs"] == graphs, "a second call with the same shapes compiled again"
    generate(model, PROMPTS, max_new_tokens=40, compile="eager")  # the cache is the same multiple of 128
    assert counters["stats"]["unique_graphs"] == graphs, "a call of another length in the same quantum compiled"


@pytest.mark.slow
def test_inductor_compiles_a_new_cache_length_under_inference_mode(tmp_path):
    """A second length compiles a static graph of its own (with symbolic sizes, inductor fails on the inference
    tensors of a tied-embedding GPT-2); both give the tokens of eager decoding."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_positions=1024, n_embd=32, n_layer=1, n_head=2)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path)
    model = zoo.from_hf(tmp_path).eval()
    torch._dynamo.reset()
    with torch.inference_mode():
        for new in (6, COMPILED_CACHE_QUANTUM + 4):
            compiled = generate(model, [[5, 17, 3]], max_new_tokens=new, compile=True)
            assert compiled.tokens == generate(model, [[5, 17, 3]], max_new_tokens=new).tokens


def test_compiled_sampling_draws_what_eager_sampling_draws():
    model = randomised("gpt-tiny")
    settings = dict(max_new_tokens=12, temperature=0.9, top_k=20, seed=3)
    expected = generate(model, PROMPTS, **settings).tokens
    torch._dynamo.reset()
    assert generate(model, PROMPTS, compile="eager", **settings).tokens == expected


def test_a_window_restart_of_a_position_table_resets_the_static_cache():
    model = randomised("gpt-tiny")  # 128 learned positions: 120 + 20 tokens restart the window once
    prompt = [[(7 * i) % 250 + 1 for i in range(120)]]
    expected = generate(model, prompt, max_new_tokens=20, use_cache=False).tokens
    assert generate(model, prompt, max_new_tokens=20, static_cache=True).tokens == expected


def test_the_static_cache_writes_at_its_position_and_masks_what_is_not_written():
    cache = StaticKVCache(6)
    k = torch.arange(2 * 1 * 2 * 3, dtype=torch.float32).view(2, 1, 2, 3)
    keys, values = cache.update(k, -k, torch.tensor([[0, 0], [0, 1]]))
    assert keys.shape == (2, 1, 6, 3) and int(cache.length) == 2
    assert torch.equal(keys[:, :, :2], k) and not keys[:, :, 2:].any()
    padded = torch.tensor([[False, True], [True, True]])  # row 0's first token is padding
    mask = padded[:, None, None, :] & torch.ones(2, 2, dtype=torch.bool).tril()
    seen = cache.keys_mask(mask, 2)  # (N, 1, L, max_len)
    assert seen.shape == (2, 1, 2, 6)
    assert seen[0, 0].tolist() == [[False] * 6, [False, True, False, False, False, False]]
    assert seen[1, 0].tolist() == [[True] + [False] * 5, [True, True] + [False] * 4]
    cache.update(k[:, :, :1], k[:, :, :1])
    step = cache.keys_mask(None, 1)  # a decode step: the prompt's padding is remembered
    assert step[:, 0, 0].tolist() == [[False, True, True, False, False, False], [True, True, True, False, False, False]]
    assert cache.positions[:, :2].tolist() == [[0, 0], [0, 1]]
    cache.truncate(1)
    assert int(cache.length) == 1
    cache.reset()
    assert int(cache.length) == 0 and bool(cache.real.all())


def test_only_growing_kv_caches_become_static():
    assert isinstance(static_cache(KVCache(8), 8), StaticKVCache)
    assert isinstance(static_cache(RollingKVCache(4, 8), 8), StaticKVCache)
    other = object()
    assert static_cache(other, 8) is other
    assert zoo.build("gpt-tiny").new_cache(2, 16, static=True).static


def test_a_static_cache_that_is_full_says_so():
    model = zoo.build("gpt-tiny").eval()
    cache = model.new_cache(1, 4, static=True)
    with torch.no_grad(), pytest.raises(ValueError, match=r"KV cache full: 0 positions cached, 5 more do not fit"):
        model(torch.ones(1, 5, dtype=torch.long), cache=cache)


def test_bad_decoding_arguments_are_refused():
    model = zoo.build("gpt-tiny").eval()
    with pytest.raises(ArgumentError, match=r"compile decodes from a static KV cache: it cannot be used with"):
        generate(model, [[1, 2]], compile=True, use_cache=False)
    with pytest.raises(ArgumentError, match=r"static_cache decodes from a static KV cache"):
        generate(model, [[1, 2]], static_cache=True, use_cache=False)
    with pytest.raises(ArgumentError, match=r"compile: unknown torch.compile backend 'fast'; known: .*inductor"):
        generate(model, [[1, 2]], compile="fast")
    with pytest.raises(TrainError, match="every prompt needs at least one token"):
        generate(model, [], compile="eager")
    with pytest.raises(TrainError, match="the prompt needs 200 positions"):
        generate(model, [[1] * 200], static_cache=True)


def test_zoo_generate_compile_and_static_cache_print_the_same_text(tmp_path):
    from typer.testing import CliRunner

    from zoo.cli import app

    sets = ["--set", "train.steps=3", "--set", "train.batch_size=2", "--set", "train.seq_len=16"]
    trained = CliRunner().invoke(app, ["train", "gpt-tiny", "--out", str(tmp_path / "run"), "--device", "cpu", *sets])
    assert trained.exit_code == 0, trained.output
    ask = ["generate", str(tmp_path / "run"), "--prompt", "The ", "--prompt", "A", "--max-new-tokens", "8"]
    ask += ["--temperature", "0"]
    plain = CliRunner().invoke(app, ask)
    assert plain.exit_code == 0, plain.output
    for flag in ("--static-cache", "--compile"):
        other = CliRunner().invoke(app, [*ask, flag])
        assert other.exit_code == 0, other.output
        assert other.output == plain.output, flag
    refused = CliRunner().invoke(app, [*ask, "--compile", "--draft", str(tmp_path / "run")])
    assert refused.exit_code == 2 and "--draft decodes from growing caches" in refused.output


def test_zoo_bench_compile_times_the_compiled_step():
    from zoo.bench import DeviceRates, bench

    rates = DeviceRates("cpu", "float32", bandwidth=2e9, matmul=5e9)
    model = zoo.build("gpt-tiny").eval()
    torch._dynamo.reset()
    report = bench(model, batches=(1, 2), prompts=(5,), new=4, rates=rates, compile="eager")
    assert report.compiled and report.to_dict()["compiled"] is True
    r = model.recipe
    positions = min(COMPILED_CACHE_QUANTUM, r.max_len)  # prompt + new, rounded up, within the position table
    for c in report.cells:
        assert c.new == 4 and c.cache_bytes == 2 * r.num_layers * c.batch * positions * r.d_model * 4


@pytest.mark.parametrize("recipe", ["gpt-tiny", "mistral-tiny", "t5-tiny", "rwkv-tiny", "mamba-tiny"])
def test_rows_that_stop_leave_the_batch_and_the_rest_decode_as_alone(recipe):
    model = randomised(recipe)
    prompts = [[5, 17, 3, 8, 8], [9], [40, 2, 2, 7, 100, 31, 4], [1, 2, 3]]
    free = generate(model, prompts, max_new_tokens=12).tokens
    stops = {free[0][2], free[2][4]}  # two rows stop early

    def rows_per_step(**options) -> tuple[list[list[int]], list[int]]:
        rows: list[int] = []

        def count(module, args, kwargs):
            rows.append((args[0] if args else kwargs["decoder_input_ids"]).shape[0])

        hook = model.register_forward_pre_hook(count, with_kwargs=True)
        try:
            return generate(model, prompts, max_new_tokens=12, stop_tokens=stops, **options).tokens, rows
        finally:
            hook.remove()

    out, rows = rows_per_step()
    assert out == [generate(model, [p], max_new_tokens=12, stop_tokens=stops).tokens[0] for p in prompts]
    assert out == generate(model, prompts, max_new_tokens=12, stop_tokens=stops, use_cache=False).tokens
    stopped = sum(len(t) < 12 for t in out)
    assert stopped >= 1 and rows[0] == 4 and rows[-1] == 4 - stopped  # the stopped rows cost no more steps
    static, static_rows = rows_per_step(static_cache=True)
    assert static == out and set(static_rows) == {4}  # a static cache keeps its shapes: whole-batch steps
