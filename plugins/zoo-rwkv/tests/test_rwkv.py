"""zoo-rwkv: zoo's component contract, parallel == recurrent, parity with transformers' RWKV-4, the recipes."""

from __future__ import annotations

import math

import pytest
import torch

zoo_rwkv = pytest.importorskip("zoo_rwkv", reason="pip install -e plugins/zoo-rwkv")

import zoo  # noqa: E402
from zoo.testing import ComponentContract, RecipeContract  # noqa: E402
from zoo_rwkv import TimeMix, wkv  # noqa: E402


class TestContract(ComponentContract):
    """zoo's component contract: shapes, backward, causality, padding, cached decoding, compile, cost."""

    plugin = "zoo-rwkv"


def ids(batch: int, length: int, seed: int = 0, vocab: int = 256) -> torch.Tensor:
    return torch.randint(1, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


def rwkv(**overrides) -> torch.nn.Module:
    torch.manual_seed(0)
    return zoo.build("rwkv-tiny", **overrides).eval()


def recurrent_reference(time_decay, time_first, k, v):
    """transformers' ``rwkv_linear_attention_cpu``: the stabilised recurrence, one token at a time."""
    num = torch.zeros_like(k[:, 0])
    den = torch.zeros_like(k[:, 0])
    top = torch.full_like(k[:, 0], -1e38)
    w = -torch.exp(time_decay)
    out = []
    for t in range(k.size(1)):
        kt, vt = k[:, t], v[:, t]
        m = torch.maximum(top, kt + time_first)
        e1, e2 = torch.exp(top - m), torch.exp(kt + time_first - m)
        out.append((e1 * num + e2 * vt) / (e1 * den + e2))
        m = torch.maximum(top + w, kt)
        e1, e2 = torch.exp(top + w - m), torch.exp(kt - m)
        num, den, top = e1 * num + e2 * vt, e1 * den + e2, m
    return torch.stack(out, dim=1), (num, den, top)


class TestWKV:
    @pytest.mark.parametrize("chunk_size", [1, 7, 32, 512])
    def test_chunked_parallel_form_equals_the_recurrence(self, chunk_size):
        g = torch.Generator().manual_seed(0)
        k, v = torch.randn(2, 100, 8, generator=g) * 3, torch.randn(2, 100, 8, generator=g)
        decay, first = torch.randn(8, generator=g), torch.randn(8, generator=g)
        expected, state = recurrent_reference(decay, first, k, v)
        out, got = wkv(decay, first, k, v, chunk_size=chunk_size)
        torch.testing.assert_close(out, expected, rtol=0, atol=1e-5)
        real = [s * torch.exp(m) for s, m in ((state[0], state[2]), (got[0], got[2]))]
        torch.testing.assert_close(real[1], real[0], rtol=1e-5, atol=1e-5)

    def test_padded_keys_add_nothing(self):
        g = torch.Generator().manual_seed(1)
        k, v = torch.randn(1, 12, 4, generator=g), torch.randn(1, 12, 4, generator=g)
        decay, first = torch.randn(4, generator=g), torch.randn(4, generator=g)
        keep = torch.tensor([[False] * 5 + [True] * 7])
        out, _ = wkv(decay, first, k, v, keep=keep, chunk_size=4)
        alone, _ = wkv(decay, first, k[:, 5:], v[:, 5:])
        assert (out[:, :5] == 0).all()
        torch.testing.assert_close(out[:, 5:], alone, rtol=0, atol=1e-6)


class TestDecoding:
    @torch.no_grad()
    def test_parallel_and_recurrent_forms_agree_over_512_tokens(self):
        model = rwkv(max_len=512)
        x = ids(2, 512)
        full = model(x).logits
        cache = model.new_cache(batch_size=2, max_len=512)
        steps = [model(x[:, :1], cache=cache).logits]
        steps += [model(x[:, t : t + 1], cache=cache).logits for t in range(1, 512)]
        torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-5)

    @torch.no_grad()
    def test_the_state_has_a_fixed_size(self):
        model = rwkv(max_len=512)
        x = ids(1, 300)
        sizes = []
        for length in (10, 300):
            cache = model.new_cache(batch_size=1, max_len=512)
            for t in range(length):
                model(x[:, t : t + 1], cache=cache)
            sizes.append(cache.nbytes)
        # Two blocks: the time mix keeps the last input (E) and num, den, max (A); the channel mix its last input.
        assert sizes[0] == sizes[1] == 2 * (64 + 3 * 64 + 64) * 4

    @torch.no_grad()
    def test_left_padded_prompts_decode_as_if_unpadded(self):
        model = rwkv()
        x = ids(1, 7)
        left = torch.cat([torch.zeros(1, 3, dtype=torch.long), x], dim=1)
        mask = torch.tensor([[0] * 3 + [1] * 7]).bool()
        out = model(left, attention_mask=mask).logits
        torch.testing.assert_close(out[:, 3:], model(x).logits, rtol=0, atol=1e-5)
        from zoo.generate import generate

        prompts = [[5, 6, 7, 8, 9, 10, 11], [20, 21, 22]]
        ragged = generate(model, prompts, max_new_tokens=12).tokens
        assert ragged == generate(model, prompts, max_new_tokens=12, use_cache=False).tokens
        assert ragged[1] == generate(model, prompts[1:], max_new_tokens=12).tokens[0]


