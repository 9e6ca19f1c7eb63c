"""RoPE's scalings as transformers computes them: the speeds and attention factor of ``ROPE_INIT_FUNCTIONS`` for
every scaling, and the rotated queries and keys of Llama's rotary embedding (its ``dynamic_rope_update``
included): dynamic NTK within and past the original length, LongRoPE below and above it, in one call and step by
step; LongRoPE's cached keys turning to the long factors with the sequence; and what a config refuses."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

import zoo
from zoo.components import positional as P
from zoo.config import BuildContext

transformers = pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.llama import modeling_llama as hf  # noqa: E402

transformers.logging.set_verbosity_error()

ORIGINAL = "original_max_position_embeddings"
SHORT = [1.0, 1.1, 1.3, 1.6, 2.0, 2.5, 3.0, 4.0]
LONG = [1.0, 1.5, 2.5, 4.0, 6.0, 9.0, 12.0, 16.0]
HEAD_DIM = 16

SCALINGS = {
    # name: (rope_parameters as a transformers config gives them, max_position_embeddings, zoo's options)
    "linear": ({"rope_type": "linear", "factor": 4.0}, 64, {"scaling": "linear", "scaling_factor": 4.0}),
    "dynamic": (
        {"rope_type": "dynamic", "factor": 4.0},
        8,
        {"scaling": "dynamic", "scaling_factor": 4.0, "original_max_len": 8},
    ),
    "yarn": (
        {"rope_type": "yarn", "factor": 4.0, ORIGINAL: 8, "beta_fast": 8.0, "beta_slow": 2.0},
        32,
        {"scaling": "yarn", "scaling_factor": 4.0, "original_max_len": 8, "beta_fast": 8.0, "beta_slow": 2.0},
    ),
    "longrope": (
        {"rope_type": "longrope", "short_factor": SHORT, "long_factor": LONG, ORIGINAL: 8},
        32,  # no factor: transformers takes 32 / 8 for the attention factor
        {
            "scaling": "longrope",
            "scaling_factor": 4.0,
            "original_max_len": 8,
            "short_factor": SHORT,
            "long_factor": LONG,
        },
    ),
    "longrope-given-attention-factor": (
        {"rope_type": "longrope", "short_factor": SHORT, "long_factor": LONG, ORIGINAL: 8, "attention_factor": 1.1},
        32,
        {
            "scaling": "longrope",
            "original_max_len": 8,
            "short_factor": SHORT,
            "long_factor": LONG,
            "attention_factor": 1.1,
        },
    ),
    "llama3": (
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, ORIGINAL: 16},
        64,
        {"scaling": "llama3", "scaling_factor": 8.0, "original_max_len": 16},
    ),
}


def hf_config(name: str, theta: float = 500.0):
    params, positions, _ = SCALINGS[name]
    return transformers.LlamaConfig(
        hidden_size=2 * HEAD_DIM,
        num_attention_heads=2,
        head_dim=HEAD_DIM,
        max_position_embeddings=positions,
        rope_parameters={**params, "rope_theta": theta},
    )


def zoo_rope(name: str, theta: float = 500.0) -> P.RotaryEmbedding:
    return P.RotaryEmbedding(2 * HEAD_DIM, head_dim=HEAD_DIM, theta=theta, **SCALINGS[name][2])


def rotated_by_transformers(name: str, q, k, positions):
    """q and k rotated by a fresh LlamaRotaryEmbedding (its dynamic and longrope updates keep state)."""
    cos, sin = hf.LlamaRotaryEmbedding(hf_config(name))(q, positions)
    return hf.apply_rotary_pos_emb(q, k, cos, sin)


@pytest.mark.parametrize("name", sorted(SCALINGS))
@pytest.mark.parametrize("seq_len", [None, 6, 40])
def test_speeds_and_attention_factor_match_rope_init_functions(name, seq_len):
    """At transformers' initial length (None) and for a sequence of ``seq_len`` positions."""
    config = hf_config(name)
    kind = SCALINGS[name][0]["rope_type"]
    expected, factor = ROPE_INIT_FUNCTIONS[kind](config, seq_len=seq_len)
    rope = zoo_rope(name)
    speeds = P.scale_frequencies(P.inverse_frequencies(HEAD_DIM, 500.0), **rope.scaling, seq_len=seq_len)
    # yarn, linear and llama3 divide base^-x by the factor where transformers divides 1 / (factor · base^x): an ulp.
    exact = kind in ("dynamic", "longrope")
    torch.testing.assert_close(speeds, expected, rtol=0 if exact else 2e-7, atol=0)
    assert rope.attention_factor == pytest.approx(factor, rel=1e-15)


def test_longrope_default_attention_factor_is_sqrt_of_one_plus_log_ratio():
    assert zoo_rope("longrope").attention_factor == math.sqrt(1 + math.log(4.0) / math.log(8))
    assert P.longrope_attention_factor(1.0, 8) == 1.0


