import inspect
import math

import pytest
import torch
from pydantic import ValidationError

from zoo.components import positional as P
from zoo.config import BuildContext


def _n_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return q @ k.transpose(-1, -2)  # (N, H, L, S)


class TestPositionalEncoding:
    def test_base_is_identity_everywhere(self):
        pos, x = P.NoPositionalEncoding(8), torch.randn(2, 3, 8)
        q, k = torch.randn(2, 4, 3, 2), torch.randn(2, 1, 3, 2)
        positions = P.positions_for(3)
        assert pos.embed(x, positions) is x
        assert pos.rotate(q, k, positions) == (q, k)
        assert pos.score_bias(positions, positions) is None
        assert _n_params(pos) == 0

    def test_positions_for_counts_from_the_offset(self):
        assert P.positions_for(4, offset=5).tolist() == [[5, 6, 7, 8]]
        assert P.positions_for(4).dtype == torch.long


class TestSinusoidalEncoding:
    def test_matches_the_formula(self):
        d_model, base = 16, 10000.0
        pe = P.SinusoidalEncoding(d_model, max_len=64, base=base)
        out = pe.embed(torch.zeros(1, 64, d_model, dtype=torch.float64), P.positions_for(64))
        for p, i in [(0, 0), (1, 0), (3, 2), (17, 5), (63, 7)]:
            angle = p / base ** (2 * i / d_model)
            assert out[0, p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert out[0, p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)

    def test_no_parameters_nothing_in_state_dict_and_deterministic(self):
        a, b = P.SinusoidalEncoding(8, max_len=10), P.SinusoidalEncoding(8, max_len=10)
        assert _n_params(a) == 0 and len(a.state_dict()) == 0
        x = torch.randn(2, 10, 8)
        assert torch.equal(a.embed(x, P.positions_for(10)), b.embed(x, P.positions_for(10)))

    def test_adds_the_rows_of_the_given_positions(self):
        pe = P.SinusoidalEncoding(8, max_len=20)
        x = torch.randn(2, 3, 8)
        positions = torch.tensor([[4, 5, 6], [10, 11, 12]])
        torch.testing.assert_close(pe.embed(x, positions) - x, pe.table[positions], rtol=0, atol=1e-6)

    def test_odd_d_model_is_refused(self):
        with pytest.raises(ValueError, match="sinusoidal encoding needs an even d_model, got 7"):
            P.SinusoidalEncoding(7, max_len=4)
        assert P.SinusoidalConfig().check(BuildContext(d_model=7, max_len=4)) == [
            "sinusoidal encoding needs an even d_model, got 7"
        ]


class TestLearnedEncoding:
    def test_parameter_count_and_name(self):
        pe = P.LearnedEncoding(12, max_len=33)
        assert _n_params(pe) == 33 * 12
        assert [name for name, _ in pe.named_parameters()] == ["embedding.weight"]

    def test_offset_positions_select_their_rows(self):
        torch.manual_seed(0)
        pe = P.LearnedEncoding(6, max_len=16)
        x = torch.randn(1, 4, 6)
        out = pe.embed(x, P.positions_for(4, offset=9))
        assert torch.allclose(out - x, pe.embedding.weight[9:13][None], atol=1e-6)
        per_row = pe.embed(torch.zeros(2, 2, 6), torch.tensor([[0, 1], [14, 15]]))
        assert torch.equal(per_row[1], pe.embedding.weight[14:16].detach())

    def test_a_row_offset_adds_rows_and_shifts_every_position(self):
        # OPT: max_len + 2 rows, position p reads row p + 2 (rows 0 and 1 are never read).
        torch.manual_seed(0)
        pe = P.LearnedEncoding(6, max_len=16, offset=2)
        assert pe.embedding.weight.shape == (18, 6)
        out = pe.embed(torch.zeros(2, 3, 6), torch.tensor([[0, 1, 2], [13, 14, 15]]))
        assert torch.equal(out[0], pe.embedding.weight[2:5].detach())
        assert torch.equal(out[1], pe.embedding.weight[15:18].detach())
        ctx = BuildContext(d_model=6, max_len=16)
        assert P.LearnedConfig(offset=2).cost(ctx).params == _n_params(pe) == 18 * 6
        assert P.LearnedConfig().cost(ctx).params == 16 * 6

    def test_is_bounded_by_max_len(self):
        assert P.LearnedConfig.bounded_by_max_len and not P.RopeConfig.bounded_by_max_len
        assert P.LearnedConfig().check(BuildContext(d_model=4, max_len=0)) == [
            "learned positional encoding needs max_len >= 1, got 0"
        ]


class TestRotaryEmbedding:
    def _qk(self, heads=4, kv_heads=4, length=6, head_dim=8, seed=0):
        g = torch.Generator().manual_seed(seed)
        return torch.randn(2, heads, length, head_dim, generator=g), torch.randn(
            2, kv_heads, length, head_dim, generator=g
        )

    @pytest.mark.parametrize("interleaved", [False, True])
    @pytest.mark.parametrize("fraction", [1.0, 0.5])
    def test_scores_depend_only_on_relative_position(self, interleaved, fraction):
        rope = P.RotaryEmbedding(32, head_dim=8, rotary_fraction=fraction, interleaved=interleaved)
        q, k = self._qk()
        at = _attention_scores(*rope.rotate(q, k, P.positions_for(6)))
        shifted = _attention_scores(*rope.rotate(q, k, P.positions_for(6, offset=1000)))
        assert torch.allclose(at, shifted, atol=1e-4, rtol=1e-5)
        assert not torch.allclose(at, _attention_scores(q, k), atol=1e-3)  # it did rotate something

    def test_relative_property_with_per_sequence_positions(self):
        rope = P.RotaryEmbedding(32, head_dim=8)
        q, k = self._qk()
        positions = torch.tensor([[0, 1, 2, 3, 4, 5], [7, 8, 9, 10, 11, 12]])
        rq, rk = rope.rotate(q, k, positions)
        ref_q, ref_k = rope.rotate(q, k, P.positions_for(6))
        assert torch.allclose(_attention_scores(rq, rk), _attention_scores(ref_q, ref_k), atol=1e-5)
        assert not torch.allclose(rq[1], ref_q[1], atol=1e-3)

    @pytest.mark.parametrize("interleaved", [False, True])
    def test_preserves_norms(self, interleaved):
        rope = P.RotaryEmbedding(32, head_dim=8, interleaved=interleaved)
        q, k = self._qk()
        rq, rk = rope.rotate(q, k, P.positions_for(6, offset=3))
        assert torch.allclose(rq.norm(dim=-1), q.norm(dim=-1), atol=1e-5)
        assert torch.allclose(rk.norm(dim=-1), k.norm(dim=-1), atol=1e-5)

    def test_position_zero_is_the_identity(self):
        rope = P.RotaryEmbedding(32, head_dim=8)
        q, k = self._qk(length=1)
        rq, rk = rope.rotate(q, k, P.positions_for(1))
        assert torch.equal(rq, q) and torch.equal(rk, k)

    def test_rotary_fraction_leaves_the_other_dims_untouched(self):
        rope = P.RotaryEmbedding(64, head_dim=16, rotary_fraction=0.25)
        assert rope.rotary_dim == 4
        q, k = self._qk(head_dim=16)
        rq, rk = rope.rotate(q, k, P.positions_for(6, offset=2))
        assert torch.equal(rq[..., 4:], q[..., 4:]) and torch.equal(rk[..., 4:], k[..., 4:])
        assert not torch.allclose(rq[..., :4], q[..., :4])

    def test_half_and_interleaved_conventions_pair_different_dims(self):
        half = P.RotaryEmbedding(32, head_dim=8)
        adjacent = P.RotaryEmbedding(32, head_dim=8, interleaved=True)
        q, k = self._qk()
        positions = P.positions_for(6, offset=1)
        assert not torch.allclose(half.rotate(q, k, positions)[0], adjacent.rotate(q, k, positions)[0])
        # Position 1, pair 0 turns by exactly 1 radian: dims (0, 4) for halves, (0, 1) for adjacent pairs.
        e0 = torch.zeros(1, 1, 1, 8)
        e0[..., 0] = 1.0
        c, s = math.cos(1.0), math.sin(1.0)
        expected_half = torch.tensor([c, 0, 0, 0, s, 0, 0, 0]).view(1, 1, 1, 8)
        expected_adjacent = torch.tensor([c, s, 0, 0, 0, 0, 0, 0]).view(1, 1, 1, 8)
        one = P.positions_for(1, offset=1)
        assert torch.allclose(half.rotate(e0, e0, one)[0], expected_half, atol=1e-6)
        assert torch.allclose(adjacent.rotate(e0, e0, one)[0], expected_adjacent, atol=1e-6)

    def test_matches_the_rotate_half_reference(self):
        # The GPT-NeoX / Llama formula written out: x * cos + rotate_half(x) * sin, cos/sin repeated twice.
        rope = P.RotaryEmbedding(32, head_dim=8, theta=500.0)
        q, k = self._qk()
        positions = P.positions_for(6, offset=4)
        inv_freq = 1.0 / (500.0 ** (torch.arange(0, 8, 2).float() / 8))
        freqs = positions[0].float()[:, None] * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)

        def rotate_half(x):
            return torch.cat((-x[..., 4:], x[..., :4]), dim=-1)

        expected = q * emb.cos() + rotate_half(q) * emb.sin()
        assert torch.allclose(rope.rotate(q, k, positions)[0], expected, atol=1e-6)

    def test_grouped_query_shapes(self):
        rope = P.RotaryEmbedding(32, head_dim=8)
        q, k = self._qk(heads=6, kv_heads=2)
        rq, rk = rope.rotate(q, k, P.positions_for(6))
        assert rq.shape == (2, 6, 6, 8) and rk.shape == (2, 2, 6, 8)
        # The same head contents get the same rotation whichever tensor they sit in.
        assert torch.allclose(rope.rotate(k, k, P.positions_for(6))[0], rk)

    def test_keeps_the_input_dtype(self):
        rope = P.RotaryEmbedding(32, head_dim=8)
        q, k = (t.to(torch.bfloat16) for t in self._qk())
        rq, rk = rope.rotate(q, k, P.positions_for(6))
        assert rq.dtype == rk.dtype == torch.bfloat16

    def test_odd_number_of_rotated_dims_is_refused(self):
        message = "rope rotates 33 of 64 head dims (rotary_fraction 0.52); that must be an even number"
        assert P.RopeConfig(rotary_fraction=0.52).check(BuildContext(d_model=256, head_dim=64)) == [message]
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            P.RotaryEmbedding(256, head_dim=64, rotary_fraction=0.52)
        assert P.RopeConfig(rotary_fraction=0.5).check(BuildContext(d_model=256, head_dim=64)) == []

    def test_config_limits(self):
        with pytest.raises(ValidationError, match="rotary_fraction"):
            P.RopeConfig(rotary_fraction=0.0)
        with pytest.raises(ValidationError, match="rotary_fraction"):
            P.RopeConfig(rotary_fraction=1.5)


