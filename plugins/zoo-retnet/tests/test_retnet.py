"""zoo-retnet: zoo's component contract, the parallel and recurrent forms agree, decoding memory does not grow."""

from __future__ import annotations

import math

import pytest
import torch

zoo_retnet = pytest.importorskip("zoo_retnet", reason="pip install -e plugins/zoo-retnet")

import zoo  # noqa: E402
from zoo.testing import ComponentContract, RecipeContract  # noqa: E402
from zoo_retnet import MultiScaleRetention, retention, retention_decays  # noqa: E402


class TestContract(ComponentContract):
    """zoo's component contract: shapes, backward, causality, padding, cached decoding, compile, cost."""

    plugin = "zoo-retnet"


def ids(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(1, 256, (batch, length), generator=torch.Generator().manual_seed(seed))


def retnet(**overrides) -> torch.nn.Module:
    torch.manual_seed(0)
    return zoo.build("retnet-tiny", **overrides).eval()


def recurrent_reference(q, k, v, gammas):
    """The paper's recurrent form, one token at a time: S_n = gamma S_(n-1) + k_n^T v_n, o_n = q_n S_n."""
    n, h, length, d = q.shape
    state = torch.zeros(n, h, d, v.size(-1), dtype=q.dtype)
    gamma = torch.tensor(gammas, dtype=q.dtype)[:, None, None]
    out = []
    for t in range(length):
        state = gamma * state + k[:, :, t, :, None] * v[:, :, t, None, :]  # (N, H, D, Dv)
        out.append((q[:, :, t, None, :] @ state)[:, :, 0])  # (N, H, Dv)
    return torch.stack(out, dim=2), state


class TestRetention:
    def test_each_head_has_its_own_decay(self):
        assert retention_decays(4) == [1 - 1 / 32, 1 - 1 / 64, 1 - 1 / 128, 1 - 1 / 256]

    def test_parallel_form_equals_the_recurrent_form(self):
        # In float64 the two orders of summation agree to rounding: the algebra is exact.
        g = torch.Generator().manual_seed(0)
        q, k = torch.randn(2, 4, 64, 8, generator=g).double(), torch.randn(2, 4, 64, 8, generator=g).double()
        v = torch.randn(2, 4, 64, 16, generator=g).double()
        gammas = retention_decays(4)
        parallel, _ = retention(q, k, v, torch.tensor([math.log(x) for x in gammas], dtype=torch.float64))
        recurrent, _ = recurrent_reference(q, k, v, gammas)
        torch.testing.assert_close(parallel, recurrent, rtol=0, atol=1e-10)

    def test_chunks_after_a_state_equal_one_parallel_pass(self):
        g = torch.Generator().manual_seed(1)
        q, k = torch.randn(1, 3, 20, 4, generator=g), torch.randn(1, 3, 20, 4, generator=g)
        v = torch.randn(1, 3, 20, 6, generator=g)
        gammas = retention_decays(3)
        log_decay = torch.tensor([math.log(x) for x in gammas])
        state, outs = torch.zeros(1, 3, 4, 6), []
        for lo, hi in [(0, 7), (7, 8), (8, 20)]:
            out, state = retention(q[:, :, lo:hi], k[:, :, lo:hi], v[:, :, lo:hi], log_decay, state)
            outs.append(out)
        whole, _ = retention(q, k, v, log_decay)
        torch.testing.assert_close(torch.cat(outs, dim=2), whole, rtol=0, atol=1e-5)
        torch.testing.assert_close(state, recurrent_reference(q, k, v, gammas)[1], rtol=0, atol=1e-5)


class TestDecoding:
    @torch.no_grad()
    def test_decoding_memory_stays_constant_as_the_sequence_grows(self):
        model = retnet(max_len=512)
        x = ids(1, 512)
        sizes = {}
        for max_len in (16, 512):
            cache = model.new_cache(batch_size=1, max_len=max_len)
            model(x[:, :8], cache=cache)
            for t in range(8, max_len):
                model(x[:, t : t + 1], cache=cache)
            sizes[max_len] = cache.nbytes
        # Two layers of one (N=1, H=4, D=16, Dv=32) float32 state each.
        assert sizes[16] == sizes[512] == 2 * (1 * 4 * 16 * 32 * 4)

    @torch.no_grad()
    def test_padding_masks_keys_right_and_left(self):
        model = retnet()
        x = ids(1, 7)
        right = torch.cat([x, torch.zeros(1, 4, dtype=torch.long)], dim=1)
        mask = torch.tensor([[1] * 7 + [0] * 4]).bool()
        torch.testing.assert_close(model(right, attention_mask=mask).logits[:, :7], model(x).logits, rtol=0, atol=1e-5)
        # Left padding: padded keys add nothing and rope sees the real positions, so the prompt acts unpadded.
        left = torch.cat([torch.zeros(1, 3, dtype=torch.long), x], dim=1)
        mask = torch.tensor([[0] * 3 + [1] * 7]).bool()
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
        out = model(left, attention_mask=mask, positions=positions).logits
        assert torch.isfinite(out).all()
        torch.testing.assert_close(out[:, 3:], model(x).logits, rtol=0, atol=1e-5)


class TestRecipe(RecipeContract):
    """zoo\'s recipe contract (a few optimizer steps train every recipe named here), and the recipes\' own checks."""

    recipes = ("retnet-tiny",)

    def test_an_encoder_cannot_use_retention(self):
        refused = r"attention: attention 'retention' needs a causal \(decoder\) stack; the encoder is not causal"
        with pytest.raises(zoo.RecipeError, match=refused):
            zoo.load_recipe("bert-tiny", attention={"type": "retention", "num_heads": 4})
        with pytest.raises(ValueError, match=r"retention is causal self-attention only \(got causal=False"):
            MultiScaleRetention(32, num_heads=4, causal=False)

    def test_options_are_validated_before_building(self):
        with pytest.raises(
            zoo.RecipeError, match=r"d_model \(64\) must be divisible by num_heads \(3\), or set head_dim"
        ):
            zoo.load_recipe("retnet-tiny", **{"attention.num_heads": 3})
        with pytest.raises(zoo.RecipeError, match=r"attention\.value_factor: Input should be greater than or equal"):
            zoo.load_recipe("retnet-tiny", **{"attention.value_factor": 0})

    @pytest.mark.parametrize("positional", ["alibi", "t5_relative"])
    def test_a_score_bias_is_refused(self, positional):
        # By validation (RetentionConfig.positional_styles), before anything is built ...
        with pytest.raises(zoo.RecipeError, match=rf"attention 'retention' cannot take positional '{positional}'"):
            zoo.load_recipe("retnet-tiny", positional={"type": positional})
        # ... and by the module itself, used without zoo's recipes.
        from zoo.components.positional import ALiBi

        layer = MultiScaleRetention(16, num_heads=2)
        with pytest.raises(ValueError, match=r"retention cannot add a score bias \(alibi, t5_relative\)"):
            layer(torch.randn(1, 4, 16), pos=ALiBi(16, num_heads=2))


@pytest.mark.slow
def test_recipe_trains_with_zoo_train_and_generates_with_zoo_generate(tmp_path):
    from zoo.generate import generate
    from zoo.train import load_run, train

    events = []
    steps = {"train.steps": 6, "train.batch_size": 4, "train.seq_len": 32, "train.lr": 3e-3}
    quiet = {"train.warmup_steps": 0, "train.eval_batches": 1, "train.log_interval": 1}
    result = train("retnet-tiny", out=tmp_path / "run", device="cpu", callback=events.append, **steps, **quiet)
    losses = [e.data["loss"] for e in events if e.kind == "step"]
    assert result.step == 6 and losses[-1] < losses[0], losses
    model = load_run(result.run_dir).model  # rebuilt from the saved recipe: the plugin's component again
    prompts = [[5, 6, 7, 8, 9, 10, 11, 12, 13, 14], [20, 21, 22]]  # ragged: the second row is left-padded
    cached = generate(model, prompts, max_new_tokens=30)
    assert cached.tokens == generate(model, prompts, max_new_tokens=30, use_cache=False).tokens
    assert [len(t) for t in cached.tokens] == [30, 30]
    # Two layers of one (N=2, H=4, D=16, Dv=32) float32 state each, however many tokens were decoded.
    assert cached.stats.cache_bytes == 2 * (2 * 4 * 16 * 32 * 4)


def test_summary_declares_a_fixed_state_per_sequence_and_no_kv_cache():
    from zoo.analysis import summarize

    short, long = (summarize("retnet-tiny", seq_len=n, torchinfo=False).memory for n in (16, 128))
    # Two layers of one (H=4, D=16, Dv=32) state each, in bf16, whatever the length.
    assert short.state_bytes_per_sequence == long.state_bytes_per_sequence == 2 * 4 * 16 * 32 * 2
    assert short.kv_bytes_per_token == 0 and long.kv_bytes_for_batch == 0
