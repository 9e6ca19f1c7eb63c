"""LED beyond the shared parity tests (tests/test_hf.py runs those on tests/hf_cases/led.py): each query sees exactly
the keys of transformers' sliding chunks, the global tokens are transformers' ``global_attention_mask`` (none, the
first, the first two; padding included), each stack reads its own position table, a headless ``LEDModel`` imports,
and what zoo cannot reproduce or transformers cannot run is refused by name."""

from __future__ import annotations

import json

import pytest
import torch
from hf_cases import led

import zoo
from zoo.architectures.blocks import build_mask
from zoo.components.attention import LongformerAttention
from zoo.errors import HFExportError, HFImportError, TrainError
from zoo.hf import from_hf, hf_recipe, to_hf

transformers = pytest.importorskip("transformers")
modeling = pytest.importorskip("transformers.models.led.modeling_led")
transformers.logging.set_verbosity_error()

CONFIG = led.CASES["led-three-windows-scaled-relu-pad0-start3"]["config"]


def reference(tmp_path, **changes) -> tuple[torch.nn.Module, torch.nn.Module]:
    """A random LEDForConditionalGeneration (``CONFIG`` with ``changes``), its weights nudged, and zoo's import."""
    torch.manual_seed(0)
    hf = transformers.LEDForConditionalGeneration(transformers.LEDConfig(**{**CONFIG, **changes})).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(0.02 * torch.randn_like(p))
    hf.save_pretrained(tmp_path)
    return hf, from_hf(tmp_path).eval()


def with_global_tokens(model: torch.nn.Module, tokens: int) -> torch.nn.Module:
    """``model`` rebuilt with ``tokens`` global tokens in every encoder layer, its weights kept."""
    recipe = model.recipe.model_dump(mode="json")
    for override in recipe["layers"]:
        override["attention"]["global_tokens"] = tokens
    rebuilt = zoo.build(recipe).eval()
    rebuilt.load_state_dict(model.state_dict())
    return rebuilt


@pytest.mark.parametrize(("window", "tokens", "length"), [(4, 0, 13), (4, 1, 13), (6, 2, 11), (8, 0, 5), (4, 3, 21)])
def test_each_query_sees_the_keys_of_transformers_sliding_chunks(window, tokens, length):
    """transformers' attention probabilities (band columns and global columns) are above zero exactly where zoo's
    key mask and padding let a query see a key; the outputs agree."""
    torch.manual_seed(0)
    config = transformers.LEDConfig(d_model=32, encoder_attention_heads=4, attention_window=[window], encoder_layers=1)
    hf = modeling.LEDEncoderAttention(config, 0).eval()
    ours = LongformerAttention(32, num_heads=4, window=window, global_tokens=tokens).eval()
    theirs = hf.longformer_self_attn
    pairs = [("query", "q_proj"), ("key", "k_proj"), ("value", "v_proj"), ("output", "o_proj")]
    pairs += [(f"{p}_global", f"{p[0]}_global") for p in ("query", "key", "value")]
    with torch.no_grad():
        for name, zoo_name in pairs:
            a, b = getattr(theirs, name, None) or getattr(hf, name), getattr(ours, zoo_name)
            a.weight.normal_(std=0.05)  # small scores: no probability rounds to zero
            a.bias.normal_(std=0.05)
            b.load_state_dict(a.state_dict())
    x = torch.randn(3, length, 32)
    real = torch.ones(3, length, dtype=torch.long)
    real[1, -3:] = 0
    real[2, :2] = 0
    marks = torch.zeros_like(real)
    marks[:, :tokens] = 1
    pad = (window - length % window) % window  # transformers pads to a multiple of the window
    merged = torch.nn.functional.pad(real * (marks + 1), (0, pad))  # 0 padding, 1 local, 2 global
    scores = modeling._prepare_4d_attention_mask_inverted(merged, x.dtype)[:, 0, 0, :]
    with torch.no_grad():
        out, probs = hf(
            torch.nn.functional.pad(x, (0, 0, 0, pad)),
            attention_mask=scores,
            is_index_masked=scores < 0,
            is_index_global_attn=scores > 0,
            is_global_attn=bool((scores > 0).any()),
            output_attentions=True,
        )[:2]
        mine = ours(x, mask=build_mask(length, real, causal=False))
    seen = ours.key_mask(torch.arange(length), torch.arange(length)) & real.bool()[:, None, :]  # (N, L, L)
    reach, found = window // 2, int((merged == 2).sum(1).max())
    for n in range(3):
        columns = (merged[n] == 2).nonzero().flatten().tolist()  # the global keys, in order
        for i in range(length):
            if not real[n, i] or i < tokens:
                continue  # a padded query sees nothing; a global one sees every key (its own rows)
            theirs_seen = {j for t, j in enumerate(columns) if probs[n, i, 0, t] > 0}
            theirs_seen |= {i + d for d in range(-reach, reach + 1) if probs[n, i, 0, found + reach + d] > 0}
            assert theirs_seen == set(seen[n, i].nonzero().flatten().tolist()), (n, i)
    assert (out[:, :length] - mine)[real.bool()].abs().max() < 1e-5


