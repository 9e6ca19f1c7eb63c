"""zoo-mamba: zoo's component contract, parallel and recurrent forms agree, decoding state stays fixed, recipes."""

from __future__ import annotations

import pytest
import torch

zoo_mamba = pytest.importorskip("zoo_mamba", reason="pip install -e plugins/zoo-mamba")

import zoo  # noqa: E402
from zoo.testing import ComponentContract, RecipeContract  # noqa: E402
from zoo_mamba import Mamba, Mamba2, linear_scan, selective_scan, ssd, ssd_step  # noqa: E402


class TestContract(ComponentContract):
    """zoo's component contract for mamba, mamba2 and the `none` FFN, in every architecture that takes them."""

    plugin = "zoo-mamba"


def ids(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(1, 256, (batch, length), generator=torch.Generator().manual_seed(seed))


class TestScans:
    def test_the_parallel_scan_is_the_recurrence(self):
        g = torch.Generator().manual_seed(0)
        a, b, h0 = torch.rand(2, 37, 3, 5, generator=g), torch.randn(2, 37, 3, 5, generator=g), torch.randn(2, 3, 5)
        h, out = h0, []
        for t in range(37):
            h = a[:, t] * h + b[:, t]
            out.append(h)
        torch.testing.assert_close(linear_scan(a, b, h0), torch.stack(out, 1), rtol=0, atol=1e-6)

    def test_selective_scan_parallel_equals_recurrent_over_512_tokens(self):
        g = torch.Generator().manual_seed(1)
        N, L, I, S = 2, 512, 8, 4
        u, B, C = (
            torch.randn(N, L, I, generator=g),
            torch.randn(N, L, S, generator=g),
            torch.randn(N, L, S, generator=g),
        )
        delta = torch.nn.functional.softplus(torch.randn(N, L, I, generator=g) - 2)
        A, D = -torch.rand(I, S, generator=g) * 4, torch.randn(I, generator=g)
        y, h = selective_scan(u, delta, A, B, C, D)
        y_r, h_r = selective_scan(u, delta, A, B, C, D, recurrent=True)
        torch.testing.assert_close(y, y_r, rtol=0, atol=1e-5)
        torch.testing.assert_close(h, h_r, rtol=0, atol=1e-5)

    @pytest.mark.parametrize("chunk", [1, 7, 64, 512, 600])
    def test_ssd_chunks_equal_the_recurrence_over_512_tokens(self, chunk):
        g = torch.Generator().manual_seed(2)
        N, L, H, P, S = 2, 512, 3, 4, 5
        u, B, C = (torch.randn(N, L, H, d, generator=g) for d in (P, S, S))
        delta = torch.nn.functional.softplus(torch.randn(N, L, H, generator=g) - 1)
        A, h0 = -torch.rand(H, generator=g) * 3, torch.randn(N, H, P, S, generator=g)
        y, h = ssd(u, delta, A, B, C, chunk, h0)
        y_r, h_r = ssd_step(u, delta, A, B, C, h0)
        torch.testing.assert_close(y, y_r, rtol=0, atol=1e-5)
        # The state sums up to 512 terms in one chunk: float32 rounding, relative to its size.
        torch.testing.assert_close(h, h_r, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layer", [Mamba(32, state_size=8), Mamba2(32, head_dim=8, state_size=8, chunk_size=64)])
@torch.no_grad()
def test_mixer_parallel_equals_recurrent_decoding_over_512_tokens(layer):
    torch.manual_seed(0)
    x = torch.randn(2, 512, 32)
    full = layer(x)
    cache = layer.new_cache(2, 512)
    steps = [layer(x[:, :100], cache=cache)] + [layer(x[:, t : t + 1], cache=cache) for t in range(100, 512)]
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=0, atol=1e-5)
    assert cache.length == 512


class TestDecoding:
    @pytest.mark.parametrize("recipe", ["mamba-tiny", "mamba2-tiny", "jamba-tiny", "bamba-tiny"])
    @torch.no_grad()
    def test_cached_greedy_generation_equals_uncached(self, recipe):
        from zoo.generate import generate

        torch.manual_seed(0)
        model = zoo.build(recipe).eval()
        prompts = [[5, 6, 7, 8, 9, 10, 11, 12, 13, 14], [20, 21, 22]]  # ragged: the second row is left-padded
        cached = generate(model, prompts, max_new_tokens=30)
        assert cached.tokens == generate(model, prompts, max_new_tokens=30, use_cache=False).tokens

    @pytest.mark.parametrize("recipe", ["mamba-tiny", "mamba2-tiny"])
    @torch.no_grad()
    def test_decoding_state_does_not_grow(self, recipe):
        torch.manual_seed(0)
        model = zoo.build(recipe).eval()
        x = ids(1, 300)
        sizes = []
        for length in (16, 300):
            cache = model.new_cache(1, length)
            model(x[:, :8], cache=cache)
            for t in range(8, length):
                model(x[:, t : t + 1], cache=cache)
            sizes.append(cache.nbytes)
        assert sizes[0] == sizes[1] > 0

    def test_summary_declares_the_state_per_sequence_and_no_kv_cache(self):
        from zoo.analysis import summarize

        short, long = (summarize("mamba-tiny", seq_len=n, torchinfo=False).memory for n in (16, 128))
        # 4 layers of (I=128) x (K-1=3) conv inputs + (I=128) x (S=16) SSM features, in bf16.
        assert short.state_bytes_per_sequence == long.state_bytes_per_sequence == 4 * (128 * 3 + 128 * 16) * 2
        assert short.kv_bytes_per_token == 0

    @torch.no_grad()
    def test_padding_right_and_left(self):
        torch.manual_seed(0)
        model = zoo.build("mamba-tiny").eval()
        x = ids(1, 7)
        right = torch.cat([x, torch.zeros(1, 4, dtype=torch.long)], dim=1)
        mask = torch.tensor([[1] * 7 + [0] * 4]).bool()
        torch.testing.assert_close(model(right, attention_mask=mask).logits[:, :7], model(x).logits, rtol=0, atol=1e-5)
        left = torch.cat([torch.zeros(1, 3, dtype=torch.long), x], dim=1)
        mask = torch.tensor([[0] * 3 + [1] * 7]).bool()
        torch.testing.assert_close(model(left, attention_mask=mask).logits[:, 3:], model(x).logits, rtol=0, atol=1e-5)


class TestRecipes(RecipeContract):
    """zoo\'s recipe contract (a few optimizer steps train every recipe named here), and the recipes\' own checks."""

    recipes = ("mamba-tiny", "mamba2-tiny", "jamba-tiny", "bamba-tiny")
    min_loss_drop = 0.3

    def test_a_mamba_block_is_its_mixer_alone(self):
        model = zoo.build("mamba-tiny", device="meta")
        block = model.blocks[0]
        assert block.skip_ffn and isinstance(block.ffn_norm, torch.nn.Identity)
        assert not any(n.startswith("blocks.0.ffn") for n, _ in model.named_parameters())

    def test_jamba_tiny_interleaves_attention_mamba_and_moe(self):
        model = zoo.build("jamba-tiny", device="meta")
        mixers = [type(b.attention).__name__ for b in model.blocks]
        ffns = [type(b.ffn).__name__ for b in model.blocks]
        assert mixers == ["Mamba", "Mamba", "GroupedQueryAttention", "Mamba"] or mixers[2] != "Mamba"
        assert mixers.count("Mamba") == 3 and ffns[1] == ffns[3] == "MoE" and ffns[0] != "MoE"

    def test_an_encoder_and_a_rotation_are_refused(self):
        with pytest.raises(zoo.RecipeError, match=r"attention 'mamba' needs a causal \(decoder\) stack"):
            zoo.load_recipe("bert-tiny", attention={"type": "mamba"})
        with pytest.raises(zoo.RecipeError, match=r"attention 'mamba2' cannot take positional 'rope'"):
            zoo.load_recipe("mamba2-tiny", positional={"type": "rope"})
        with pytest.raises(zoo.RecipeError, match=r"must be a multiple of head_dim \(24\)"):
            zoo.load_recipe("mamba2-tiny", **{"attention.head_dim": 24})


def test_zoo_plugins_lists_what_the_package_registered():
    from zoo.plugins import plugins

    info = next(p for p in plugins() if p.name == "zoo-mamba")
    assert info.ok and info.api == 1
    assert {"mamba", "mamba2"} <= set(info.registered["attention"]) and "none" in info.registered["ffn"]
    assert {"mamba", "mamba2", "jamba", "falcon_mamba", "bamba"} <= set(info.hf_families)
    named = {"mamba-130m", "mamba2-130m", "mamba-tiny", "mamba2-tiny", "jamba-tiny", "jamba-v0.1", "bamba-9b"}
    assert named | {"bamba-tiny"} <= set(info.recipes)
