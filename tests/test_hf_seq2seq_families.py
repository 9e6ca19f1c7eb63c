"""Family facts of the encoder-decoder and vision families (mT5, UMT5, BART, M2M-100, DeiT) that the shared
parity tests of tests/test_hf.py do not single out, and a few training steps of each family's tiny recipe."""

from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import load_file
from test_hf import CASES, greedy_hf, greedy_zoo, padded_ids, reference_model

import zoo
from zoo.hf import from_hf, to_hf

transformers = pytest.importorskip("transformers")


def seq2seq_logits(hf, model, vocab_size: int, start: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(HF logits, zoo logits) on a right-padded source and a target that starts with ``start``."""
    ids, mask = padded_ids(vocab_size)
    mask[2] = 1
    mask[2, -6:] = 0
    target = torch.randint(1, vocab_size, (3, 7), generator=torch.Generator().manual_seed(2))
    target[:, 0] = start
    with torch.no_grad():
        expected = hf(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits
        actual = model(ids, target, attention_mask=mask).logits
    return expected, actual


# ---------------------------------------------------------------------------------------------- mT5


def test_mt5_read_as_t5_is_off_by_the_rescaling_and_as_mt5_is_exact(tmp_path):
    """Transformers 5 writes tie_word_embeddings: true into every mT5 config: read as T5 (aliasing mt5 to t5) the
    head multiplies by d_model**-0.5, which mT5 never does; the mt5 family reads it as it is."""
    hf = reference_model(CASES["mt5-gated-gelu"])
    hf.save_pretrained(tmp_path / "mt5")
    config = json.loads((tmp_path / "mt5" / "config.json").read_text())
    assert config["tie_word_embeddings"] is True
    expected, actual = seq2seq_logits(hf, from_hf(tmp_path / "mt5").eval(), 96, 0)
    assert (expected - actual).abs().max() < 1e-4

    aliased = tmp_path / "as-t5"
    hf.save_pretrained(aliased)
    config.update(model_type="t5", architectures=["T5ForConditionalGeneration"])
    (aliased / "config.json").write_text(json.dumps(config))
    as_t5 = from_hf(aliased).eval()
    assert as_t5.recipe.head.rescale  # what T5's translation makes of the config
    _, wrong = seq2seq_logits(hf, as_t5, 96, 0)
    assert (expected - wrong).abs().max() > 1.0
    assert torch.allclose(wrong * math.sqrt(32), expected, atol=1e-4)  # exactly the d_model**-0.5 factor


def test_mt5_with_its_own_lm_head_imports_untied_and_exports_back(tmp_path):
    """The published mT5 checkpoints hold lm_head.weight beside shared.weight (transformers 5 unties them on
    loading): zoo imports the head untied, and its export loads untied again."""
    hf = reference_model(CASES["mt5-gated-gelu"])
    with torch.no_grad():
        hf.lm_head.weight = torch.nn.Parameter(hf.shared.weight.detach().clone() + 0.1 * torch.randn(96, 32))
    hf.all_tied_weights_keys.pop("lm_head.weight", None)
    hf.save_pretrained(tmp_path / "hf")
    model = from_hf(tmp_path / "hf").eval()
    assert not model.recipe.head.tie_embeddings and not model.recipe.head.rescale
    assert zoo.count_parameters(model) == sum(p.numel() for p in hf.parameters())
    expected, actual = seq2seq_logits(hf, model, 96, 0)
    assert (expected - actual).abs().max() < 1e-4
    prompts = torch.randint(1, 96, (2, 6), generator=torch.Generator().manual_seed(3))
    assert torch.equal(greedy_zoo(model, prompts), greedy_hf(hf, prompts))

    to_hf(model, tmp_path / "out")
    back = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "out").eval()
    assert type(back).__name__ == "MT5ForConditionalGeneration"
    assert back.lm_head.weight is not back.shared.weight
    again, _ = seq2seq_logits(back, model, 96, 0)
    assert torch.equal(again, expected)


# ---------------------------------------------------------------------------------------------- UMT5


def test_umt5_has_a_bias_table_in_every_self_attention_and_none_in_cross_attention(tmp_path):
    hf = reference_model(CASES["umt5-unscaled-relu-pad2"])
    hf.save_pretrained(tmp_path)
    model = from_hf(tmp_path)
    for stack in (model.encoder, model.decoder):
        tables = [block.attention.position_bias.relative_attention_bias.weight for block in stack.blocks]
        assert len({t.data_ptr() for t in tables}) == len(stack.blocks)
    assert all(block.cross_attention.position_bias is None for block in model.decoder.blocks)
    hf_table = hf.decoder.block[1].layer[0].SelfAttention.relative_attention_bias.weight
    assert torch.equal(model.decoder.blocks[1].attention.position_bias.relative_attention_bias.weight, hf_table)


# ---------------------------------------------------------------------------------------------- BART


def test_bart_final_logits_bias_is_added_and_round_trips_bit_for_bit(tmp_path):
    """final_logits_bias is a buffer of zeros in the published checkpoints; one that is not zero is added to every
    logit, kept as zoo's head.logits_bias (no parameter), and written back as it was."""
    hf = reference_model(CASES["bart-base-style"])
    with torch.no_grad():
        hf.final_logits_bias.copy_(torch.randn(1, 96, generator=torch.Generator().manual_seed(7)))
    hf.save_pretrained(tmp_path / "hf")
    model = from_hf(tmp_path / "hf").eval()
    assert torch.equal(model.head.logits_bias, hf.final_logits_bias[0])
    assert "head.logits_bias" not in dict(model.named_parameters())
    assert zoo.count_parameters(model) == sum(p.numel() for p in hf.parameters())
    expected, actual = seq2seq_logits(hf, model, 96, 2)
    assert (expected - actual).abs().max() < 1e-4

    to_hf(model, tmp_path / "out")
    exported = load_file(tmp_path / "out" / "model.safetensors")
    assert torch.equal(exported["final_logits_bias"], hf.final_logits_bias)
    back = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "out").eval()
    again, _ = seq2seq_logits(back, model, 96, 2)
    assert torch.equal(again, expected)


