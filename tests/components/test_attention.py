"""Attention components: equivalences between variants, masking, caching, routing, configs."""

from __future__ import annotations

import math
from dataclasses import replace

import pydantic
import pytest
import torch
import torch.nn.functional as F

from zoo.cache import CrossKVCache, KVCache, RollingKVCache
from zoo.components.attention import (
    GQAConfig,
    GroupedQueryAttention,
    MHAConfig,
    MixtureOfAttentionHeads,
    MoAConfig,
    MQAConfig,
    MultiHeadAttention,
    MultiQueryAttention,
    ProjectionBiases,
    QKNorm,
    SlidingWindow,
    causal_mask,
    sliding_window_mask,
)
from zoo.config import BuildContext

E = 16  # d_model of every test module
VARIANTS = {
    "mha": lambda **kw: MultiHeadAttention(E, num_heads=4, **kw),
    "gqa": lambda **kw: GroupedQueryAttention.from_options(E, num_heads=4, num_kv_heads=2, **kw),
    "mqa": lambda **kw: MultiQueryAttention(E, num_heads=4, **kw),
    "moa": lambda **kw: MixtureOfAttentionHeads(E, num_experts=4, top_k=2, **kw),
}


def make(name: str, **kw):
    torch.manual_seed(0)
    return VARIANTS[name](**kw).eval()


class RotaryStub:
    """RoPE as a positional encoding would do it: rotate feature pairs by position-dependent angles."""

    def rotate(self, q, k, positions):
        half = q.size(-1) // 2
        freqs = 1.0 / 10000 ** (torch.arange(half) / half)
        angles = positions[:, None, :, None].float() * freqs  # (N|1, 1, L, D/2)
        cos, sin = angles.cos(), angles.sin()

        def rot(t):
            t1, t2 = t[..., :half], t[..., half:]
            return torch.cat([t1 * cos - t2 * sin, t1 * sin + t2 * cos], dim=-1)

        return rot(q), rot(k)

    def score_bias(self, q_pos, k_pos):
        return None


class AlibiStub:
    """ALiBi as a positional encoding would do it: a per-head linear penalty on distance."""

    def __init__(self, num_heads: int):
        self.slopes = 2.0 ** -torch.arange(1, num_heads + 1, dtype=torch.float)

    def rotate(self, q, k, positions):
        return q, k

    def score_bias(self, q_pos, k_pos):
        distance = (q_pos[:, None, :, None] - k_pos[:, None, None, :]).abs().float()  # (N|1, 1, L, S)
        return -self.slopes[:, None, None] * distance  # (N|1, H, L, S)