@pytest.mark.parametrize("tokens", [0, 1, 2])
def test_global_tokens_are_transformers_global_attention_mask(tokens, tmp_path):
    hf, model = reference(tmp_path)
    assert all(b.attention.global_tokens == 1 for b in model.encoder.blocks)  # the import's: the first token
    model = with_global_tokens(model, tokens)
    ids = torch.randint(6, CONFIG["vocab_size"], (3, 13), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, -4:] = 0
    mask[2, :2] = 0  # left padding: the first token is padding, global for neither
    target = torch.randint(6, CONFIG["vocab_size"], (3, 5), generator=torch.Generator().manual_seed(2))
    target[:, 0] = CONFIG["decoder_start_token_id"]
    extra = led.global_attention_mask(model, ids)
    assert ("global_attention_mask" in extra) == bool(tokens)
    with torch.no_grad():
        out = hf(input_ids=ids, attention_mask=mask, decoder_input_ids=target, **extra)
        ours = model(ids, target, attention_mask=mask)
    assert (out.encoder_last_hidden_state - ours.encoder_hidden)[mask.bool()].abs().max() < 1e-4
    assert (out.logits - ours.logits).abs().max() < 1e-4


def test_each_stack_reads_its_own_position_table(tmp_path):
    _, model = reference(tmp_path)
    assert model.encoder.positional.embedding.weight.shape[0] == CONFIG["max_encoder_position_embeddings"]
    assert model.decoder.positional.embedding.weight.shape[0] == CONFIG["max_decoder_position_embeddings"]
    assert (model.recipe.max_len, model.recipe.decoder_max_len) == (40, 24)


def test_decoding_past_the_decoders_table_is_refused():
    generate = pytest.importorskip("zoo.generate").generate
    model = zoo.build("led-tiny").eval()
    with pytest.raises(TrainError, match=r"max_new_tokens needs 65 positions, beyond the learned position table "):
        generate(model, torch.ones(1, 5, dtype=torch.long), max_new_tokens=64)


def test_a_headless_led_model_imports(tmp_path):
    torch.manual_seed(0)
    hf = transformers.LEDModel(transformers.LEDConfig(**CONFIG)).eval()
    hf.save_pretrained(tmp_path)
    model = from_hf(tmp_path).eval()
    ids = torch.randint(6, CONFIG["vocab_size"], (2, 10), generator=torch.Generator().manual_seed(1))
    target = ids[:, :4]
    with torch.no_grad():
        expected = hf(
            input_ids=ids, decoder_input_ids=target, global_attention_mask=(ids * 0).index_fill(1, torch.tensor([0]), 1)
        )
        ours = model(ids, target)
    assert (expected.last_hidden_state - ours.hidden_states).abs().max() < 1e-4


def recipe_of(tmp_path, **config) -> dict:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "led", **config}))
    return hf_recipe(tmp_path)


@pytest.mark.parametrize(
    ("windows", "message"),
    [
        ([3, 4], r"attention_window=\[3, 4\] is not supported: each window is an even number >= 4"),
        (2, r"attention_window=2 is not supported: each window is an even number >= 4 \(transformers' sliding"),
        ([4, 6], r"attention_window=\[4, 6\] is not supported: each window must divide the largest \(6\)"),
        ([4, 4, 4], r"attention_window=\[4, 4, 4\] is not supported: it names 3 windows for encoder_layers=2"),
    ],
)
def test_windows_transformers_cannot_run_are_refused_by_name(windows, message, tmp_path):
    with pytest.raises(HFImportError, match=message):
        recipe_of(tmp_path, encoder_layers=2, attention_window=windows)


def test_an_int_window_is_every_layers(tmp_path):
    recipe = zoo.load_recipe(recipe_of(tmp_path, encoder_layers=3, attention_window=16))
    assert [(o.select, o.stack, o.attention.window) for o in recipe.layers] == [(":", "encoder", 16)]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"layers": [{"select": 0, "stack": "decoder", "attention": {"type": "mha", "num_heads": 2}}]},
            "layers.0: only the encoder's attention may differ per layer",
        ),
        ({"layers": []}, "encoder layer 0 has attention 'mha'; LED's encoder attends as longformer"),
        (
            {
                "layers": [
                    {
                        "select": ":",
                        "stack": "encoder",
                        "attention": {"type": "longformer", "num_heads": 4, "window": 6},
                    }
                ]
            },
            None,
        ),
        (
            {
                "layers": [
                    {"select": i, "stack": "encoder", "attention": {"type": "longformer", "num_heads": 4, "window": w}}
                    for i, w in enumerate((6, 8))
                ]
            },
            r"the encoder's windows \[6, 8\]: each window must divide the largest \(8\)",
        ),
        ({"embedding.scale": True}, "embedding.scale is True, needs False"),
    ],
)
def test_what_leds_config_cannot_say_is_refused_on_export(overrides, message, tmp_path):
    model = zoo.build("led-tiny", **overrides)
    if message is None:
        to_hf(model, tmp_path)  # one window of 6 in every layer: transformers runs it
        assert json.loads((tmp_path / "config.json").read_text())["attention_window"] == [6, 6]
        return
    with pytest.raises(HFExportError, match=message):
        to_hf(model, tmp_path)


def test_a_decoder_table_of_its_own_size_is_refused_where_the_config_has_one_size(tmp_path):
    model = zoo.build("bart-tiny", decoder_max_len=32)
    with pytest.raises(HFExportError, match=r"decoder_max_len is 32; this family's config gives both stacks max_len"):
        to_hf(model, tmp_path)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"decoder_attention_heads": 8, "encoder_attention_heads": 4, "d_model": 32},
            r"decoder_attention_heads=8 is not supported: LED imports decoder blocks like the encoder's",
        ),
        ({"tie_word_embeddings": False}, r"tie_word_embeddings=False is not supported: zoo's encoder-decoder has one"),
        ({"activation_function": "tanh"}, r"activation_function='tanh' is not supported"),
    ],
)
def test_options_zoo_cannot_reproduce_are_refused_by_name(config, message, tmp_path):
    with pytest.raises(HFImportError, match=message):
        recipe_of(tmp_path, encoder_layers=2, attention_window=4, **config)
