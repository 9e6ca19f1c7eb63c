"""LongT5 beyond the parity cases (tests/hf_cases/longt5.py): the local and transient-global encoders equal
transformers' over lengths that are no multiple of the block, padding on either side or inside, blocks longer than
the input; each query sees exactly the keys within its radius; the global blocks are transformers'; what zoo cannot
reproduce is refused by name; the tiny recipe exports and trains."""

from __future__ import annotations

import json
import math

import pytest
import torch

import zoo
from zoo.components.attention import LocalAttention, global_blocks
from zoo.errors import HFExportError, HFImportError
from zoo.hf import from_hf, hf_recipe, to_hf
from zoo.testing import RecipeContract

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()
longt5 = pytest.importorskip("transformers.models.longt5.modeling_longt5")

TOLERANCE = 1e-4


def reference(tmp_path, **config) -> tuple[torch.nn.Module, torch.nn.Module]:
    """A random LongT5 (every weight nudged off its init) and zoo's import of it."""
    torch.manual_seed(0)
    base = dict(vocab_size=64, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_heads=4, feed_forward_proj="gated-gelu")
    hf = transformers.LongT5ForConditionalGeneration(transformers.LongT5Config(**{**base, **config})).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(0.02 * torch.randn_like(p))
    hf.save_pretrained(tmp_path)
    return hf, from_hf(tmp_path).eval()