class TestGroupedQueryAttention:
    def test_all_kv_heads_equals_mha(self):
        mha = make("mha")
        gqa = GroupedQueryAttention(E, num_heads=4, num_kv_heads=4).eval()
        gqa.load_state_dict(mha.state_dict())
        x = torch.randn(2, 6, E)
        torch.testing.assert_close(gqa(x), mha(x), rtol=0, atol=0)

    def test_one_kv_head_equals_mqa(self):
        mqa = make("mqa")
        gqa = GroupedQueryAttention(E, num_heads=4, num_kv_heads=1).eval()
        gqa.load_state_dict(mqa.state_dict())
        x = torch.randn(2, 6, E)
        torch.testing.assert_close(gqa(x), mqa(x), rtol=0, atol=0)

    def test_groups_are_consecutive_query_heads(self):
        # GQA with 2 K/V heads == MHA whose K/V heads 0,1 and 2,3 are copies of GQA's heads 0 and 1.
        gqa = make("gqa")
        mha = MultiHeadAttention(E, num_heads=4).eval()
        state = gqa.state_dict()
        for name in ("k_proj", "v_proj"):
            w, b = state[f"{name}.weight"].view(2, 4, E), state[f"{name}.bias"].view(2, 4)
            state[f"{name}.weight"] = w.repeat_interleave(2, dim=0).reshape(16, E)
            state[f"{name}.bias"] = b.repeat_interleave(2, dim=0).reshape(16)
        mha.load_state_dict(state)
        x = torch.randn(2, 6, E)
        torch.testing.assert_close(gqa(x), mha(x))

    @pytest.mark.parametrize("name", list(VARIANTS))
    def test_causal_later_tokens_do_not_change_earlier_outputs(self, name):
        m = make(name, causal=True)
        x = torch.randn(2, 7, E)
        y = x.clone()
        y[:, 4:] = torch.randn(2, 3, E)
        torch.testing.assert_close(m(x)[:, :4], m(y)[:, :4])
        assert not torch.allclose(m(x)[:, 4:], m(y)[:, 4:])

    @pytest.mark.parametrize("name", list(VARIANTS))
    def test_appended_padding_changes_no_real_position(self, name):
        m = make(name)
        x = torch.randn(2, 5, E)
        lengths = torch.tensor([5, 3])
        keys = torch.arange(5) < lengths[:, None]  # (N, S) key padding
        padded = torch.cat([x, torch.randn(2, 3, E)], dim=1)
        padded_keys = torch.cat([keys, torch.zeros(2, 3, dtype=torch.bool)], dim=1)
        out = m(x, mask=keys[:, None, None, :])
        out_padded = m(padded, mask=padded_keys[:, None, None, :])
        torch.testing.assert_close(out_padded[0, :5], out[0])
        torch.testing.assert_close(out_padded[1, :3], out[1, :3])

    @pytest.mark.parametrize("name", list(VARIANTS))
    def test_fully_masked_row_is_finite_in_forward_and_backward(self, name):
        m = make(name).train()
        x = torch.randn(1, 4, E, requires_grad=True)
        mask = torch.ones(1, 1, 4, 4, dtype=torch.bool)
        mask[..., 2, :] = False
        out = m(x, mask=mask)
        torch.testing.assert_close(out[0, 2], m.o_proj.bias)  # attention output was zero
        out.sum().backward()
        assert x.grad.isfinite().all()
        assert all(p.grad.isfinite().all() for p in m.parameters() if p.grad is not None)

    @pytest.mark.parametrize("name", list(VARIANTS))
    @pytest.mark.parametrize("pos_kind", ["none", "rope", "alibi"])
    def test_cached_decoding_equals_full_causal_forward(self, name, pos_kind):
        m = make(name, causal=True)
        pos = {"none": None, "rope": RotaryStub(), "alibi": AlibiStub(m.num_heads)}[pos_kind]
        x = torch.randn(2, 9, E)
        with torch.no_grad():
            full = m(x, pos=pos)
            cache = m.new_cache(2, 16)
            steps = [m(x[:, :5], mask=causal_mask(5, 5)[None, None], pos=pos, cache=cache)]
            for t in range(5, 9):
                mask = torch.ones(2, 1, 1, t + 1, dtype=torch.bool)
                steps.append(m(x[:, t : t + 1], mask=mask, pos=pos, cache=cache))
        assert isinstance(cache, KVCache) and cache.length == 9
        torch.testing.assert_close(torch.cat(steps, dim=1), full)

    def test_positional_stub_actually_changes_the_output(self):
        m = make("mha", causal=True)
        x = torch.randn(1, 6, E)
        assert not torch.allclose(m(x, pos=RotaryStub()), m(x))
        assert not torch.allclose(m(x, pos=AlibiStub(4)), m(x))

    @pytest.mark.parametrize("name", ["mha", "gqa", "moa"])
    def test_cross_attention_ignores_causal_and_caches_kv_once(self, name):
        plain, causal = make(name, cross=True), make(name, cross=True, causal=True)
        x, context = torch.randn(2, 3, E), torch.randn(2, 7, E)
        context_mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])[:, None, None, :]
        expected = plain(x, context=context, mask=context_mask)
        torch.testing.assert_close(causal(x, context=context, mask=context_mask), expected)
        torch.testing.assert_close(causal(x, context=context), plain(x, context=context))

        calls = []
        plain.k_proj.register_forward_hook(lambda *args: calls.append(1))
        cache = plain.new_cache(2, 16)
        assert isinstance(cache, CrossKVCache)
        with torch.no_grad():
            first = plain(x, context=context, mask=context_mask, cache=cache)
            second = plain(x, context=context, mask=context_mask, cache=cache)
        assert len(calls) == 1
        torch.testing.assert_close(first, expected)
        torch.testing.assert_close(second, expected)
        assert cache.nbytes == 2 * 2 * plain.num_kv_heads * 7 * plain.head_dim * 4

    def test_scale_multiplies_the_scores(self):
        default = make("mha")
        unscaled = MultiHeadAttention(E, num_heads=4, scale=1.0).eval()
        state = default.state_dict()
        state["q_proj.weight"] = state["q_proj.weight"] / 2  # head_dim 4: 1/sqrt(4)
        state["q_proj.bias"] = state["q_proj.bias"] / 2
        unscaled.load_state_dict(state)
        x = torch.randn(2, 5, E)
        torch.testing.assert_close(unscaled(x), default(x))

    def test_dropout_only_in_training(self):
        m = make("mha", dropout=0.5)
        x = torch.randn(2, 5, E)
        torch.testing.assert_close(m(x), m(x))
        m.train()
        assert not torch.allclose(m(x), m(x))

    @pytest.mark.parametrize("bias", [True, False])
    def test_parameter_counts(self, bias):
        count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
        assert count(MultiHeadAttention(E, num_heads=4, bias=bias)) == 4 * E * E + 4 * E * bias
        # GQA: q and o are E x E; k and v are E x (Hkv * D).
        H, Hkv, D = 8, 2, 2
        kv = Hkv * D
        expected = 2 * E * E + 2 * E * kv + (2 * E + 2 * kv) * bias
        assert count(GroupedQueryAttention(E, num_heads=H, num_kv_heads=Hkv, bias=bias)) == expected
        assert count(MultiQueryAttention(E, num_heads=H, bias=bias)) == 2 * E * E + 2 * E * D + (2 * E + 2 * D) * bias
        # MoA: X expert q/o projections of width D, one shared K/V head, a bias-free router.
        X, K, D = 6, 2, 8
        expected = 2 * E * X * D + 2 * E * D + E * X + (X * D + 2 * D + E) * bias
        assert count(MixtureOfAttentionHeads(E, num_experts=X, top_k=K, bias=bias)) == expected

    def test_constructor_errors(self):
        with pytest.raises(ValueError, match=r"num_heads \(6\) must be divisible by num_kv_heads \(4\)"):
            GroupedQueryAttention(24, num_heads=6, num_kv_heads=4)
        with pytest.raises(ValueError, match=r"d_model \(100\) must be divisible by num_heads \(12\)"):
            MultiHeadAttention(100, num_heads=12)
        assert MultiHeadAttention(100, num_heads=12, head_dim=8).q_proj.out_features == 96