def test_bart_model_checkpoint_imports_with_a_tied_head_and_no_bias(tmp_path):
    """bart-base is published as BartModel (no lm_head, no final_logits_bias): zoo imports it with the tied head
    transformers gives BartForConditionalGeneration.from_pretrained, and exports that class."""
    generation = reference_model(CASES["bart-base-style"])
    generation.model.save_pretrained(tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["BartModel"]
    model = from_hf(tmp_path / "hf").eval()
    assert not model.recipe.head.logits_bias and model.head.logits_bias is None
    hf = transformers.BartForConditionalGeneration.from_pretrained(tmp_path / "hf").eval()
    expected, actual = seq2seq_logits(hf, model, 96, 2)
    assert (expected - actual).abs().max() < 1e-4
    to_hf(model, tmp_path / "out")
    assert json.loads((tmp_path / "out" / "config.json").read_text())["architectures"] == [
        "BartForConditionalGeneration"
    ]
    assert torch.equal(from_hf(tmp_path / "out").embedding.token.weight, model.embedding.token.weight)


def test_untied_bart_and_unlike_stacks_are_refused_by_name(tmp_path):
    from zoo.errors import HFImportError

    config = {**CASES["bart-base-style"].config, "model_type": "bart"}
    for key, value in (("tie_word_embeddings", False), ("decoder_ffn_dim", 48), ("decoder_attention_heads", 2)):
        folder = tmp_path / key
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({**config, key: value}))
        with pytest.raises(HFImportError, match=key):
            zoo.hf.hf_recipe(folder)


# ---------------------------------------------------------------------------------------------- M2M-100