class TestALiBi:
    def test_slopes_for_a_power_of_two(self):
        alibi = P.ALiBi(64, num_heads=8)
        assert torch.allclose(alibi.slopes, torch.tensor([2.0**-i for i in range(1, 9)]))
        assert _n_params(alibi) == 0 and len(alibi.state_dict()) == 0

    def test_slopes_for_twelve_heads_interleave(self):
        # 8 heads' slopes 2^-1..2^-8, then every other slope of 16 heads (2^-0.5, 2^-1.5, ...) for the rest.
        expected = [2.0**-i for i in range(1, 9)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]
        assert P.alibi_slopes(12) == pytest.approx(expected)

    def test_bias_is_minus_slope_times_distance(self):
        alibi = P.ALiBi(64, num_heads=4)
        q_pos, k_pos = P.positions_for(5, offset=3), P.positions_for(8)
        bias = alibi.score_bias(q_pos, k_pos)
        assert bias.shape == (1, 4, 5, 8)
        assert bias[0, 1, 2, 0].item() == pytest.approx(-(2.0**-4) * 5)  # head 1, query 5, key 0
        diagonal = alibi.score_bias(P.positions_for(5), P.positions_for(5)).diagonal(dim1=-2, dim2=-1)
        assert torch.equal(diagonal, torch.zeros(1, 4, 5))

    def test_bias_depends_only_on_relative_position(self):
        alibi = P.ALiBi(64, num_heads=3)
        positions = P.positions_for(6)
        shifted = torch.cat([P.positions_for(6, offset=10), P.positions_for(6, offset=50)])
        base = alibi.score_bias(positions, positions)
        assert torch.allclose(alibi.score_bias(shifted, shifted), base.expand(2, -1, -1, -1))