def masks(length: int) -> torch.Tensor:
    """Four rows: full, right-padded, left-padded, and a hole in the middle (one real token at least)."""
    mask = torch.ones(4, length, dtype=torch.long)
    mask[1, max(1, length - 5) :] = 0
    mask[2, : min(length - 1, 4)] = 0
    mask[3, length // 3 : length // 3 + 2] = 0
    mask[3, 0] = 1
    return mask


@pytest.mark.parametrize(
    "config",
    [
        dict(encoder_attention_type="local", local_radius=3),
        dict(encoder_attention_type="local", local_radius=0),
        dict(encoder_attention_type="transient-global", local_radius=2, global_block_size=3),
        dict(encoder_attention_type="transient-global", local_radius=5, global_block_size=7, tie_word_embeddings=False),
        dict(encoder_attention_type="transient-global", local_radius=12, global_block_size=1),
    ],
    ids=lambda c: "-".join(f"{v}" for v in c.values()),
)
def test_encoder_and_logits_match_transformers_at_every_length_and_padding(config, tmp_path):
    hf, model = reference(tmp_path, **config)
    worst = 0.0
    for length in (1, 2, 5, 11, 16, 23, 37):
        ids = torch.randint(1, 64, (4, length), generator=torch.Generator().manual_seed(length))
        mask = masks(length) if length > 1 else torch.ones(4, 1, dtype=torch.long)
        target = torch.randint(1, 64, (4, 6), generator=torch.Generator().manual_seed(7))
        with torch.no_grad():
            out = hf(input_ids=ids, attention_mask=mask, decoder_input_ids=target)
            ours = model(ids, target, attention_mask=mask)
        encoder = (out.encoder_last_hidden_state - ours.encoder_hidden)[mask.bool()].abs().max().item()
        worst = max(worst, encoder, (out.logits - ours.logits).abs().max().item())
    assert worst < TOLERANCE


@pytest.mark.parametrize("radius", [0, 1, 2, 4])
@pytest.mark.parametrize("length", [1, 5, 9])
def test_a_query_sees_the_real_keys_within_its_radius_and_no_other(radius, length):
    torch.manual_seed(0)
    attention = LocalAttention(8, num_heads=2, local_radius=radius).eval()
    real = torch.ones(1, length, dtype=torch.bool)
    real[0, length // 2] = length < 3  # a padding key in the middle (none in the shortest)
    x = torch.randn(1, length, 8)
    base = attention(x, mask=real[:, None, None, :])
    for j in range(length):
        moved = x.clone()
        moved[0, j] += 1.0
        changed = (attention(moved, mask=real[:, None, None, :]) - base).abs().amax(-1)[0] > 0  # (L,)
        for i in range(length):
            if i == j or not real[0, i]:
                continue  # a query always sees itself; a padding query's output is never read
            assert bool(changed[i]) == (abs(i - j) <= radius and bool(real[0, j])), (i, j)


@pytest.mark.parametrize("block", [1, 2, 3, 5, 7, 16])
def test_global_blocks_are_transformers(block):
    g = torch.Generator().manual_seed(block)
    for length in (1, 4, 16, 33, 50):
        mask = (torch.rand(6, length, generator=g) > 0.3).long()
        mask[0] = 1
        mask[1, : length // 2] = 0  # left padding
        ids, exists = global_blocks(mask.bool(), block)
        want_ids, want_exists = longt5._make_global_fixed_block_ids(mask, block)
        assert torch.equal(ids, want_ids.long()) and torch.equal(exists, want_exists.bool())


@pytest.mark.parametrize(
    "config,refused",
    [
        ({"encoder_attention_type": "global"}, "encoder_attention_type='global'"),
        ({"architectures": ["LongT5Model"]}, "LongT5Model"),
        ({"architectures": ["LongT5EncoderModel"]}, "LongT5EncoderModel"),
        ({"feed_forward_proj": "gated-mish"}, "feed_forward_proj='gated-mish'"),
    ],
)
def test_what_zoo_cannot_reproduce_is_refused_by_name(config, refused, tmp_path):
    full = {"model_type": "longt5", "architectures": ["LongT5ForConditionalGeneration"], **config}
    (tmp_path / "config.json").write_text(json.dumps(full))
    with pytest.raises(HFImportError, match=refused):
        hf_recipe(tmp_path)


@pytest.mark.filterwarnings("ignore::zoo.errors.RecipeWarning")  # the attention's type changes: options dropped
@pytest.mark.parametrize(
    "overrides,refused",
    [
        ({"positional": {"type": "t5_relative"}}, "positional.type is 't5_relative', needs 't5_global_relative'"),
        ({"attention.global_norm_eps": 1e-5}, r"attention.global_norm_eps is 1e-05, needs norm.eps \(1e-06\)"),
        ({"attention": {"type": "mha", "num_heads": 4, "bias": False, "scale": 1.0}}, "needs 'local' or"),
    ],
)
def test_a_recipe_longt5_cannot_say_is_refused_on_export(overrides, refused, tmp_path):
    recipe = zoo.load_recipe("longt5-tiny", **overrides)
    with pytest.raises(HFExportError, match=refused):
        to_hf(zoo.build(recipe), tmp_path)


@pytest.mark.filterwarnings("ignore::zoo.errors.RecipeWarning")  # transient_global -> local drops global_block_size
def test_local_attention_exports_with_t5_relative(tmp_path):
    overrides = {
        "attention": {"type": "local", "num_heads": 4, "scale": 1.0, "local_radius": 2},
        "positional": {"type": "t5_relative"},
    }
    model = zoo.build(zoo.load_recipe("longt5-tiny", **overrides)).eval()
    to_hf(model, tmp_path)
    hf = transformers.LongT5ForConditionalGeneration.from_pretrained(tmp_path).eval()
    assert hf.config.encoder_attention_type == "local" and hf.config.local_radius == 2
    ids, mask = torch.randint(1, 256, (2, 9)), torch.tensor([[1] * 9, [1] * 6 + [0] * 3])
    target = torch.randint(1, 256, (2, 4))
    with torch.no_grad():
        difference = (
            hf(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits
            - model(ids, target, attention_mask=mask).logits
        )
    assert difference.abs().max().item() < TOLERANCE


def test_longt5_tiny_trains_and_exports_as_longt5(tmp_path):
    from zoo.train import read_metrics, train

    fast = {"train.steps": 4, "train.batch_size": 8, "train.seq_len": 9, "train.warmup_steps": 1}
    fast |= {"train.eval_interval": 0, "train.eval_batches": 1, "train.log_interval": 1, "train.checkpoint_interval": 4}
    result = train("longt5-tiny", out=tmp_path / "run", **fast)
    losses = [r["loss"] for r in read_metrics(tmp_path / "run") if r["split"] == "train"]
    assert len(losses) == 4 and all(math.isfinite(x) for x in losses) and "exact_match" in result.eval
    zoo.hf.export_checkpoint(tmp_path / "run", tmp_path / "hf")
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["model_type"] == "longt5"


class TestLongT5TinyLearns(RecipeContract):
    """Every parameter (both bias tables and the global tokens' norms too) gets a finite gradient each step, and the
    loss comes down."""

    recipes = ("longt5-tiny",)


def test_a_decoder_only_model_refuses_an_encoders_pattern():
    from zoo.errors import RecipeError
    from zoo.recipe import load_recipe

    attention = {"type": "transient_global", "num_heads": 4, "local_radius": 3, "global_block_size": 2}
    with pytest.raises(RecipeError, match=r"attention 'transient_global' is a pattern of an encoder's self-attention"):
        load_recipe("llama-tiny", attention=attention, positional="none")
