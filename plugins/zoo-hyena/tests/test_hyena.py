"""zoo-hyena: zoo's component contract, FFT == direct convolution, causality, cached decoding == recomputation."""

from __future__ import annotations

import pytest
import torch

zoo_hyena = pytest.importorskip("zoo_hyena", reason="pip install -e plugins/zoo-hyena")

import zoo  # noqa: E402
from zoo.testing import ComponentContract, RecipeContract  # noqa: E402
from zoo_hyena import HyenaOperator, direct_conv, fft_conv  # noqa: E402


class TestContract(ComponentContract):
    """zoo's component contract: shapes, backward, causality, padding, cached decoding, compile, cost."""

    plugin = "zoo-hyena"


def ids(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(1, 256, (batch, length), generator=torch.Generator().manual_seed(seed))


def hyena(**overrides) -> torch.nn.Module:
    torch.manual_seed(0)
    return zoo.build("hyena-tiny", **overrides).eval()


class TestOperator:
    @pytest.mark.parametrize("length", [1, 7, 64, 257])
    def test_fft_convolution_equals_direct_causal_convolution(self, length):
        g = torch.Generator().manual_seed(length)
        u, h = torch.randn(2, length, 5, generator=g).double(), torch.randn(length, 5, generator=g).double()
        expected = torch.stack(
            [sum(h[t - s] * u[:, s] for s in range(t + 1)) for t in range(length)], dim=1
        )  # y[t] = sum_(s<=t) h[t-s] u[s], term by term
        torch.testing.assert_close(direct_conv(u, h), expected, rtol=0, atol=1e-10)
        torch.testing.assert_close(fft_conv(u.float(), h.float()).double(), expected, rtol=0, atol=1e-4)

    @torch.no_grad()
    def test_changing_token_t_never_changes_an_earlier_output(self):
        torch.manual_seed(0)
        layer = HyenaOperator(16, order=3, max_len=64).eval()
        x = torch.randn(1, 40, 16)
        base = layer(x)
        for t in (0, 13, 39):
            changed = x.clone()
            changed[:, t] += torch.randn(16)
            out = layer(changed)
            torch.testing.assert_close(out[:, :t], base[:, :t], rtol=0, atol=1e-6)
            assert not torch.allclose(out[:, t], base[:, t])

    def test_the_filters_are_one_function_of_the_lag_at_every_length(self):
        torch.manual_seed(0)
        layer = HyenaOperator(8, max_len=32)
        torch.testing.assert_close(layer.filter(10), layer.filter(32)[:10])


class TestDecoding:
    @torch.no_grad()
    def test_parallel_and_cached_forms_agree_over_512_tokens(self):
        model = hyena(max_len=512)
        x = ids(2, 512)
        full = model(x).logits
        cache = model.new_cache(batch_size=2, max_len=512)
        steps = [model(x[:, :100], cache=cache).logits]
        steps += [model(x[:, t : t + 1], cache=cache).logits for t in range(100, 512)]
        torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-5)

    @torch.no_grad()
    def test_cached_greedy_generation_equals_recomputation_with_ragged_prompts(self):
        from zoo.generate import generate

        model = hyena()
        prompts = [[5, 6, 7, 8, 9, 10, 11, 12], [20, 21, 22]]  # the second row is left-padded
        cached = generate(model, prompts, max_new_tokens=30)
        assert cached.tokens == generate(model, prompts, max_new_tokens=30, use_cache=False).tokens
        assert cached.tokens[1] == generate(model, prompts[1:], max_new_tokens=30).tokens[0]

    def test_summary_declares_a_cache_that_grows_per_token(self):
        from zoo.analysis import summarize

        memory = summarize("hyena-tiny", seq_len=64, torchinfo=False).memory
        # Two layers: (order - 1) * E = 64 history elements per token, in bf16; 2 rows of the short conv of 3E.
        assert memory.kv_bytes_per_token == 2 * 64 * 2
        assert memory.state_bytes_per_sequence == 2 * (2 * 3 * 64) * 2


class TestRecipe(RecipeContract):
    """zoo\'s recipe contract (a few optimizer steps train every recipe named here), and the recipes\' own checks."""

    recipes = ("hyena-tiny",)

    def test_options_are_validated_before_building(self):
        with pytest.raises(zoo.RecipeError, match=r"attention\.order: Input should be greater than or equal to 2"):
            zoo.load_recipe("hyena-tiny", **{"attention.order": 1})
        with pytest.raises(zoo.RecipeError, match=r"attention 'hyena' cannot take positional 'rope'"):
            zoo.load_recipe("hyena-tiny", positional={"type": "rope"})