# T5 buckets for relative positions (key - query), worked out by hand from T5's rule with 32 buckets and
# max_distance 128. Bidirectional: 16 buckets per direction, keys after the query offset by 16, distances
# below 8 exact, then 8 + floor(log(d / 8) / log(128 / 8) * 8), at most 15. Causal: keys after the query
# in bucket 0, distances below 16 exact, then 16 + floor(log(d / 16) / log(128 / 16) * 16), at most 31.
T5_BUCKETS = {
    # relative position: (bidirectional, causal)
    0: (0, 0),
    1: (17, 0),
    -1: (1, 1),
    7: (23, 0),
    -7: (7, 7),
    8: (24, 0),
    -8: (8, 8),
    15: (25, 0),  # 8 + floor(log(15/8) / log(16) * 8) = 8 + floor(1.81)
    -15: (9, 15),
    16: (26, 0),  # log(2) / log(16) * 8 = 2
    -16: (10, 16),  # causal: first log bucket, log(1) = 0
    -32: (12, 21),  # causal: 16 + floor(log(2) / log(8) * 16) = 16 + floor(5.33)
    -64: (14, 26),  # causal: 16 + floor(10.67)
    100: (31, 0),  # 8 + floor(log(12.5) / log(16) * 8) = 8 + 7
    -100: (15, 30),  # causal: 16 + floor(log(6.25) / log(8) * 16) = 16 + floor(14.1)
    200: (31, 0),
    -200: (15, 31),  # beyond max_distance: the last bucket of the direction
}