@pytest.mark.parametrize(
    "name, length, offset",
    [
        ("dynamic", 6, 0),  # within the original 8: the base as it is
        ("dynamic", 8, 0),  # exactly the original length
        ("dynamic", 20, 0),  # past it: the base grown for 20 positions
        ("dynamic", 5, 30),  # a short call far on (a decode step): grown for 35
        ("longrope", 8, 0),  # up to the original length: the short factors
        ("longrope", 9, 0),  # one past it: the long factors
        ("longrope", 3, 40),
        ("yarn", 20, 0),
        ("llama3", 20, 5),
        ("linear", 20, 0),
    ],
)
def test_rotation_equals_llama_rotary_embedding(name, length, offset):
    """Rows at their own positions (the second left-padded by two): the longest decides, as in transformers."""
    positions = torch.arange(length)[None].repeat(2, 1) + offset
    positions[1] = (positions[1] - 2).clamp(min=0)
    q, k = torch.randn(2, 3, length, HEAD_DIM), torch.randn(2, 1, length, HEAD_DIM)
    expected = rotated_by_transformers(name, q, k, positions)
    actual = zoo_rope(name).rotate(q, k, positions)
    exact = name in ("dynamic", "longrope")  # zoo computes their speeds in transformers' order, to the last bit
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e, rtol=0 if exact else 1e-5, atol=0 if exact else 1e-5)


@pytest.mark.parametrize("name", ["dynamic", "longrope"])
def test_decoding_step_by_step_equals_transformers_cache(name):
    """One rotary module through a prefill and 16 decode steps, as transformers' generate calls it: each new key
    rotated by the rule of its own call (dynamic: the base grows every step past 8)."""
    reference, rope = hf.LlamaRotaryEmbedding(hf_config(name)), zoo_rope(name)
    q, k = torch.randn(1, 2, 20, HEAD_DIM), torch.randn(1, 1, 20, HEAD_DIM)
    for start, end in [(0, 4), *((t, t + 1) for t in range(4, 20))]:
        positions = torch.arange(start, end)[None]
        cos, sin = reference(q, positions)
        expected = hf.apply_rotary_pos_emb(q[:, :, start:end], k[:, :, start:end], cos, sin)
        actual = rope.rotate(q[:, :, start:end], k[:, :, start:end], positions)
        for a, e in zip(actual, expected, strict=True):
            assert torch.equal(a, e), (start, end)


def test_dynamic_base_grows_past_the_original_length_only():
    rope = zoo_rope("dynamic")
    assert torch.equal(rope.speeds(torch.arange(8)[None]), P.inverse_frequencies(HEAD_DIM, 500.0))
    grown = rope.speeds(torch.arange(9)[None])
    assert torch.equal(grown[0], torch.tensor(1.0)) and (grown[1:] < P.inverse_frequencies(HEAD_DIM, 500.0)[1:]).all()


def test_longrope_switches_factors_past_the_original_length():
    rope, speeds = zoo_rope("longrope"), P.inverse_frequencies(HEAD_DIM, 500.0)
    torch.testing.assert_close(rope.speeds(torch.arange(8)[None]), speeds / torch.tensor(SHORT))
    torch.testing.assert_close(rope.speeds(torch.tensor([[8]])), speeds / torch.tensor(LONG))
    assert rope.stale_after == 8 and zoo_rope("dynamic").stale_after is None


def longrope_decoder(attention: dict) -> torch.nn.Module:
    """A two-layer decoder whose rope switches to its long factors past 8 positions."""
    torch.manual_seed(0)
    recipe = {
        "name": "longrope-tiny",
        "architecture": "decoder",
        "vocab_size": 50,
        "d_model": 32,
        "num_layers": 2,
        "max_len": 32,
        "attention": attention,
        "positional": {"type": "rope", "interleaved": attention["type"] == "mla", **SCALINGS["longrope"][2]},
        "norm": "rmsnorm",
        "ffn": {"type": "swiglu", "hidden": 32},
    }
    if attention["type"] == "mla":  # 2 rotated pairs
        recipe["positional"].update(short_factor=[1.0, 1.0], long_factor=[4.0, 16.0])
    model = zoo.build(recipe).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))  # scores far enough from uniform that the rotation shows
    return model


GQA = {"type": "gqa", "num_heads": 2, "num_kv_heads": 1, "head_dim": HEAD_DIM}
MLA = {"type": "mla", "num_heads": 2, "kv_lora_rank": 8, "qk_nope_head_dim": 4, "qk_rope_head_dim": 4, "v_head_dim": 4}


