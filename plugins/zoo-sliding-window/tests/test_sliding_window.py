"""zoo-sliding-window: the window is exactly Mistral's, the rolling cache changes no output, memory is bounded."""

from __future__ import annotations

import pytest
import torch

zoo_sliding_window = pytest.importorskip("zoo_sliding_window", reason="pip install -e plugins/zoo-sliding-window")

import zoo  # noqa: E402
from zoo.components.attention import GroupedQueryAttention  # noqa: E402
from zoo.components.positional import RotaryEmbedding  # noqa: E402
from zoo.testing import ComponentContract, RecipeContract  # noqa: E402
from zoo_sliding_window import RollingKVCache, SlidingWindowAttention  # noqa: E402

E, H, HKV, D = 32, 4, 2, 8
# Full attention: zoo's gqa has a `window` option too, which switching the type would otherwise keep.
GQA_TINY = {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "bias": False, "window": None}


def ids(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(1, 256, (batch, length), generator=torch.Generator().manual_seed(seed))


def mistral(window: int = 4, **overrides) -> torch.nn.Module:
    torch.manual_seed(0)
    return zoo.build("mistral-tiny", **{"attention.window": window, **overrides}).eval()


def pair(window: int, causal: bool = True) -> tuple[SlidingWindowAttention, GroupedQueryAttention]:
    """A sliding-window attention and a gqa with the same weights."""
    torch.manual_seed(0)
    local = SlidingWindowAttention.from_options(E, window=window, num_heads=H, num_kv_heads=HKV, causal=causal).eval()
    full = GroupedQueryAttention(E, num_heads=H, num_kv_heads=HKV, causal=causal).eval()
    full.load_state_dict(local.state_dict())
    return local, full


class TestContract(ComponentContract):
    """zoo's component contract: shapes, backward, causality, padding, cached decoding, compile, cost."""

    plugin = "zoo-sliding-window"


def test_installed_plugin_registers_the_attention_and_ships_its_recipe():
    component = zoo.get_registry().get("attention", "sliding_window")
    assert component.plugin == "zoo-sliding-window"
    assert (
        component.description
        == "Grouped-query attention over the ``window`` most recent keys (Mistral), with a rolling KV cache."
    )
    info = next(p for p in zoo.plugins.plugins() if p.name == "zoo-sliding-window")
    assert (info.status, info.version, info.api) == ("ok", zoo_sliding_window.__version__, zoo.PLUGIN_API_VERSION)
    assert "sliding_window" in info.registered["attention"] and info.recipes == ["mistral-tiny"]
    model = zoo.build("mistral-tiny")
    assert model.zoo_components["blocks.0.attention"].plugin == "zoo-sliding-window"
    assert isinstance(model.blocks[1].attention, SlidingWindowAttention) and model.blocks[1].attention.window == 16


class TestWindow:
    @torch.no_grad()
    def test_window_covering_the_sequence_equals_gqa_with_the_same_weights(self):
        local = mistral(window=12)
        full = zoo.build("mistral-tiny", attention=GQA_TINY).eval()
        full.load_state_dict(local.state_dict())
        x = ids(2, 12)
        torch.testing.assert_close(local(x).logits, full(x).logits, rtol=0, atol=1e-5)
        mask = torch.ones(2, 12, dtype=torch.bool)
        mask[1, 8:] = False  # right padding goes through the same path
        torch.testing.assert_close(
            local(x, attention_mask=mask).logits, full(x, attention_mask=mask).logits, rtol=0, atol=1e-5
        )

    @pytest.mark.parametrize("window", [1, 3, 5])
    @torch.no_grad()
    def test_each_query_equals_full_attention_over_its_last_window_keys(self, window):
        local, full = pair(window)
        rope = RotaryEmbedding(E, head_dim=D)
        x = torch.randn(2, 11, E)
        out = local(x, pos=rope)
        for i in range(11):
            lo = max(0, i - window + 1)
            ref = full(x[:, lo : i + 1], pos=rope, positions=torch.arange(lo, i + 1)[None])[:, -1]
            torch.testing.assert_close(out[:, i], ref, rtol=0, atol=1e-5)

    @torch.no_grad()
    def test_bidirectional_window_sees_both_sides(self):
        window = 3
        local, full = pair(window, causal=False)
        x = torch.randn(2, 9, E)
        out = local(x)
        for i in range(9):
            lo, hi = max(0, i - window + 1), min(9, i + window)
            torch.testing.assert_close(out[:, i], full(x[:, lo:hi])[:, i - lo], rtol=0, atol=1e-5)

    @torch.no_grad()
    def test_a_key_beyond_the_window_changes_nothing(self):
        local, _ = pair(window=4)
        x = torch.randn(1, 10, E)
        y = x.clone()
        y[:, 2] += 1.0
        a, b = local(x), local(y)
        torch.testing.assert_close(a[:, :2], b[:, :2], rtol=0, atol=0)
        assert not torch.allclose(a[:, 2:6], b[:, 2:6])  # keys 2 is inside the windows of queries 2..5
        torch.testing.assert_close(a[:, 6:], b[:, 6:], rtol=0, atol=1e-6)


class TestRollingCache:
    @pytest.mark.parametrize("window", [4, 16])
    @torch.no_grad()
    def test_cached_decoding_equals_the_uncached_forward(self, window):
        model = mistral(window)
        x = ids(2, 24)  # longer than the window and than two layers' reach
        full = model(x).logits
        cache = model.new_cache(batch_size=2, max_len=24)
        steps = [model(x[:, :6], cache=cache).logits]
        steps.append(model(x[:, 6:9], cache=cache).logits)  # a chunk after the prefill
        steps += [model(x[:, t : t + 1], cache=cache).logits for t in range(9, 24)]
        torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-5)
        assert cache.length == 24 and all(c.held == min(window, 24) for c in cache.layers)

    @torch.no_grad()
    def test_prefill_longer_than_the_window(self):
        model = mistral(window=4)
        x = ids(1, 14)
        cache = model.new_cache(1, 14)
        steps = [model(x[:, :10], cache=cache).logits, model(x[:, 10:], cache=cache).logits]
        torch.testing.assert_close(torch.cat(steps, dim=1), model(x).logits, rtol=0, atol=1e-5)

    @torch.no_grad()
    @pytest.mark.parametrize("positional", ["rope", "alibi"])
    def test_left_padded_batch_decodes_like_the_uncached_forward(self, positional):
        # ALiBi reads the cached keys' positions, which left padding makes differ from their indices.
        model = mistral(window=6, positional={"type": positional})
        x = ids(2, 14)
        mask = torch.ones(2, 14, dtype=torch.bool)
        mask[0, :3] = False  # the first row is a shorter prompt, padded on the left
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
        full = model(x, attention_mask=mask, positions=positions).logits
        cache = model.new_cache(2, 14)
        # Decoding starts while the padding is still inside the window, and goes on after the buffer wrapped.
        steps = [model(x[:, :4], attention_mask=mask[:, :4], positions=positions[:, :4], cache=cache).logits]
        for t in range(4, 14):
            step = {"attention_mask": mask[:, : t + 1], "positions": positions[:, t : t + 1], "cache": cache}
            steps.append(model(x[:, t : t + 1], **step).logits)
        got = torch.cat(steps, dim=1)
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got[0, 3:], full[0, 3:], rtol=0, atol=1e-5)
        torch.testing.assert_close(got[1], full[1], rtol=0, atol=1e-5)

    @torch.no_grad()
    def test_memory_is_bounded_by_the_window_not_the_sequence(self):
        model = mistral(window=16, max_len=512)
        cache = model.new_cache(batch_size=1, max_len=512)
        x = ids(1, 512)
        model(x[:, :16], cache=cache)
        at_16 = cache.nbytes
        model(x[:, 16:500], cache=cache)
        for t in range(500, 512):
            model(x[:, t : t + 1], cache=cache)
        assert cache.length == 512
        # Two layers of K and V: (N=1, Hkv=2, W=16, D=16) float32 each.
        assert cache.nbytes == at_16 == 2 * 2 * (1 * 2 * 16 * 16 * 4)
        full = zoo.build("mistral-tiny", attention=GQA_TINY, max_len=512).eval()
        full_cache = full.new_cache(batch_size=1, max_len=512)
        full(x, cache=full_cache)
        assert full_cache.nbytes == 512 // 16 * cache.nbytes

    def test_ring_buffer_keeps_the_last_window_indices(self):
        cache = RollingKVCache(window=4)
        k = torch.arange(6.0).view(1, 1, 6, 1)
        keys, _ = cache.update(k, k)
        assert cache.index.tolist() == [0, 1, 2, 3, 4, 5] and keys.flatten().tolist() == [0, 1, 2, 3, 4, 5]
        assert cache.held == 4 and sorted(cache.held_index().tolist()) == [2, 3, 4, 5]
        keys, _ = cache.update(torch.full((1, 1, 1, 1), 6.0), torch.zeros(1, 1, 1, 1))
        assert cache.index.tolist() == [4, 5, 2, 3, 6] and keys.flatten().tolist() == [4, 5, 2, 3, 6]
        assert cache.length == 7 and cache.nbytes == 2 * 4 * 4
        cache.reset()
        cache.update(k[:, :, :1], k[:, :, :1])
        assert cache.length == 1 and cache.index.tolist() == [0]

    def test_short_max_len_shrinks_the_buffer_and_is_enforced(self):
        cache = RollingKVCache(window=8, max_len=3)
        cache.update(torch.zeros(1, 1, 3, 2), torch.zeros(1, 1, 3, 2))
        assert cache.capacity == 3 and cache.nbytes == 2 * 3 * 2 * 4
        full = r"rolling cache full: 3 positions cached, 1 more do not fit \(max_len 3\)"
        with pytest.raises(ValueError, match=full):
            cache.update(torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2))