class TestT5RelativeBias:
    @pytest.mark.parametrize("causal", [False, True])
    def test_buckets_match_t5(self, causal):
        relative = torch.tensor(list(T5_BUCKETS))
        expected = [pair[int(causal)] for pair in T5_BUCKETS.values()]
        buckets = P.relative_position_bucket(relative, bidirectional=not causal, num_buckets=32, max_distance=128)
        assert buckets.tolist() == expected

    def test_parameter_count_of_t5_small(self):
        bias = P.T5RelativeBias(512, num_heads=8)
        assert _n_params(bias) == 256
        assert [name for name, _ in bias.named_parameters()] == ["relative_attention_bias.weight"]

    def test_score_bias_reads_the_table_by_bucket(self):
        torch.manual_seed(0)
        bias = P.T5RelativeBias(16, num_heads=2, num_buckets=8, max_distance=16, causal=True)
        q_pos, k_pos = P.positions_for(3, offset=2), P.positions_for(5)
        out = bias.score_bias(q_pos, k_pos)
        assert out.shape == (1, 2, 3, 5)
        table = bias.relative_attention_bias.weight
        for i in range(3):
            for j in range(5):
                rel = torch.tensor(j - (i + 2))
                bucket = P.relative_position_bucket(rel, bidirectional=False, num_buckets=8, max_distance=16)
                assert torch.equal(out[0, :, i, j], table[bucket])

    def test_score_bias_depends_only_on_relative_position(self):
        bias = P.T5RelativeBias(16, num_heads=3)
        positions = P.positions_for(7)
        shifted = torch.cat([P.positions_for(7, offset=30), P.positions_for(7, offset=300)])
        base = bias.score_bias(positions, positions)
        assert torch.equal(bias.score_bias(shifted, shifted), base.expand(2, -1, -1, -1))

    def test_bad_bucket_layouts_are_refused(self):
        message = "t5_relative max_distance (16) must exceed the 16 exact buckets (num_buckets 32, causal True)"
        assert P.T5RelativeConfig(max_distance=16).check(BuildContext(d_model=8, causal=True)) == [message]
        assert P.T5RelativeConfig(max_distance=16).check(BuildContext(d_model=8, causal=False)) == []
        with pytest.raises(ValueError, match=r"num_buckets >= 4 \(causal False\), got 3"):
            P.T5RelativeBias(8, num_heads=2, num_buckets=3)


CONFIGS = {
    "none": P.NoPositionalConfig,
    "sinusoidal": P.SinusoidalConfig,
    "learned": P.LearnedConfig,
    "rope": P.RopeConfig,
    "alibi": P.ALiBiConfig,
    "t5_relative": P.T5RelativeConfig,
    "learned_relative": P.LearnedRelativeConfig,
    "deberta_relative": P.DebertaRelativeConfig,
    "relative_2d": P.Relative2DConfig,
    "t5_global_relative": P.T5GlobalRelativeConfig,
}


IMAGE_ONLY = {"relative_2d"}
"""Encodings of a patch grid, built from an image's sizes (tests/components/test_relative_2d.py runs them)."""


def _registered() -> list[tuple]:
    calls = []
    P.register_components(register=lambda *args, **kwargs: calls.append((args, kwargs)))
    return [args for args, _ in calls]


def _build(factory, config, ctx: BuildContext):
    """What the builder does: config fields, plus the context values the factory asks for by name."""
    fields = config.model_dump(exclude={"type"})
    names = inspect.signature(factory).parameters
    context = {k: v for k, v in ctx.as_kwargs(frozenset(names)).items() if k not in fields}
    return factory(ctx.d_model, **fields, **context)