class TestRecipes(RecipeContract):
    """zoo\'s recipe contract (a few optimizer steps train every recipe named here), and the recipes\' own checks."""

    recipes = ("rwkv-tiny",)

    def test_rwkv_4_169m_has_the_published_parameter_count(self):
        model = zoo.build("rwkv-4-169m", device="meta")
        E, F, V, L = 768, 3072, 50277, 12
        block = 4 * E * E + 2 * E + 3 * E + 2 * E * F + E * E + 2 * E + 4 * E  # time mix, channel mix, ln1, ln2
        assert sum(p.numel() for p in model.parameters()) == 2 * V * E + L * block + 4 * E == 169_342_464

    def test_rwkv_4_169m_counts_what_transformers_builds(self):
        transformers = pytest.importorskip("transformers")
        config = transformers.RwkvConfig(
            vocab_size=50277, hidden_size=768, num_hidden_layers=12, context_length=1024, attention_hidden_size=768
        )
        with torch.device("meta"):
            hf = transformers.RwkvForCausalLM(config)
        ours = zoo.build("rwkv-4-169m", device="meta")
        assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in hf.parameters())

    def test_positions_by_rotation_are_refused(self):
        with pytest.raises(zoo.RecipeError, match=r"attention 'rwkv_time_mix' cannot take positional 'rope'"):
            zoo.load_recipe("rwkv-tiny", positional={"type": "rope"})
        with pytest.raises(ValueError, match=r"causal self-mixing only \(got causal=False"):
            TimeMix(16, causal=False)

    def test_summary_declares_a_fixed_state_per_sequence_and_no_kv_cache(self):
        from zoo.analysis import summarize

        short, long = (summarize("rwkv-tiny", seq_len=n, torchinfo=False).memory for n in (16, 128))
        # Two blocks of (E + 3A) + E state elements, in bf16, whatever the length.
        assert short.state_bytes_per_sequence == long.state_bytes_per_sequence == 2 * (64 + 3 * 64 + 64) * 2
        assert short.kv_bytes_per_token == 0 and long.kv_bytes_for_batch == 0


@pytest.fixture(scope="module")
def hf_pair(tmp_path_factory):
    """A tiny random ``RwkvForCausalLM`` (its parameters perturbed off the init) and zoo's import of it."""
    transformers = pytest.importorskip("transformers")
    from zoo.hf import from_hf

    torch.manual_seed(0)
    config = transformers.RwkvConfig(
        vocab_size=97,
        hidden_size=32,
        num_hidden_layers=3,
        attention_hidden_size=32,
        intermediate_size=80,
        context_length=128,
        rescale_every=0,
        bos_token_id=None,
        eos_token_id=None,
    )
    hf = transformers.RwkvForCausalLM(config).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(0.1 * torch.randn_like(p))
    path = tmp_path_factory.mktemp("rwkv")
    hf.save_pretrained(path)
    return hf, from_hf(path).eval()


class TestHuggingFace:
    def test_logits_match_transformers(self, hf_pair):
        hf, ours = hf_pair
        x = ids(2, 70, vocab=97)
        with torch.no_grad():
            diff = (hf(x).logits - ours(x).logits).abs().max().item()
        assert diff <= 1e-4, diff

    def test_greedy_generation_matches_transformers(self, hf_pair):
        from zoo.generate import generate

        hf, ours = hf_pair
        prompt = ids(1, 10, seed=3, vocab=97)
        expected = hf.generate(prompt, max_new_tokens=20, do_sample=False)[0, 10:].tolist()
        assert generate(ours, prompt.tolist(), max_new_tokens=20).tokens[0] == expected
        assert generate(ours, prompt.tolist(), max_new_tokens=20, use_cache=False).tokens[0] == expected

    def test_export_round_trips(self, hf_pair, tmp_path):
        from zoo.hf import from_hf, to_hf

        _, ours = hf_pair
        again = from_hf(to_hf(ours, tmp_path / "out")).eval()
        x = ids(1, 16, vocab=97)
        with torch.no_grad():
            assert torch.equal(again(x).logits, ours(x).logits)

    def test_the_family_is_registered_by_the_plugin(self):
        from zoo.hf import families

        assert families()["rwkv"].name == "rwkv"
        assert math.isclose(families()["rwkv"].defaults["layer_norm_epsilon"], 1e-5)