class TestMixtureOfAttentionHeads:
    def test_single_expert_equals_single_head_mqa(self):
        torch.manual_seed(0)
        moa = MixtureOfAttentionHeads(E, num_experts=1, top_k=1, head_dim=8, causal=True).eval()
        mqa = MultiQueryAttention(E, num_heads=1, head_dim=8, causal=True).eval()
        mqa.load_state_dict({k: v for k, v in moa.state_dict().items() if not k.startswith("router")})
        x = torch.randn(2, 5, E)
        torch.testing.assert_close(moa(x), mqa(x))

    def test_matches_per_token_routing_reference(self):
        torch.manual_seed(0)
        X, K, D, L = 4, 2, 4, 5
        m = MixtureOfAttentionHeads(E, num_experts=X, top_k=K, head_dim=D, causal=True).eval()
        x = torch.randn(1, L, E)
        with torch.no_grad():
            out = m(x)[0]
            k, v, logits = m.k_proj(x[0]), m.v_proj(x[0]), m.router(x[0])  # (L, D), (L, D), (L, X)
            wq, bq = m.q_proj.weight.view(X, D, E), m.q_proj.bias.view(X, D)
            wo = m.o_proj.weight.view(E, X, D)
            for t in range(L):
                chosen = logits[t].topk(K).indices
                gates = logits[t, chosen].softmax(-1)
                expected = m.o_proj.bias.clone()
                for e, gate in zip(chosen.tolist(), gates, strict=True):
                    q = wq[e] @ x[0, t] + bq[e]
                    weights = (k[: t + 1] @ q / math.sqrt(D)).softmax(-1)
                    expected += gate * (wo[:, e] @ (weights @ v[: t + 1]))
                torch.testing.assert_close(out[t], expected)

    def test_aux_loss_is_a_differentiable_scalar(self):
        m = make("moa").train()
        m(torch.randn(2, 6, E)).sum()
        assert m.aux_loss.shape == () and m.aux_loss.isfinite()
        m.aux_loss.backward()
        assert m.router.weight.grad is not None and m.router.weight.grad.abs().sum() > 0

    def test_aux_loss_is_its_coefficient_under_uniform_routing(self):
        m = MixtureOfAttentionHeads(E, num_experts=4, top_k=2, aux_loss_coef=0.05)
        torch.nn.init.zeros_(m.router.weight)  # every expert equally likely: X * sum f_e / X = 1
        m(torch.randn(2, 6, E))
        torch.testing.assert_close(m.aux_loss, torch.tensor(0.05))

    def test_unchosen_experts_get_no_gradient(self):
        m = make("moa")
        x = torch.randn(1, 3, E)
        chosen = set(m.router(x).topk(2).indices.flatten().tolist())
        m(x).sum().backward()
        per_expert = m.q_proj.weight.grad.view(4, -1).abs().sum(-1)
        assert {e for e in range(4) if per_expert[e] > 0} == chosen