class TestRegistration:
    def test_registers_the_ten_encodings_with_their_configs(self):
        registered = _registered()
        assert {name: config for kind, name, _, config in registered} == CONFIGS
        assert {kind for kind, *_ in registered} == {"positional"}
        for _, name, _, config in registered:
            assert config.model_fields["type"].default == name

    def test_config_fields_are_constructor_keywords(self):
        for _, name, factory, config in _registered():
            keywords = inspect.signature(factory).parameters
            assert set(config.model_fields) - {"type"} <= set(keywords), name

    def test_each_builds_from_a_context_and_runs(self):
        ctx = BuildContext(d_model=16, max_len=12, num_heads=4, head_dim=4, causal=True)
        x, q, k = torch.randn(2, 5, 16), torch.randn(2, 4, 5, 4), torch.randn(2, 2, 5, 4)
        positions = P.positions_for(5, offset=3)
        for _, name, factory, config in _registered():
            if name in IMAGE_ONLY:
                continue
            pos = _build(factory, config(), ctx)
            assert isinstance(pos, P.PositionalEncoding), name
            assert pos.embed(x, positions).shape == x.shape
            rq, rk = pos.rotate(q, k, positions)
            assert rq.shape == q.shape and rk.shape == k.shape
            bias = pos.score_bias(positions, P.positions_for(8))
            assert bias is None or bias.shape == (1, 4, 5, 8), name

    def test_each_compiles_without_graph_breaks(self):
        ctx = BuildContext(d_model=16, max_len=12, num_heads=4, head_dim=4)
        x, q, k = torch.randn(2, 5, 16), torch.randn(2, 4, 5, 4), torch.randn(2, 2, 5, 4)
        positions = P.positions_for(5)
        for _, name, factory, config in _registered():
            if name in IMAGE_ONLY:
                continue
            pos = _build(factory, config(), ctx)

            def step(x, q, k, positions, pos=pos):
                q, k = pos.rotate(q, k, positions)
                bias = pos.score_bias(positions, positions)
                return pos.embed(x, positions), q, k, bias

            torch._dynamo.reset()
            compiled = torch.compile(step, backend="eager", fullgraph=True)
            for got, want in zip(compiled(x, q, k, positions), step(x, q, k, positions), strict=True):
                assert (got is None and want is None) or torch.allclose(got, want), name


class TestRopeScaling:
    def reference_llama3(self, speeds, factor, low, high, original):
        # Meta's reference rule, element by element.
        out = []
        for s in speeds.tolist():
            wavelength = 2 * math.pi / s
            if wavelength < original / high:
                out.append(s)
            elif wavelength > original / low:
                out.append(s / factor)
            else:
                smooth = (original / wavelength - low) / (high - low)
                out.append((1 - smooth) * s / factor + smooth * s)
        return torch.tensor(out)

    def test_llama3_rule_matches_the_reference(self):
        speeds = P.inverse_frequencies(64, 500000.0)
        got = P.scale_frequencies(
            speeds, "llama3", factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_len=8192
        )
        torch.testing.assert_close(got, self.reference_llama3(speeds, 32.0, 1.0, 4.0, 8192), rtol=1e-6, atol=0)
        assert got[0] == speeds[0] and got[-1] == speeds[-1] / 32  # fast pairs kept, slow ones stretched

    def test_linear_divides_and_none_keeps(self):
        speeds = P.inverse_frequencies(16, 10000.0)
        assert torch.equal(P.scale_frequencies(speeds, "none"), speeds)
        torch.testing.assert_close(P.scale_frequencies(speeds, "linear", factor=4.0), speeds / 4)

    def test_scaled_rope_is_still_relative(self):
        rope = P.RotaryEmbedding(64, head_dim=16, scaling="llama3", scaling_factor=8.0, original_max_len=64)
        q, k = torch.randn(1, 2, 5, 16), torch.randn(1, 2, 5, 16)
        pos = torch.arange(5)[None]
        a = torch.einsum("nhld,nhmd->nhlm", *rope.rotate(q, k, pos))
        b = torch.einsum("nhld,nhmd->nhlm", *rope.rotate(q, k, pos + 1000))
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)

    def test_inconsistent_factors_are_refused(self):
        with pytest.raises(ValueError, match=r"high_freq_factor \(1.0\) must be at least low_freq_factor \(2.0\)"):
            P.RopeConfig(scaling="llama3", low_freq_factor=2.0, high_freq_factor=1.0)