def test_m2m100_numbers_positions_past_padding_tokens_wherever_they_are(tmp_path):
    """Positions come from the ids, not the attention mask: every pad id (left, right or in the middle of a row)
    reads the zero row and the real tokens after it are numbered as if it were not there; decoding with a cache
    numbers each new token after every earlier one, padding included, as transformers does."""
    hf = reference_model(CASES["m2m100-unscaled-gelu-pad3-start5"])
    hf.save_pretrained(tmp_path)
    model = from_hf(tmp_path).eval()
    pad = 3
    ids = torch.tensor([[7, 8, pad, 9, 10, 11], [pad, pad, 12, 13, 14, 15], [16, 17, 18, 19, pad, pad]])
    positions = model.encoder.positional.positions_from_ids(ids)
    assert positions.tolist() == [[0, 1, -1, 2, 3, 4], [-1, -1, 0, 1, 2, 3], [0, 1, 2, 3, -1, -1]]
    hf_positions = hf.model.encoder.embed_positions.create_position_ids_from_input_ids(ids, pad)
    assert torch.equal(positions + model.encoder.positional.offset, hf_positions)
    assert not model.encoder.positional.table[model.encoder.positional.offset - 1].any()

    target = torch.tensor([[5, 20, pad, 21], [5, pad, 22, 23], [5, 24, 25, 26]])
    with torch.no_grad():
        expected = hf(input_ids=ids, decoder_input_ids=target).logits
        out = model(ids, target)
    assert (expected - out.logits).abs().max() < 1e-4

    with torch.no_grad():  # one token at a time through the cache: the same logits as the whole target
        cache = model.new_cache(3, 8)
        steps = [
            model(decoder_input_ids=target[:, t : t + 1], encoder_hidden=out.encoder_hidden, cache=cache)
            for t in range(4)
        ]
        hf_steps, past = [], None
        for t in range(4):
            step = hf(input_ids=ids, decoder_input_ids=target[:, t : t + 1], past_key_values=past, use_cache=True)
            hf_steps.append(step.logits)
            past = step.past_key_values
    for mine, theirs in zip(steps, hf_steps, strict=True):
        assert (mine.logits - theirs).abs().max() < 1e-4


# ---------------------------------------------------------------------------------------------- DeiT