class TestKVCache:
    def test_update_returns_everything_cached(self):
        cache = KVCache(8)
        k1, k2 = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 1, 4)
        cache.update(k1, -k1)
        k, v = cache.update(k2, -k2)
        assert cache.length == 6
        torch.testing.assert_close(k, torch.cat([k1, k2], dim=2))
        torch.testing.assert_close(v, -k)
        cache.reset()
        assert cache.length == 0 and cache.update(k2, k2)[0].shape == (2, 3, 1, 4)

    def test_overflow_message(self):
        cache = KVCache(4)
        cache.update(torch.zeros(1, 1, 4, 2), torch.zeros(1, 1, 4, 2))
        msg = r"KV cache full: 4 positions cached, 1 more do not fit \(max_len 4\)"
        with pytest.raises(ValueError, match=msg):
            cache.update(torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2))

    def test_gqa_cache_is_kv_heads_over_heads_of_mha(self):
        sizes = {}
        for name in ("mha", "gqa", "mqa"):
            m = make(name, causal=True)
            cache = m.new_cache(2, 10)
            assert cache.nbytes == 0
            with torch.no_grad():
                m(torch.randn(2, 3, E), cache=cache)
            sizes[name] = cache.nbytes
        assert sizes["mha"] == 2 * 2 * 4 * 10 * 4 * 4  # k and v, (N, H, max_len, D), float32
        assert sizes["gqa"] * 2 == sizes["mha"] and sizes["mqa"] * 4 == sizes["mha"]

    def test_cross_cache_computes_once(self):
        cache, calls = CrossKVCache(), []

        def compute():
            calls.append(1)
            return torch.ones(1, 1, 2, 2), torch.zeros(1, 1, 2, 2)

        first, second = cache.get(compute), cache.get(compute)
        assert len(calls) == 1 and all(a is b for a, b in zip(first, second, strict=True))
        assert cache.nbytes == 32
        cache.reset()
        cache.get(compute)
        assert len(calls) == 2


