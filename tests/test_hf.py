"""Parity with Hugging Face transformers: randomly initialised reference models of every supported family,
built locally from small configs (no downloads), saved with ``save_pretrained``, imported with zoo.

For each family, two or more configs that differ in shape: the same parameter count; outputs within 1e-4
(fp32) on random inputs, padded batches included; the same greedy 20-token continuations for the decoders
and T5; the same experts per token for Mixtral; and zoo -> HF -> zoo gives back the checkpoint bit for bit.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hf_cases
import pytest
import torch
from safetensors.torch import load_file

import zoo
from zoo.hf import from_hf, to_hf

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

TOLERANCE = 1e-4
NEW_TOKENS = 20


@dataclass(frozen=True)
class Case:
    family: str
    hf_class: str
    config: dict[str, Any]


CASES = {
    "gpt2-tied": Case("gpt2", "GPT2LMHeadModel", dict(vocab_size=96, n_positions=64, n_embd=32, n_layer=2, n_head=4)),
    "gpt2-untied-gelu": Case(
        "gpt2",
        "GPT2LMHeadModel",
        dict(
            vocab_size=80,
            n_positions=48,
            n_embd=48,
            n_layer=3,
            n_head=6,
            n_inner=80,
            activation_function="gelu",
            layer_norm_epsilon=1e-6,
            tie_word_embeddings=False,
        ),
    ),
    "bert-model": Case(
        "bert",
        "BertModel",
        dict(
            vocab_size=96,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
        ),
    ),
    "bert-mlm": Case(
        "bert",
        "BertForMaskedLM",
        dict(
            vocab_size=80,
            hidden_size=48,
            num_hidden_layers=3,
            num_attention_heads=3,
            intermediate_size=80,
            max_position_embeddings=40,
            type_vocab_size=3,
            layer_norm_eps=1e-7,
        ),
    ),
    "bert-classifier": Case(
        "bert",
        "BertForSequenceClassification",
        dict(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=48,
            max_position_embeddings=32,
            hidden_act="relu",
            num_labels=3,
        ),
    ),
    "vit-rgb": Case(
        "vit",
        "ViTForImageClassification",
        dict(
            image_size=16,
            patch_size=4,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            num_labels=5,
        ),
    ),
    "vit-gray": Case(
        "vit",
        "ViTForImageClassification",
        dict(
            image_size=12,
            patch_size=3,
            num_channels=1,
            hidden_size=48,
            num_hidden_layers=3,
            num_attention_heads=6,
            intermediate_size=96,
            hidden_act="gelu_new",
            layer_norm_eps=1e-6,
            num_labels=3,
        ),
    ),
    "t5-relu-tied": Case(
        "t5",
        "T5ForConditionalGeneration",
        dict(vocab_size=96, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4),
    ),
    "t5-gated-silu": Case(
        "t5",
        "T5ForConditionalGeneration",
        dict(
            vocab_size=80,
            d_model=48,
            d_kv=16,
            d_ff=72,
            num_layers=3,
            num_decoder_layers=2,
            num_heads=2,
            relative_attention_num_buckets=16,
            relative_attention_max_distance=32,
            feed_forward_proj="gated-silu",
            tie_word_embeddings=False,  # T5 v1.1 style: no rescaling of the decoder output
        ),
    ),
    "t5-v1.1-gated-gelu": Case(
        "t5",
        "T5ForConditionalGeneration",
        dict(
            vocab_size=64,
            d_model=32,
            d_kv=8,
            d_ff=48,
            num_layers=2,
            num_heads=4,
            feed_forward_proj="gated-gelu",
            tie_word_embeddings=False,
        ),
    ),
    "llama-gqa": Case(
        "llama",
        "LlamaForCausalLM",
        dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
        ),
    ),
    "llama-mqa-biased-tied": Case(
        "llama",
        "LlamaForCausalLM",
        dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=1,
            head_dim=16,
            attention_bias=True,
            mlp_bias=True,
            tie_word_embeddings=True,
            rms_norm_eps=1e-5,
            rope_theta=500000.0,
            max_position_embeddings=64,
        ),
    ),
    "llama-3-rope-scaled": Case(
        "llama",
        "LlamaForCausalLM",
        dict(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=128,
            rope_scaling={
                "rope_type": "llama3",
                "rope_theta": 10000.0,
                "factor": 4.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
            },
        ),
    ),
    "mixtral-4x2": Case(
        "mixtral",
        "MixtralForCausalLM",
        dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            num_local_experts=4,
            num_experts_per_tok=2,
            max_position_embeddings=128,
        ),
    ),
    "mixtral-6x3": Case(
        "mixtral",
        "MixtralForCausalLM",
        dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=32,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=3,
            num_local_experts=6,
            num_experts_per_tok=3,
            tie_word_embeddings=True,
            rope_theta=10000.0,
            max_position_embeddings=64,
        ),
    ),
}

CONFIGS = {
    "gpt2": "GPT2Config",
    "bert": "BertConfig",
    "vit": "ViTConfig",
    "t5": "T5Config",
    "llama": "LlamaConfig",
    "mixtral": "MixtralConfig",
}
KINDS = {
    "gpt2": "decoder",
    "bert": "encoder",
    "vit": "vision",
    "t5": "seq2seq",
    "llama": "decoder",
    "mixtral": "decoder",
}
"""How each family is compared: ``decoder`` as a causal LM (padded logits at their real positions, greedy
generation), ``encoder`` on right-padded rows (last hidden state and the head's output), ``seq2seq`` on a padded
source (encoder output, logits, greedy generation), ``vision`` on random images, ``speech`` on random log-mel
frames (encoder output, logits)."""

# The families added one file each: tests/hf_cases/<family>.py holds its cases (see tests/hf_cases/__init__.py).
for _cases in hf_cases.modules():
    CASES.update({name: Case(**case) for name, case in _cases.CASES.items()})
    CONFIGS.update(_cases.CONFIGS)
    KINDS.update(dict.fromkeys(_cases.CONFIGS, getattr(_cases, "KIND", "decoder")))
HF_INPUTS: dict[str, Any] = {}
"""``{model_type: inputs(zoo model, source ids) -> dict}``: what a family's transformers model takes beside the ids
to compute what zoo's recipe fixes (LED's ``global_attention_mask``: tests/hf_cases/led.py)."""
for _cases in hf_cases.modules():
    HF_INPUTS.update(getattr(_cases, "HF_INPUTS", {}))
DECODER_FAMILIES = {family for family, kind in KINDS.items() if kind == "decoder"}
DECODERS = [name for name, case in CASES.items() if case.family in DECODER_FAMILIES]
GENERATORS = DECODERS + [name for name, case in CASES.items() if KINDS[case.family] == "seq2seq"]


@dataclass
class Reference:
    case: Case
    hf: torch.nn.Module
    model: torch.nn.Module
    folder: Path


def reference_model(case: Case) -> torch.nn.Module:
    """A randomly initialised HF model; every trained parameter (norm scales and biases too) nudged off its init.
    Frozen ones stay (Marian's sinusoid tables, which transformers computes again on loading)."""
    torch.manual_seed(0)
    config = getattr(transformers, CONFIGS[case.family])(**case.config)
    hf = getattr(transformers, case.hf_class)(config).eval()
    with torch.no_grad():
        for p in hf.parameters():
            if p.requires_grad:
                p.add_(0.02 * torch.randn_like(p))
    return hf


def saved_and_imported(name: str, folder: Path) -> Reference:
    """The reference model of case ``name``, saved with save_pretrained into ``folder`` and imported by zoo."""
    case = CASES[name]
    hf = reference_model(case)
    hf.save_pretrained(folder)
    return Reference(case, hf, from_hf(folder).eval(), folder)


@pytest.fixture(scope="module")
def references(tmp_path_factory) -> Any:
    """``references(name)``: case ``name``'s reference model, saved and imported once for the whole module.

    The parity tests (``ref``), the generation tests (``generator_ref``) and the Mixtral routing test share it:
    none of them changes the models or the saved folder (greedy generation sets its own generation config).
    """
    made: dict[str, Reference] = {}

    def reference(name: str) -> Reference:
        if name not in made:
            made[name] = saved_and_imported(name, tmp_path_factory.mktemp(name))
        return made[name]

    return reference


@pytest.fixture(scope="module", params=sorted(CASES))
def ref(request, references) -> Reference:
    return references(request.param)


def padded_ids(vocab_size: int, batch: int = 3, length: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ids and a mask: row 0 full, row 1 right-padded, row 2 left-padded (left only for decoders)."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, vocab_size, (batch, length), generator=g)
    mask = torch.ones(batch, length, dtype=torch.long)
    mask[1, -4:] = 0
    mask[2, :3] = 0
    return ids, mask


def text_and_images(vocab_size: int, eos: int | None, image_size: int, channels: int) -> dict[str, torch.Tensor]:
    """A dual-encoder's inputs: right-padded texts ending in ``eos`` (where the config pools it) and two images."""
    ids, mask = padded_ids(vocab_size)
    mask[2] = 1
    mask[2, -7:] = 0  # texts pad on the right
    if eos is not None and eos != 2:
        ids[ids == eos] = 1
        ids[torch.arange(3), mask.sum(-1) - 1] = eos
    images = torch.randn(2, channels, image_size, image_size, generator=torch.Generator().manual_seed(1))
    return {"input_ids": ids, "attention_mask": mask, "pixel_values": images}


def dual_inputs(config: Any) -> dict[str, torch.Tensor]:
    text, vision = config.text_config, config.vision_config
    return text_and_images(text.vocab_size, text.eos_token_id, vision.image_size, vision.num_channels)


def speech_features(config: Any, batch: int = 3) -> torch.Tensor:
    """Random log-mel frames (N, num_mel_bins, 2 * max_source_positions): a speech encoder's whole input."""
    shape = (batch, config.num_mel_bins, 2 * config.max_source_positions)
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1))


