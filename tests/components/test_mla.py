"""Multi-head latent attention: parameters as declared, Hugging Face's DeepseekV3Attention reproduced, a cache of
latents and rotary keys only, and cached decoding equal to recomputation."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

import zoo
from zoo.components import mla
from zoo.components.attention import causal_mask
from zoo.components.mla import MLAConfig, MultiHeadLatentAttention
from zoo.components.positional import RotaryEmbedding, positions_for
from zoo.config import BuildContext
from zoo.errors import RecipeError

E = 24
SHAPE = dict(num_heads=3, kv_lora_rank=10, qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5)


def make(seed: int = 0, **kwargs) -> MultiHeadLatentAttention:
    torch.manual_seed(seed)
    module = MultiHeadLatentAttention(E, **{**SHAPE, "causal": True, **kwargs}).eval()
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.1 * torch.randn_like(p))  # norm scales off one, so their mapping matters
    return module


def rope(interleaved: bool = False) -> RotaryEmbedding:
    return RotaryEmbedding(E, head_dim=SHAPE["qk_rope_head_dim"], interleaved=interleaved)


def n_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


class TestModule:
    @pytest.mark.parametrize("q_lora_rank", [None, 7])
    @pytest.mark.parametrize("bias", [False, True])
    def test_parameters_are_the_declared_cost(self, q_lora_rank, bias):
        module = make(q_lora_rank=q_lora_rank, bias=bias)
        config = MLAConfig(**SHAPE, q_lora_rank=q_lora_rank, bias=bias)
        assert n_params(module) == config.cost(BuildContext(d_model=E)).params
        names = {n for n, _ in module.named_parameters()}
        assert ("q_proj.weight" in names) == (q_lora_rank is None)
        assert ("q_a_norm.weight" in names) == (q_lora_rank is not None)
        assert ("o_proj.bias" in names) == bias and "kv_b_proj.bias" not in names

    def test_output_shape_and_head_width_for_positions(self):
        x = torch.randn(2, 5, E)
        assert make()(x, pos=rope()).shape == (2, 5, E)
        assert MLAConfig(**SHAPE).head_dim_for(E) == SHAPE["qk_rope_head_dim"]

    def test_rope_is_the_identity_at_position_zero_only(self):
        # The first token sees only itself at position 0, where RoPE turns nothing; later ones see rotated keys.
        module, x = make(), torch.randn(1, 6, E)
        with torch.no_grad():
            plain, rotated = module(x), module(x, pos=rope())
        torch.testing.assert_close(plain[:, 0], rotated[:, 0])
        assert not torch.allclose(plain[:, 1:], rotated[:, 1:])

    def test_context_is_refused(self):
        with pytest.raises(ValueError, match="self-attention only"):
            make()(torch.randn(1, 2, E), context=torch.randn(1, 3, E))


class TestCache:
    @pytest.mark.parametrize("interleaved", [False, True])
    @pytest.mark.parametrize("q_lora_rank", [None, 7])
    def test_cached_decoding_equals_recomputation(self, interleaved, q_lora_rank):
        module, pos, x = make(q_lora_rank=q_lora_rank), rope(interleaved), torch.randn(2, 9, E)
        with torch.no_grad():
            full = module(x, pos=pos)
            cache = module.new_cache(2, 9)
            steps = [module(x[:, :4], pos=pos, cache=cache)]
            steps += [module(x[:, t : t + 1], pos=pos, cache=cache) for t in range(4, 9)]
        torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-6, rtol=1e-5)

    def test_cached_decoding_with_padding_and_positions(self):
        # Row 1 left-padded by two: its real tokens sit at positions 0.., and the mask hides the pads.
        module, pos, x = make(), rope(), torch.randn(2, 7, E)
        real = torch.ones(2, 7, dtype=torch.bool)
        real[1, :2] = False
        positions = (real.long().cumsum(-1) - 1).clamp(min=0)
        mask = real[:, None, None, :] & causal_mask(7, 7)
        with torch.no_grad():
            full = module(x, mask=mask, positions=positions, pos=pos)
            cache = module.new_cache(2, 7)
            steps = [module(x[:, :5], mask=mask[..., :5, :5], positions=positions[:, :5], pos=pos, cache=cache)]
            for t in (5, 6):
                step_mask = real[:, None, None, : t + 1]
                steps.append(
                    module(x[:, t : t + 1], mask=step_mask, positions=positions[:, t : t + 1], pos=pos, cache=cache)
                )
        torch.testing.assert_close(torch.cat(steps, dim=1)[real], full[real], atol=1e-6, rtol=1e-5)

    def test_the_cache_holds_the_latent_and_one_rotary_key_per_token(self):
        module, cache = make(), None
        cache = module.new_cache(2, 16)
        with torch.no_grad():
            module(torch.randn(2, 5, E), pos=rope(), cache=cache)
        R, Dr = SHAPE["kv_lora_rank"], SHAPE["qk_rope_head_dim"]
        assert cache.k.shape == (2, 1, 16, R) and cache.v.shape == (2, 1, 16, Dr)
        assert cache.nbytes == 2 * 16 * (R + Dr) * 4  # float32, whatever the number of heads
        assert MLAConfig(**SHAPE).cost(BuildContext(d_model=E)).cached_per_token == R + Dr


def tiny_recipe(**attention) -> dict:
    return {
        "name": "mla-tiny",
        "architecture": "decoder",
        "vocab_size": 50,
        "d_model": E,
        "num_layers": 2,
        "max_len": 32,
        "attention": {"type": "mla", **SHAPE, **attention},
        "positional": {"type": "rope", "interleaved": True},
        "norm": "rmsnorm",
        "ffn": {"type": "swiglu", "hidden": 32},
    }


class TestInAModel:
    def test_summary_kv_cache_is_latent_plus_rope_dims_per_layer(self):
        from zoo.analysis import summarize

        memory = summarize(tiny_recipe(), torchinfo=False).memory
        assert memory.kv_bytes_per_token == 2 * (SHAPE["kv_lora_rank"] + SHAPE["qk_rope_head_dim"]) * 2  # bf16

    def test_model_cached_generation_equals_recomputation(self):
        from zoo.generate import generate

        torch.manual_seed(0)
        model = zoo.build(tiny_recipe(q_lora_rank=8)).eval()
        prompts = torch.randint(1, 50, (2, 5), generator=torch.Generator().manual_seed(1))
        cached = generate(model, prompts, max_new_tokens=10)
        assert cached.tokens == generate(model, prompts, max_new_tokens=10, use_cache=False).tokens

    def test_is_not_a_cross_attention(self):
        recipe = {**tiny_recipe(), "architecture": "encoder-decoder"}
        with pytest.raises(RecipeError, match="attention 'mla' cannot be cross-attention"):
            zoo.load_recipe(recipe)

    def test_odd_rope_dims_are_refused(self):
        with pytest.raises(RecipeError, match=r"qk_rope_head_dim \(5\) must be even"):
            zoo.load_recipe(tiny_recipe(qk_rope_head_dim=5))

    def test_config_requires_the_latent_shape(self):
        with pytest.raises(ValidationError, match="kv_lora_rank\n  Field required"):
            MLAConfig(num_heads=2, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=4)


def test_registration():
    calls = []
    mla.register_components(register=lambda *args: calls.append(args))
    assert calls == [("attention", "mla", MultiHeadLatentAttention, MLAConfig)]


def test_equals_transformers_deepseek_v3_attention():
    transformers = pytest.importorskip("transformers")
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf_mla

    for q_lora_rank, interleave in ((None, True), (7, False)):
        config = transformers.DeepseekV3Config(
            hidden_size=E, num_attention_heads=3, num_key_value_heads=3, q_lora_rank=q_lora_rank,
            kv_lora_rank=10, qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5, rope_interleave=interleave,
        )  # fmt: skip
        config._attn_implementation = "sdpa"
        hf = hf_mla.DeepseekV3Attention(config, layer_idx=0).eval()
        module = make(q_lora_rank=q_lora_rank)
        renamed = {"q_a_norm": "q_a_layernorm", "kv_a_norm": "kv_a_layernorm", "kv_a_proj": "kv_a_proj_with_mqa"}
        state = {}
        for name, tensor in module.state_dict().items():
            owner, leaf = name.split(".")
            state[f"{renamed.get(owner, owner)}.{leaf}"] = tensor
        hf.load_state_dict(state)
        x = torch.randn(2, 6, E)
        position_ids = positions_for(6)
        cos, sin = hf_mla.DeepseekV3RotaryEmbedding(config)(x, position_ids)
        with torch.no_grad():
            expected = hf(x, position_embeddings=(cos, sin), attention_mask=None)[0]
            actual = module(x, pos=rope(interleaved=interleave))
        torch.testing.assert_close(actual, expected, atol=1e-6, rtol=1e-5)