class TestAttentionConfigs:
    def test_num_heads_and_head_dim_for_every_config(self):
        configs = [
            MHAConfig(num_heads=4),
            GQAConfig(num_heads=4, num_kv_heads=2),
            MQAConfig(num_heads=4),
            MoAConfig(num_experts=8, top_k=4),
        ]
        assert [c.num_heads for c in configs] == [4, 4, 4, 4]
        assert [c.num_kv_heads for c in configs] == [4, 2, 1, 1]
        assert [c.head_dim_for(64) for c in configs] == [16, 16, 16, 16]
        assert MHAConfig(num_heads=4, head_dim=32).head_dim_for(64) == 32

    def test_exact_error_messages(self):
        # Divisibility is a rule of the model around the config (check), so validation reports it with the rest.
        assert GQAConfig(num_heads=12, num_kv_heads=5).check(BuildContext(d_model=120)) == [
            "num_heads (12) must be divisible by num_kv_heads (5)"
        ]
        with pytest.raises(pydantic.ValidationError, match=r"top_k \(3\) must be <= num_experts \(2\)"):
            MoAConfig(num_experts=2, top_k=3)
        with pytest.raises(pydantic.ValidationError, match="Extra inputs are not permitted"):
            MHAConfig(num_heads=4, num_kv_heads=2)
        with pytest.raises(pydantic.ValidationError, match="greater than or equal to 1"):
            MHAConfig(num_heads=0)

    def test_check_needs_divisible_d_model(self):
        ctx = BuildContext(d_model=100)
        assert MHAConfig(num_heads=12).check(ctx) == [
            "d_model (100) must be divisible by num_heads (12), or set head_dim"
        ]
        assert MHAConfig(num_heads=12, head_dim=8).check(ctx) == []
        assert MoAConfig(num_experts=4, top_k=3).check(ctx) == [
            "d_model (100) must be divisible by top_k (3), or set head_dim"
        ]


@pytest.mark.slow
def test_compiled_mha_with_mask_matches_eager():
    m = make("mha", causal=True)
    x = torch.randn(2, 6, E)
    mask = causal_mask(6, 6)[None, None] & (torch.arange(6) < torch.tensor([[6], [4]]))[:, None, None, :]
    compiled = torch.compile(m, fullgraph=True)
    torch.testing.assert_close(compiled(x, mask=mask), m(x, mask=mask))


class TestQueryKeyNorm:
    """QK-norm: queries and keys normalised before positions rotate them (Qwen3 per head, OLMo 2 whole)."""

    @pytest.mark.parametrize("scope", ["head", "projection"])
    @torch.no_grad()
    def test_equals_attention_over_normalised_queries_and_keys(self, scope):
        from zoo.components.norm import RMSNorm

        torch.manual_seed(0)
        attn = GroupedQueryAttention(E, num_heads=4, num_kv_heads=2, qk_norm=QKNorm(RMSNorm, scope)).eval()
        for norm in (attn.q_norm, attn.k_norm):
            norm.weight.normal_()  # not the identity scale, so the test sees which features it normalises
        x = torch.randn(2, 5, E)
        D = E // 4

        def heads(proj, norm, h):
            y = proj(x)
            y = norm(y) if scope == "projection" else y
            y = y.view(2, 5, h, D)
            return (norm(y) if scope == "head" else y).transpose(1, 2)

        q, k = heads(attn.q_proj, attn.q_norm, 4), heads(attn.k_proj, attn.k_norm, 2)
        v = attn.v_proj(x).view(2, 5, 2, D).transpose(1, 2)
        ref = F.scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1))
        expected = attn.o_proj(ref.transpose(1, 2).reshape(2, 5, E))
        torch.testing.assert_close(attn(x), expected, rtol=0, atol=1e-5)
        assert attn.q_norm.weight.shape == ((D,) if scope == "head" else (4 * D,))
        assert attn.k_norm.weight.shape == ((D,) if scope == "head" else (2 * D,))

    def test_recipe_option_builds_the_norm_at_the_head_width_and_counts_it(self):
        import zoo
        from zoo.analysis import analytic_parameters, compare_counts, parameter_breakdown

        model = zoo.build("llama-tiny", **{"attention.qk_norm": "rmsnorm"})
        attention = model.blocks[0].attention
        D = attention.head_dim
        assert attention.q_norm.weight.shape == (D,) and attention.k_norm.weight.shape == (D,)
        plain = zoo.build("llama-tiny")
        assert zoo.count_parameters(model) - zoo.count_parameters(plain) == len(model.blocks) * 2 * D
        assert compare_counts(parameter_breakdown(model), analytic_parameters(model)) == []
        assert model.zoo_components["blocks.0.attention.q_norm"].nested