class TestRecipe(RecipeContract):
    """zoo\'s recipe contract (a few optimizer steps train every recipe named here), and the recipes\' own checks."""

    recipes = ("mistral-tiny",)

    def test_options_are_validated_before_building(self):
        too_small = r"override attention\.window=0: attention\.window: Input should be greater than or equal to 1"
        with pytest.raises(zoo.RecipeError, match=too_small):
            zoo.load_recipe("mistral-tiny", **{"attention.window": 0})
        with pytest.raises(zoo.RecipeError, match=r"num_heads \(4\) must be divisible by num_kv_heads \(3\)"):
            zoo.load_recipe("mistral-tiny", **{"attention.num_kv_heads": 3})
        with pytest.raises(zoo.RecipeError, match=r"attention\.windw: unknown key \(did you mean 'window'\?\)"):
            zoo.load_recipe("mistral-tiny", **{"attention.windw": 3})
        assert zoo.load_recipe("mistral-tiny", **{"attention.num_kv_heads": None}).attention.num_kv_heads == 4


@pytest.mark.slow
def test_recipe_trains_with_zoo_train_and_generates_with_zoo_generate(tmp_path):
    from zoo.generate import generate
    from zoo.train import load_run, train

    events = []
    steps = {"train.steps": 6, "train.batch_size": 4, "train.seq_len": 32, "train.lr": 3e-3}
    quiet = {"train.warmup_steps": 0, "train.eval_batches": 1, "train.log_interval": 1}
    result = train("mistral-tiny", out=tmp_path / "run", device="cpu", callback=events.append, **steps, **quiet)
    losses = [e.data["loss"] for e in events if e.kind == "step"]
    assert result.step == 6 and losses[-1] < losses[0], losses
    model = load_run(result.run_dir).model  # rebuilt from the saved recipe: the plugin's component again
    prompts = [[5, 6, 7, 8, 9, 10, 11, 12, 13, 14], [20, 21, 22]]  # ragged: the second row is left-padded
    cached = generate(model, prompts, max_new_tokens=30)
    assert cached.tokens == generate(model, prompts, max_new_tokens=30, use_cache=False).tokens
    assert [len(t) for t in cached.tokens] == [30, 30]
    # The rolling buffers of two layers hold the window (16) of K and V: (N=2, Hkv=2, 16, D=16) float32.
    assert cached.stats.cache_bytes == 2 * 2 * (2 * 2 * 16 * 16 * 4)