def hf_inputs(model: torch.nn.Module, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """The inputs beside ``ids`` that make transformers compute what zoo's ``model`` computes (``HF_INPUTS``)."""
    from zoo.hf import family_of

    inputs = HF_INPUTS.get(family_of(model.recipe).model_type)
    return {} if inputs is None else inputs(model, ids)


def max_differences(ref: Reference) -> dict[str, float]:
    """Max |HF - zoo| of each output the family compares, on a padded batch (real positions only)."""
    hf, model, kind = ref.hf, ref.model, KINDS[ref.case.family]
    config = hf.config
    with torch.no_grad():
        if kind == "vision":
            size, channels = config.image_size, config.num_channels
            images = torch.randn(3, channels, size, size, generator=torch.Generator().manual_seed(1))
            return {"logits": (hf(pixel_values=images).logits - model(images).logits).abs().max().item()}
        if kind == "dual-encoder":
            inputs = dual_inputs(config)
            out = hf(**inputs)
            zoo_out = model(inputs["input_ids"], inputs["pixel_values"], attention_mask=inputs["attention_mask"])
            return {
                key: (getattr(out, hf_key) - getattr(zoo_out, key)).abs().max().item()
                for key, hf_key in (("logits", "logits_per_image"), ("text_embeds",) * 2, ("image_embeds",) * 2)
            }
        if kind == "speech":  # random log-mel frames, as many as the encoder's positions take
            features = speech_features(config)
            target = torch.randint(1, config.vocab_size, (3, 7), generator=torch.Generator().manual_seed(2))
            target[:, 0] = decoder_start(config)
            out = hf(input_features=features, decoder_input_ids=target)
            zoo_out = model(features, target)
            encoder = (out.encoder_last_hidden_state - zoo_out.encoder_hidden).abs().max().item()
            return {"encoder": encoder, "logits": (out.logits - zoo_out.logits).abs().max().item()}
        ids, mask = padded_ids(config.vocab_size)
        if kind == "decoder":
            positions = (mask.cumsum(-1) - 1).clamp(min=0)  # left padding shifts the real tokens' positions
            expected = hf(input_ids=ids, attention_mask=mask, position_ids=positions).logits
            actual = model(ids, attention_mask=mask, positions=positions).logits
            return {"logits": (expected - actual)[mask.bool()].abs().max().item()}
        if kind == "encoder":
            mask[2] = 1
            mask[2, -7:] = 0  # encoders pad on the right
            types = {}
            if getattr(config, "type_vocab_size", 0) > 1:
                g = torch.Generator().manual_seed(2)
                types = {"token_type_ids": torch.randint(0, config.type_vocab_size, ids.shape, generator=g)}
            out = hf(input_ids=ids, attention_mask=mask, output_hidden_states=True, **types)
            zoo_out = model(ids, attention_mask=mask, **types)
            real = mask.bool()
            hidden = (out.hidden_states[-1] - zoo_out.hidden_states)[real].abs().max().item()
            if not hasattr(out, "logits"):  # a bare encoder (BertModel): its pooled output
                return {"hidden": hidden, "pooled": (out.pooler_output - zoo_out.logits).abs().max().item()}
            logits = out.logits - zoo_out.logits
            return {"hidden": hidden, "logits": (logits[real] if logits.dim() == 3 else logits).abs().max().item()}
        # seq2seq: padded source, full target starting with the decoder start token
        mask[2] = 1
        mask[2, -6:] = 0
        target = torch.randint(1, config.vocab_size, (3, 7), generator=torch.Generator().manual_seed(2))
        target[:, 0] = decoder_start(config)
        out = hf(input_ids=ids, attention_mask=mask, decoder_input_ids=target, **hf_inputs(model, ids))
        zoo_out = model(ids, target, attention_mask=mask)
        encoder = (out.encoder_last_hidden_state - zoo_out.encoder_hidden)[mask.bool()].abs().max().item()
        return {"encoder": encoder, "logits": (out.logits - zoo_out.logits).abs().max().item()}


def test_same_parameter_count(ref):
    assert zoo.count_parameters(ref.model) == sum(p.numel() for p in ref.hf.parameters())


def test_outputs_match_on_padded_batches(ref):
    differences = max_differences(ref)
    assert all(d < TOLERANCE for d in differences.values()), differences


def decoder_start(config: Any) -> int:
    """The token a seq2seq decoder starts from: the config's ``decoder_start_token_id``, else (T5) the pad id."""
    start = getattr(config, "decoder_start_token_id", None)
    return config.pad_token_id if start is None else start


def greedy_hf(hf: torch.nn.Module, ids: torch.Tensor, **inputs: torch.Tensor) -> torch.Tensor:
    config = copy.deepcopy(hf.generation_config)
    config.do_sample, config.max_new_tokens = False, NEW_TOKENS
    # No token may end a sequence early. (An eos_token_id of None in a config passed to generate() is filled
    # from the model's own generation config, so the model's is replaced.)
    config.eos_token_id, config.pad_token_id = None, 0
    config.forced_eos_token_id = None  # BART's configs force eos as the last token
    if hf.config.is_encoder_decoder:
        config.decoder_start_token_id = decoder_start(hf.config)
    hf.generation_config = config
    with torch.no_grad():
        return hf.generate(ids, attention_mask=torch.ones_like(ids), **inputs)


@torch.no_grad()
def greedy_zoo(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Greedy decoding with zoo's forward and KV cache: prefill once, then one token per step (and the whole
    sequence again where the cache goes stale, ``recompute_length``: as transformers' Phi-3 with LongRoPE)."""
    if model.recipe.architecture == "encoder-decoder":
        encoded = model.encode(ids)
        tokens = torch.full((ids.shape[0], 1), model.decoder_start_token_id)
        cache = model.new_cache(ids.shape[0], NEW_TOKENS + 1)
        step = tokens
        for _ in range(NEW_TOKENS):
            logits = model(decoder_input_ids=step, encoder_hidden=encoded, cache=cache).logits
            step = logits[:, -1].argmax(-1, keepdim=True)
            tokens = torch.cat([tokens, step], dim=1)
        return tokens
    cache = model.new_cache(ids.shape[0], ids.shape[1] + NEW_TOKENS)
    stale = pytest.importorskip("zoo.generate").recompute_length(model)
    tokens, step = ids, ids
    for _ in range(NEW_TOKENS):
        if tokens.shape[1] == stale:
            cache.reset()
            step = tokens
        step = model(step, cache=cache).logits[:, -1].argmax(-1, keepdim=True)
        tokens = torch.cat([tokens, step], dim=1)
    return tokens


@pytest.fixture(scope="module", params=GENERATORS)
def generator_ref(request, references) -> Reference:
    return references(request.param)


def test_greedy_generation_matches_for_20_tokens(generator_ref):
    ref = generator_ref
    prompts = torch.randint(1, ref.hf.config.vocab_size, (2, 6), generator=torch.Generator().manual_seed(3))
    expected = greedy_hf(ref.hf, prompts, **hf_inputs(ref.model, prompts))
    prompt_len = 1 if ref.hf.config.is_encoder_decoder else prompts.shape[1]
    assert expected.shape == (2, prompt_len + NEW_TOKENS)  # nothing stopped early
    assert torch.equal(greedy_zoo(ref.model, prompts), expected)


def test_zoo_generate_matches_hf_greedy_generation(generator_ref):
    generate = pytest.importorskip("zoo.generate").generate
    ref = generator_ref
    prompts = torch.randint(1, ref.hf.config.vocab_size, (2, 6), generator=torch.Generator().manual_seed(5))
    expected = greedy_hf(ref.hf, prompts, **hf_inputs(ref.model, prompts))
    new = expected[:, -NEW_TOKENS:].tolist()
    assert generate(ref.model, prompts, max_new_tokens=NEW_TOKENS).tokens == new


def grows_its_base(model: torch.nn.Module) -> bool:
    """Whether a model's rope is dynamic NTK: past its original length, each call raises the base by its own
    length, and keys keep the base of the call that computed them. transformers' cache keeps them so too (its
    ``generate`` matches zoo's, token for token), so cached decoding there is not a recomputation either."""
    from zoo.components.positional import RotaryEmbedding

    return any(isinstance(m, RotaryEmbedding) and m.scaling["scaling"] == "dynamic" for m in model.modules())


def test_cached_decoding_equals_recomputation(generator_ref):
    generate = pytest.importorskip("zoo.generate").generate
    ref = generator_ref
    if grows_its_base(ref.model):
        pytest.skip("dynamic NTK: cached keys keep their base in transformers too (see grows_its_base)")
    prompts = torch.randint(1, ref.hf.config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(6))
    cached = generate(ref.model, prompts, max_new_tokens=NEW_TOKENS)
    recomputed = generate(ref.model, prompts, max_new_tokens=NEW_TOKENS, use_cache=False)
    assert cached.tokens == recomputed.tokens


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.family == "mixtral"])
def test_mixtral_routes_every_token_to_the_same_experts(name, references):
    ref = references(name)
    case, hf, model = ref.case, ref.hf, ref.model
    moe_inputs: list[torch.Tensor] = []
    hooks = [b.ffn.register_forward_hook(lambda m, args, out: moe_inputs.append(args[0])) for b in model.blocks]
    ids = torch.randint(1, case.config["vocab_size"], (3, 16), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        router_logits = hf(input_ids=ids, output_router_logits=True).router_logits
        model(ids)
    for h in hooks:
        h.remove()
    k = case.config["num_experts_per_tok"]
    assert len(router_logits) == len(moe_inputs) == case.config["num_hidden_layers"]
    for layer, (logits, x) in enumerate(zip(router_logits, moe_inputs, strict=True)):
        _, chosen, _ = model.blocks[layer].ffn.route(x)
        expected = logits.reshape(-1, logits.shape[-1]).topk(k, dim=-1).indices
        assert torch.equal(chosen, expected), f"layer {layer}"
        assert len(chosen.unique()) > 1  # the routing is not degenerate


def test_round_trip_gives_back_the_checkpoint_bit_for_bit(ref, tmp_path):
    """zoo -> HF writes the same tensors save_pretrained wrote; HF loads them and zoo reads them back exactly."""
    to_hf(ref.model, tmp_path)
    original, exported = load_file(ref.folder / "model.safetensors"), load_file(tmp_path / "model.safetensors")
    assert sorted(exported) == sorted(original)
    for name, tensor in original.items():
        assert torch.equal(exported[name], tensor), name

    back = from_hf(tmp_path)
    for (name, a), b in zip(ref.model.state_dict().items(), back.state_dict().values(), strict=True):
        assert torch.equal(a, b), name

    reloaded = type(ref.hf).from_pretrained(tmp_path).eval()
    assert type(reloaded) is type(ref.hf)
    assert sum(p.numel() for p in reloaded.parameters()) == sum(p.numel() for p in ref.hf.parameters())
    kind = KINDS[ref.case.family]
    inputs = {"input_ids": padded_ids(ref.hf.config.vocab_size)[0]} if kind not in ("vision", "dual-encoder") else {}
    if kind == "dual-encoder":
        inputs = dual_inputs(ref.hf.config)
    if kind == "vision":
        size = ref.hf.config.image_size
        inputs["pixel_values"] = torch.randn(2, ref.hf.config.num_channels, size, size)
    if kind == "seq2seq":
        inputs["decoder_input_ids"] = inputs["input_ids"][:, :5]
    if kind == "speech":
        inputs = {"input_features": speech_features(ref.hf.config), "decoder_input_ids": inputs["input_ids"][:, :5]}
    with torch.no_grad():
        expected, actual = ref.hf(**inputs), reloaded(**inputs)
    key = "logits" if hasattr(expected, "logits") else "logits_per_image" if kind == "dual-encoder" else "pooler_output"
    assert torch.equal(expected[key], actual[key])


MIXTRAL_TINY = {
    "extends": "llama-tiny",
    "name": "mixtral-tiny",
    "ffn": {"type": "moe", "num_experts": 4, "top_k": 2, "expert": {"type": "swiglu", "hidden": 48}},
}
ZOO_MODELS = {
    "gpt-tiny": ("gpt-tiny", {}),
    "gpt-tiny-untied": ("gpt-tiny", {"head.tie_embeddings": False}),
    "bert-tiny-mlm": ("bert-tiny", {}),
    "bert-tiny-pooler": ("bert-tiny", {"head": {"type": "pooler"}}),
    "bert-tiny-classifier": ("bert-tiny", {"head": {"type": "classification", "pooler": True}, "num_classes": 4}),
    "vit-tiny": ("vit-tiny", {}),
    "t5-tiny": ("t5-tiny", {}),
    "t5-tiny-untied-swiglu": (
        "t5-tiny",
        {"ffn": {"type": "swiglu", "hidden": 96}, "head.tie_embeddings": False, "head.rescale": False},
    ),
    "t5-tiny-tied-unscaled-reglu": ("t5-tiny", {"ffn": {"type": "reglu", "hidden": 96}, "head.rescale": False}),
    "llama-tiny": ("llama-tiny", {}),
    "llama-tiny-mqa-biased-untied": (
        "llama-tiny",
        {
            "attention": {"type": "mqa", "num_heads": 4, "head_dim": 24, "bias": True},
            "ffn.bias": True,
            "head.tie_embeddings": False,
        },
    ),
    "mixtral-tiny": (MIXTRAL_TINY, {}),
}
for _cases in hf_cases.modules():
    ZOO_MODELS.update(getattr(_cases, "ZOO_MODELS", {}))


@pytest.mark.parametrize("name", sorted(ZOO_MODELS))
def test_transformers_loads_zoo_exports_with_the_same_outputs(name, tmp_path):
    recipe, overrides = ZOO_MODELS[name]
    torch.manual_seed(0)
    model = zoo.build(recipe, **overrides).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:  # a frozen table (Marian's sinusoids) is computed, not exported
                p.add_(0.02 * torch.randn_like(p))
    to_hf(model, tmp_path)
    hf_class = getattr(transformers, transformers.AutoConfig.from_pretrained(tmp_path).architectures[0])
    hf = hf_class.from_pretrained(tmp_path).eval()
    auto = {"encoder-decoder": "AutoModelForSeq2SeqLM", "vit": "AutoModelForImageClassification"}
    if model.recipe.architecture in auto:  # the matching Auto class loads the export as its own class
        assert type(getattr(transformers, auto[model.recipe.architecture]).from_pretrained(tmp_path)) is hf_class
    assert sum(p.numel() for p in hf.parameters()) == zoo.count_parameters(model)
    r = model.recipe
    with torch.no_grad():
        if r.architecture == "vit":
            images = torch.randn(2, r.num_channels, r.image_size, r.image_size)
            expected, actual = hf(pixel_values=images).logits, model(images).logits
        elif r.architecture == "dual-encoder":
            eos = r.head.eos_token_id if r.head.text_pool == "eos" else None
            inputs = text_and_images(r.vocab_size, eos, r.vision.image_size, r.vision.num_channels)
            expected = hf(**inputs).logits_per_image
            actual = model(inputs["input_ids"], inputs["pixel_values"], attention_mask=inputs["attention_mask"]).logits
        elif r.architecture == "encoder-decoder":
            ids, mask = padded_ids(r.vocab_size)
            mask[2] = 1
            mask[2, -5:] = 0
            target = ids[:, :6]
            expected = hf(input_ids=ids, attention_mask=mask, decoder_input_ids=target, **hf_inputs(model, ids)).logits
            actual = model(ids, target, attention_mask=mask).logits
        else:
            ids, mask = padded_ids(r.vocab_size)
            mask[2] = 1  # no left padding: compare every real position with HF's default positions
            expected, actual = hf(input_ids=ids, attention_mask=mask), model(ids, attention_mask=mask).logits
            expected = expected.pooler_output if r.head.type == "pooler" else expected.logits
            if expected.dim() == 3:
                expected, actual = expected[mask.bool()], actual[mask.bool()]
    assert (expected - actual).abs().max().item() < TOLERANCE