def _model(**overrides):
    import zoo

    torch.manual_seed(0)
    return zoo.build("llama-tiny", **overrides).eval()


def _decode_in_steps(model, x, mask=None, positions=None):
    """Logits of ``x`` decoded with a cache: a prefill of 5, a chunk of 3, then one token at a time."""
    cache = model.new_cache(batch_size=x.size(0), max_len=x.size(1))
    steps, start = [], 0
    for end in [5, 8, *range(9, x.size(1) + 1)]:
        kw = {"cache": cache}
        if mask is not None:
            kw |= {"attention_mask": mask[:, :end], "positions": positions[:, start:end]}
        steps.append(model(x[:, start:end], **kw).logits)
        start = end
    return torch.cat(steps, dim=1), cache


class TestSlidingWindow:
    """``window``: each query sees the ``window`` most recent keys (Mistral / Hugging Face), a rolling cache."""

    def test_mask_is_hugging_faces_sliding_window(self):
        from transformers.masking_utils import sliding_window_causal_mask_function

        index = torch.arange(12)
        for window in (1, 3, 4, 12):
            hf = sliding_window_causal_mask_function(window)
            expected = hf(torch.tensor(0), torch.tensor(0), index[:, None], index[None, :])  # (L, S)
            mine = sliding_window_mask(index, index, window) & causal_mask(12, 12)
            assert torch.equal(mine, expected), window
        assert sliding_window_mask(index, index, 3)[5].nonzero().flatten().tolist() == [3, 4, 5]

    @pytest.mark.parametrize("name", ["mha", "gqa", "mqa"])
    @torch.no_grad()
    def test_each_query_equals_full_attention_over_its_last_window_keys(self, name):
        from zoo.components.positional import RotaryEmbedding

        window = 3
        local, full = make(name, causal=True, window=window), make(name, causal=True)
        assert local.window == window and "window=3" in repr(local)
        rope = RotaryEmbedding(E, head_dim=4)
        x = torch.randn(2, 9, E)
        out = local(x, pos=rope)
        for i in range(9):
            lo = max(0, i - window + 1)
            ref = full(x[:, lo : i + 1], pos=rope, positions=torch.arange(lo, i + 1)[None])[:, -1]
            torch.testing.assert_close(out[:, i], ref, rtol=0, atol=1e-5)

    @torch.no_grad()
    def test_window_covering_the_sequence_is_full_attention(self):
        x = torch.randn(2, 7, E)
        torch.testing.assert_close(make("gqa", causal=True, window=7)(x), make("gqa", causal=True)(x))

    @torch.no_grad()
    def test_cross_attention_has_no_window(self):
        attn = make("gqa", cross=True, window=2)
        assert attn.window is None and isinstance(attn.new_cache(1, 8), CrossKVCache)

    def test_window_below_one_is_refused(self):
        with pytest.raises(ValueError, match=r"window \(0\) must be >= 1"):
            GroupedQueryAttention(E, num_heads=4, key_mask=SlidingWindow(0))
        with pytest.raises(ValueError, match=r"window \(0\) must be >= 1"):
            GroupedQueryAttention.from_options(E, num_heads=4, window=0)
        with pytest.raises(pydantic.ValidationError, match="greater than or equal to 1"):
            GQAConfig(num_heads=4, num_kv_heads=2, window=0)

    @pytest.mark.parametrize("padded", [False, True])
    @torch.no_grad()
    def test_cached_decoding_equals_recomputation_with_a_window_shorter_than_the_sequence(self, padded):
        model = _model(**{"attention.window": 4})
        x = torch.randint(0, 256, (2, 14), generator=torch.Generator().manual_seed(0))
        mask = positions = None
        if padded:
            mask = torch.ones(2, 14, dtype=torch.bool)
            mask[0, :3] = False  # a shorter prompt, left-padded: the window counts sequence indices
            positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
        full = model(x, attention_mask=mask, positions=positions).logits
        got, cache = _decode_in_steps(model, x, mask, positions)
        rows = slice(3, None) if padded else slice(None)
        torch.testing.assert_close(got[0, rows], full[0, rows], rtol=0, atol=1e-5)
        torch.testing.assert_close(got[1], full[1], rtol=0, atol=1e-5)
        assert all(isinstance(c, RollingKVCache) and c.held == 4 for c in cache.layers)
        assert not torch.allclose(full, _model()(x, attention_mask=mask, positions=positions).logits)

    @torch.no_grad()
    def test_cache_bytes_are_bounded_by_the_window(self):
        model = _model(**{"attention.window": 4, "max_len": 64})
        x = torch.randint(0, 256, (1, 64))
        cache = model.new_cache(batch_size=1, max_len=64)
        model(x[:, :8], cache=cache)
        at_8 = cache.nbytes
        for t in range(8, 64):
            model(x[:, t : t + 1], cache=cache)
        # two layers of K and V, each (N=1, Hkv=2, W=4, D=16) float32
        assert cache.nbytes == at_8 == 2 * 2 * (2 * 4 * 16 * 4)

    def test_cost_caps_the_cache_and_the_attention_flops_at_the_window(self):
        from zoo import load_recipe
        from zoo.analysis import summarize

        ctx = BuildContext(d_model=E)
        assert GQAConfig(num_heads=4, num_kv_heads=2, window=4).cost(ctx).window == 4
        assert GQAConfig(num_heads=4, num_kv_heads=2, window=4).cost(replace(ctx, cross=True)).window is None
        assert GQAConfig(num_heads=4, num_kv_heads=2).cost(ctx).window is None
        full = summarize(load_recipe("llama-tiny"), torchinfo=False, seq_len=128)
        local = summarize(load_recipe("llama-tiny", **{"attention.window": 16}), torchinfo=False, seq_len=128)
        assert local.memory.kv_bytes_at_max_len * 8 == full.memory.kv_bytes_at_max_len  # 16 of 128 tokens
        assert local.flops.attention_per_token < full.flops.attention_per_token
        assert local.flops.matmul_per_token == full.flops.matmul_per_token