@pytest.mark.parametrize("attention", [GQA, {**GQA, "window": 5}, MLA], ids=["gqa", "rolling-window", "mla"])
@pytest.mark.parametrize("static", [False, True])
def test_longrope_generation_recomputes_its_cache_where_it_goes_stale(attention, static):
    """Prompts of 5 tokens (short factors) and 7 more (long ones from the ninth): generate prefills again at 9
    tokens, so the cached tokens equal those recomputed every step (and cached keys alone would not: every
    layer's keys past the first come from hidden states the short factors made)."""
    from zoo.generate import generate, recompute_length

    model = longrope_decoder(attention)
    assert recompute_length(model) == 9
    prompts = torch.randint(1, 50, (2, 5), generator=torch.Generator().manual_seed(1))
    recomputed = generate(model, prompts, max_new_tokens=7, use_cache=False).tokens
    assert generate(model, prompts, max_new_tokens=7, static_cache=static).tokens == recomputed
    with torch.no_grad():  # without the new prefill, the step at 9 tokens reads short-factor keys
        cache = model.new_cache(2, 9)
        ids = torch.cat([prompts, torch.tensor(recomputed)[:, :4]], dim=1)
        model(ids[:, :8], cache=cache)
        stale = model(ids[:, 8:9], cache=cache).logits[:, -1]
        assert not torch.allclose(stale, model(ids).logits[:, -1], atol=1e-3)


@pytest.mark.parametrize("name", ["dynamic", "longrope"])
def test_length_dependent_scalings_compile_without_graph_breaks(name):
    rope = zoo_rope(name)
    q, k = torch.randn(1, 2, 12, HEAD_DIM), torch.randn(1, 1, 12, HEAD_DIM)
    positions = torch.arange(12)[None]
    torch._dynamo.reset()
    compiled = torch.compile(rope.rotate, backend="eager", fullgraph=True)
    for got, want in zip(compiled(q, k, positions), rope.rotate(q, k, positions), strict=True):
        assert torch.equal(got, want)


REFUSED = [
    ({"scaling": "longrope", "long_factor": LONG}, "longrope needs short_factor: a factor for each rotated pair"),
    ({"scaling": "longrope"}, "longrope needs short_factor and long_factor"),
    (
        {"scaling": "longrope", "short_factor": SHORT, "long_factor": LONG[:3]},
        r"longrope's short_factor \(8 factors\) and long_factor \(3\) must be as long as each other",
    ),
    ({"scaling": "longrope", "short_factor": [1.0, 0.0], "long_factor": [1.0, 2.0]}, "greater than 0"),
    ({"scaling": "yarn", "short_factor": SHORT}, "short_factor are longrope's; scaling is 'yarn'"),
    ({"scaling": "linear", "attention_factor": 1.2}, "attention_factor is yarn's and longrope's; scaling is 'linear'"),
    ({"scaling": "dynamic", "mscale": 1.0}, "mscale is yarn's; scaling is 'dynamic'"),
    ({"scaling": "dynamic", "scaling_factor": 0.5}, "scaling_factor\n  Input should be greater than or equal to 1"),
]


@pytest.mark.parametrize("options, message", REFUSED)
def test_inconsistent_scaling_options_are_refused_by_name(options, message):
    with pytest.raises(ValidationError, match=message):
        P.RopeConfig(**options)
    if "scaling_factor" not in options and "greater than" not in message:  # the module refuses them too
        with pytest.raises(ValueError, match=message):
            P.RotaryEmbedding(2 * HEAD_DIM, head_dim=HEAD_DIM, **options)


def test_factors_must_fit_the_rotated_dims():
    config = P.RopeConfig(scaling="longrope", short_factor=SHORT, long_factor=LONG, rotary_fraction=0.5)
    assert config.check(BuildContext(d_model=32, head_dim=HEAD_DIM)) == [
        "longrope has 8 short and long factors for 8 rotated dims; it needs 4, one for each pair"
    ]
    assert (
        P.RopeConfig(scaling="longrope", short_factor=SHORT, long_factor=LONG).check(
            BuildContext(d_model=32, head_dim=HEAD_DIM)
        )
        == []
    )
    with pytest.raises(ValueError, match="dynamic scaling needs at least 4 rotated dims"):
        P.RotaryEmbedding(8, head_dim=2, scaling="dynamic", scaling_factor=2.0)


@pytest.mark.parametrize(
    "options, words",
    [
        ({"scaling": "dynamic", "scaling_factor": 2.0, "original_max_len": 4096}, "dynamic NTK scaling ×2 past 4096"),
        (
            {
                "scaling": "longrope",
                "scaling_factor": 32.0,
                "original_max_len": 4096,
                "short_factor": [1.0],
                "long_factor": [2.0],
            },
            "LongRoPE scaling ×32 past 4096",
        ),
        ({"scaling": "linear", "scaling_factor": 4.0}, "linear scaling ×4"),
    ],
)
def test_the_label_names_the_scaling(options, words):
    label = P.RopeConfig(**options).label("positional", BuildContext(d_model=32, head_dim=2), None)
    assert words in label.title