def test_deit_averages_the_cls_and_distillation_classifiers(tmp_path):
    hf = reference_model(CASES["deit-distilled-rgb"])
    hf.save_pretrained(tmp_path)
    model = from_hf(tmp_path).eval()
    assert model.positional.embedding.weight.shape[0] == (16 // 4) ** 2 + 2  # patches, [CLS], distillation
    images = torch.randn(3, 3, 16, 16, generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        out = hf(pixel_values=images)
        h = model.run(model.embedding(images), positions=torch.arange(18)[None])
        cls_logits, distill_logits = model.head.proj(h[:, 0]), model.head.distill_proj(h[:, 1])
        logits = model(images).logits
    assert (out.cls_logits - cls_logits).abs().max() < 1e-4
    assert (out.distillation_logits - distill_logits).abs().max() < 1e-4
    assert torch.equal(logits, (cls_logits + distill_logits) / 2)
    assert not torch.allclose(cls_logits, distill_logits)  # two heads, not one counted twice


# ---------------------------------------------------------------------------------------------- training

TINY = {
    "mt5-tiny": "mt5",
    "umt5-tiny": "umt5",
    "bart-tiny": "bart",
    "m2m100-tiny": "m2m_100",
    "deit-tiny": "deit",
    "marian-tiny": "marian",
    "pegasus-tiny": "pegasus",
    "mbart-tiny": "mbart",
    "blenderbot-tiny": "blenderbot",
}


@pytest.mark.parametrize("name", sorted(TINY))
def test_tiny_variant_trains_a_few_steps(tmp_path, name):
    """A few steps of ``zoo train`` on each family's tiny recipe (reversal for the encoder-decoders, the digits for
    DeiT): finite losses and the objective's metric, and the recipe exports as its family."""
    from zoo.train import read_metrics, train

    settings = {
        "train.steps": 6,
        "train.checkpoint_interval": 6,
        "train.batch_size": 8,
        "train.warmup_steps": 2,
        "train.eval_interval": 0,
        "train.eval_batches": 1,
        "train.log_interval": 1,
    }
    if name != "deit-tiny":
        settings["train.seq_len"] = 6
    result = train(name, out=tmp_path / "run", **settings)
    losses = [r["loss"] for r in read_metrics(tmp_path / "run") if r["split"] == "train"]
    assert len(losses) == 6 and all(math.isfinite(x) for x in losses)
    assert ("accuracy" if name == "deit-tiny" else "exact_match") in result.eval
    assert zoo.hf.family_of(zoo.load_recipe(name)).model_type == TINY[name]

    # zoo export -> the matching Auto class gives the same outputs; zoo import gives back the same weights
    zoo.hf.export_checkpoint(tmp_path / "run", tmp_path / "hf")
    model = zoo.load(tmp_path / "run").eval()
    with torch.no_grad():
        if name == "deit-tiny":
            hf = transformers.AutoModelForImageClassification.from_pretrained(tmp_path / "hf").eval()
            images = torch.randn(2, 1, 8, 8, generator=torch.Generator().manual_seed(9))
            expected, actual = hf(pixel_values=images).logits, model(images).logits
        else:
            hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "hf").eval()
            ids = torch.randint(3, 256, (2, 7), generator=torch.Generator().manual_seed(9))
            target = torch.cat([torch.full((2, 1), model.decoder_start_token_id), ids[:, :4]], dim=1)
            expected = hf(input_ids=ids, decoder_input_ids=target).logits
            actual = model(ids, target).logits
    assert type(hf).__name__ == zoo.hf.family_of(model.recipe).hf_class(model.recipe)
    assert (expected - actual).abs().max() < 1e-4
    zoo.hf.import_checkpoint(tmp_path / "hf", tmp_path / "back")
    back = zoo.load(tmp_path / "back")
    for (key, a), b in zip(model.state_dict().items(), back.state_dict().values(), strict=True):
        assert torch.equal(a, b), key


def test_umt5_with_its_own_lm_head_stays_untied_through_transformers_and_back(tmp_path):
    """Transformers 5 saves every UMT5 config with tie_word_embeddings: true; a checkpoint with its own lm_head is
    untied all the same (as transformers loads it), after any number of round trips."""
    hf = reference_model(CASES["umt5-unscaled-relu-pad2"])
    with torch.no_grad():
        hf.lm_head.weight = torch.nn.Parameter(hf.shared.weight.detach().clone() + 0.1 * torch.randn(80, 48))
    hf.all_tied_weights_keys.pop("lm_head.weight", None)
    hf.save_pretrained(tmp_path / "hf")
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["tie_word_embeddings"] is True
    model = from_hf(tmp_path / "hf").eval()
    assert not model.recipe.head.tie_embeddings and not model.recipe.head.rescale
    expected, actual = seq2seq_logits(hf, model, 80, 2)
    assert (expected - actual).abs().max() < 1e-4
    to_hf(model, tmp_path / "out")
    again = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "out").eval()
    again.save_pretrained(tmp_path / "again")
    back = from_hf(tmp_path / "again")
    assert not back.recipe.head.tie_embeddings
    assert torch.equal(back.head.proj.weight, model.head.proj.weight)


def test_export_keeps_the_models_pad_id_where_positions_depend_on_it(tmp_path):
    """A run whose model pads with 1 (M2M-100 numbers positions past its pad id) but whose tokenizer pads with 0:
    config.json keeps 1, or transformers would number the positions differently."""
    from zoo.train import train

    pad1 = {
        "pad_token_id": 1,
        "embedding.padding_idx": 1,
        "positional.padding_idx": 1,
        "positional.offset": 2,
        "train.steps": 2,
        "train.batch_size": 4,
        "train.seq_len": 6,
        "train.eval_interval": 0,
        "train.checkpoint_interval": 2,
    }
    train("m2m100-tiny", out=tmp_path / "run", **pad1)
    conversion = zoo.hf.export_checkpoint(tmp_path / "run", tmp_path / "hf")
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["pad_token_id"] == 1
    assert any("keeps the model's pad_token_id 1" in note for note in conversion.notes)
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "hf").eval()
    model = zoo.load(tmp_path / "run").eval()
    ids = torch.tensor([[5, 9, 1, 1], [7, 8, 9, 10]])  # a right-padded row
    target = torch.tensor([[2, 5, 6], [2, 7, 7]])
    with torch.no_grad():
        expected = hf(input_ids=ids, attention_mask=(ids != 1).long(), decoder_input_ids=target).logits
        actual = model(ids, target, attention_mask=ids != 1).logits
    assert (expected - actual).abs().max() < 1e-4