class TestOwnRotary:
    """``rotary``: a layer rotates q/k with its own rotary encoding (Gemma 3 local layers), not the stack's."""

    @staticmethod
    def with_rotary(theta: float, select: int | str = 1, **recipe):
        attention = {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "bias": False}
        rotary = {"type": "rope", "theta": theta}
        return _model(layers=[{"select": select, "attention": {**attention, "rotary": rotary}}], **recipe)

    @torch.no_grad()
    def test_the_stacks_own_rotary_gives_identical_outputs(self):
        x = torch.randint(0, 256, (2, 12))
        plain, same = _model(), self.with_rotary(10000.0)
        assert same.blocks[1].attention.rotary is not None and plain.blocks[1].attention.rotary is None
        assert same.state_dict().keys() == plain.state_dict().keys()
        same.load_state_dict(plain.state_dict())
        assert torch.equal(same(x).logits, plain(x).logits)

    @torch.no_grad()
    def test_another_theta_changes_the_outputs_and_decodes_like_recomputation(self):
        x = torch.randint(0, 256, (2, 12))
        plain, other = _model(), self.with_rotary(100.0, select=0, **{"attention.window": 4})
        other.load_state_dict(plain.state_dict())
        assert other.blocks[0].attention.rotary.theta == 100.0 and other.blocks[1].attention.rotary is None
        full = other(x).logits
        assert not torch.allclose(full, plain(x).logits, atol=1e-3)
        got, _ = _decode_in_steps(other, x)
        torch.testing.assert_close(got, full, rtol=0, atol=1e-5)

    @torch.no_grad()
    def test_in_a_stack_without_positions_only_the_layer_rotates(self):
        x = torch.randint(0, 256, (2, 12))
        plain = _model(positional={"type": "none"})
        own = self.with_rotary(10000.0, positional={"type": "none"})
        own.load_state_dict(plain.state_dict())
        assert own.blocks[1].attention.rotary is not None and own.blocks[0].attention.rotary is None
        full = own(x).logits
        assert not torch.allclose(full, plain(x).logits, atol=1e-3)
        got, _ = _decode_in_steps(own, x)
        torch.testing.assert_close(got, full, rtol=0, atol=1e-5)

    @pytest.mark.filterwarnings("ignore:positional:zoo.errors.RecipeWarning")  # rope -> alibi drops theta
    def test_a_stack_that_does_not_rotate_or_an_encoding_that_does_not_is_refused(self):
        import zoo

        attention = {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "rotary": {"type": "rope"}}
        stack = r"rotary replaces the stack's rope in this layer, but the stack's positional is 'alibi'"
        with pytest.raises(zoo.RecipeError, match=stack):
            zoo.load_recipe("llama-tiny", positional={"type": "alibi"}, attention=attention)
        biased = r"rotary: positional 'alibi' does not rotate queries and keys"
        with pytest.raises(zoo.RecipeError, match=biased):
            zoo.load_recipe("llama-tiny", attention={**attention, "rotary": {"type": "alibi"}})
        odd = r"rotary: rope rotates 5 of 16 head dims"
        with pytest.raises(zoo.RecipeError, match=odd):
            zoo.load_recipe("llama-tiny", attention={**attention, "rotary": {"type": "rope", "rotary_fraction": 0.3}})


class TestSeams:
    """The constructor takes one argument per seam; a recipe's flat options become the same module."""

    @torch.no_grad()
    def test_flat_options_and_seams_build_the_same_attention(self):
        from zoo.components.norm import RMSNorm

        torch.manual_seed(0)
        flat = GroupedQueryAttention.from_options(
            E, num_heads=4, num_kv_heads=2, bias=False, o_bias=True, qk_norm=RMSNorm, window=3, causal=True
        ).eval()
        seams = GroupedQueryAttention(
            E,
            num_heads=4,
            num_kv_heads=2,
            bias=ProjectionBiases(q=False, k=False, v=False, o=True),
            qk_norm=QKNorm(RMSNorm),
            key_mask=SlidingWindow(3),
            causal=True,
        ).eval()
        assert flat.state_dict().keys() == seams.state_dict().keys()
        seams.load_state_dict(flat.state_dict())
        x = torch.randn(2, 7, E)
        torch.testing.assert_close(seams(x), flat(x), rtol=0, atol=0)
        assert flat.q_proj.bias is None and flat.o_proj.bias is not None
        assert isinstance(flat.new_cache(2, 16), RollingKVCache) and flat.window == 3

    def test_the_constructor_groups_its_options(self):
        import inspect

        names = [n for n in inspect.signature(GroupedQueryAttention).parameters if n not in ("device", "dtype")]
        assert names == [
            "d_model",
            "num_heads",
            "num_kv_heads",
            "head_dim",
            "bias",
            "qk_norm",
            "positions",
            "key_mask",
            "temperature",
            "clip_qkv",
            "kernel",
            "scale",
            "softcap",
            "dropout",
            "sinks",
            "causal",
            "cross",
        ]
