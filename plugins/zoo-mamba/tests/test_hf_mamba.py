"""Import from Hugging Face through the plugin's families: parity with transformers' PyTorch path on tiny random
configs (fp32 logits within 1e-4, the same 20-token greedy generation), round trip, published parameter counts."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch

pytest.importorskip("zoo_mamba", reason="pip install -e plugins/zoo-mamba")
transformers = pytest.importorskip("transformers")

import zoo  # noqa: E402
from zoo.hf import families, from_hf, hf_recipe, to_hf  # noqa: E402

NEW_TOKENS = 20

CASES = {
    "mamba-tiny-hf": (
        "MambaConfig",
        "MambaForCausalLM",
        dict(vocab_size=96, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4),
    ),
    "mamba-bias-untied-rank": (
        "MambaConfig",
        "MambaForCausalLM",
        dict(
            vocab_size=80,
            hidden_size=24,
            state_size=4,
            num_hidden_layers=3,
            expand=3,
            conv_kernel=3,
            time_step_rank=5,
            use_bias=True,
            use_conv_bias=False,
            tie_word_embeddings=False,
            layer_norm_epsilon=1e-6,
        ),
    ),
    "mamba2-tiny-hf": (
        "Mamba2Config",
        "Mamba2ForCausalLM",
        dict(
            vocab_size=96,
            hidden_size=32,
            num_heads=4,
            head_dim=16,
            state_size=8,
            n_groups=1,
            num_hidden_layers=2,
            chunk_size=5,
            tie_word_embeddings=True,
        ),
    ),
    "mamba2-groups-bias-untied": (
        "Mamba2Config",
        "Mamba2ForCausalLM",
        dict(
            vocab_size=80,
            hidden_size=24,
            num_heads=6,
            head_dim=8,
            state_size=4,
            n_groups=2,
            num_hidden_layers=2,
            conv_kernel=3,
            chunk_size=4,
            use_bias=True,
            use_conv_bias=False,
            layer_norm_epsilon=1e-6,
        ),
    ),
    "falcon-mamba-tiny": (
        "FalconMambaConfig",
        "FalconMambaForCausalLM",
        dict(vocab_size=96, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4),
    ),
    "falcon-mamba-untied-rank-eps": (
        "FalconMambaConfig",
        "FalconMambaForCausalLM",
        dict(
            vocab_size=80,
            hidden_size=24,
            state_size=4,
            num_hidden_layers=3,
            expand=3,
            time_step_rank=5,
            mixer_rms_eps=1e-3,
            tie_word_embeddings=False,
        ),
    ),
    "jamba-attention-moe": (
        "JambaConfig",
        "JambaForCausalLM",
        dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            num_experts=4,
            num_experts_per_tok=2,
            attn_layer_period=4,
            attn_layer_offset=2,
            expert_layer_period=2,
            expert_layer_offset=1,
            mamba_d_state=8,
            mamba_dt_rank=4,
        ),
    ),
    "jamba-mqa-tied-biased-dense-first": (
        "JambaConfig",
        "JambaForCausalLM",
        dict(
            vocab_size=80,
            hidden_size=24,
            intermediate_size=40,
            num_hidden_layers=5,
            num_attention_heads=3,
            num_key_value_heads=1,
            num_experts=3,
            num_experts_per_tok=1,
            attn_layer_period=2,
            attn_layer_offset=0,  # attention first, then every second layer
            expert_layer_period=3,
            expert_layer_offset=2,
            mamba_d_state=4,
            mamba_d_conv=3,
            mamba_expand=3,
            mamba_dt_rank="auto",
            mamba_conv_bias=False,
            mamba_proj_bias=True,
            rms_norm_eps=1e-5,
            tie_word_embeddings=True,
        ),
    ),
    "bamba-gqa-groups-untied": (
        "BambaConfig",
        "BambaForCausalLM",
        dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            attn_layer_indices=[1, 3],
            mamba_n_heads=4,
            mamba_n_groups=2,
            mamba_d_state=8,
            mamba_d_conv=3,
            mamba_chunk_size=5,
        ),
    ),
    "bamba-mqa-first-biased-tied-scaled-rope": (
        "BambaConfig",
        "BambaForCausalLM",
        dict(
            vocab_size=80,
            hidden_size=24,
            intermediate_size=40,
            num_hidden_layers=3,
            num_attention_heads=3,
            num_key_value_heads=1,
            head_dim=16,  # not BambaConfig's field, but BambaAttention reads it
            attn_layer_indices=[0, 2, 7],  # attention first; 7 is past the last layer (no layer)
            attention_bias=True,
            attention_dropout=0.1,
            mlp_bias=True,
            mamba_expand=3,
            mamba_n_heads=6,
            mamba_d_head=12,
            mamba_n_groups=3,
            mamba_d_state=4,
            mamba_chunk_size=4,
            mamba_conv_bias=False,
            mamba_proj_bias=True,
            rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0, "partial_rotary_factor": 0.75},
            pad_token_id=None,
            tie_word_embeddings=True,
        ),
    ),
}


def reference(name: str) -> torch.nn.Module:
    config_class, model_class, options = CASES[name]
    torch.manual_seed(0)
    hf = getattr(transformers, model_class)(getattr(transformers, config_class)(**options)).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(0.02 * torch.randn_like(p))
    return hf


@pytest.fixture(scope="module", params=sorted(CASES))
def pair(request, tmp_path_factory):
    hf = reference(request.param)
    folder = tmp_path_factory.mktemp(request.param)
    hf.save_pretrained(folder)
    return hf, from_hf(folder).eval(), folder


def test_the_families_join_zoos_through_the_plugin_hook():
    found = families()
    assert found["mamba"].classes == ("MambaForCausalLM",) and found["mamba2"].classes == ("Mamba2ForCausalLM",)
    assert "mamba" not in zoo.hf.FAMILIES  # the built-in table is left as it is


def test_same_parameter_count(pair):
    hf, model, _ = pair
    assert zoo.count_parameters(model) == sum(p.numel() for p in hf.parameters())


@torch.no_grad()
def test_logits_match_within_1e_4(pair):
    hf, model, _ = pair
    x = torch.randint(1, hf.config.vocab_size, (3, 23), generator=torch.Generator().manual_seed(1))
    difference = (model(x).logits - hf(x).logits).abs().max().item()
    assert difference <= 1e-4, difference


@torch.no_grad()
def test_logits_match_on_a_right_padded_batch(pair):
    hf, model, _ = pair
    x = torch.randint(1, hf.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(x)
    mask[1, 8:] = 0
    ours, theirs = model(x, attention_mask=mask).logits, hf(x, attention_mask=mask).logits
    assert (ours[0] - theirs[0]).abs().max() <= 1e-4 and (ours[1, :8] - theirs[1, :8]).abs().max() <= 1e-4


@torch.no_grad()
def test_greedy_generation_matches_for_20_tokens(pair):
    from zoo.generate import generate

    hf, model, _ = pair
    prompts = torch.randint(1, hf.config.vocab_size, (2, 6), generator=torch.Generator().manual_seed(3))
    config = copy.deepcopy(hf.generation_config)
    config.do_sample, config.max_new_tokens, config.eos_token_id, config.pad_token_id = False, NEW_TOKENS, None, 0
    hf.generation_config = config
    theirs = hf.generate(prompts, attention_mask=torch.ones_like(prompts))[:, 6:].tolist()
    ours = generate(model, prompts.tolist(), max_new_tokens=NEW_TOKENS)
    assert ours.tokens == theirs
    assert generate(model, prompts.tolist(), max_new_tokens=NEW_TOKENS, use_cache=False).tokens == theirs


def test_round_trip_bit_for_bit_and_transformers_loads_the_export(pair, tmp_path):
    from safetensors.torch import load_file

    hf, model, folder = pair
    out = to_hf(model, tmp_path / "out")
    written, original = load_file(out / "model.safetensors"), load_file(folder / "model.safetensors")
    assert set(written) == set(original)
    assert all(torch.equal(written[n], original[n]) for n in written)
    again = type(hf).from_pretrained(out).eval()
    x = torch.randint(1, hf.config.vocab_size, (1, 9), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        torch.testing.assert_close(again(x).logits, hf(x).logits, rtol=0, atol=0)


def test_an_option_zoo_cannot_reproduce_is_refused(tmp_path):
    config = transformers.Mamba2Config(hidden_size=32, num_heads=4, head_dim=16, time_step_limit=(0.0, 1.0))
    config.save_pretrained(tmp_path)
    with pytest.raises(zoo.hf.HFImportError, match=r"time_step_limit=.* is not supported"):
        hf_recipe(tmp_path)
    transformers.MambaConfig(hidden_act="gelu").save_pretrained(tmp_path)
    with pytest.raises(zoo.hf.HFImportError, match=r"hidden_act='gelu' is not supported"):
        hf_recipe(tmp_path)


@pytest.mark.parametrize("model_type", ["mamba", "mamba2", "jamba", "falcon_mamba", "bamba"])
def test_every_config_attribute_is_read_checked_or_named(model_type):
    family = families()[model_type]
    attributes = set(transformers.AutoConfig.for_model(model_type).to_dict())
    generic = set(transformers.PretrainedConfig().to_dict())
    checked = {option.key for option in family.options}
    unaccounted = attributes - generic - set(family.defaults) - checked - set(family.unread_keys)
    assert not unaccounted, sorted(unaccounted)


PUBLISHED = {
    # state-spaces/mamba-130m-hf/config.json (the network's keys)
    "mamba-130m": (
        "MambaConfig",
        dict(
            vocab_size=50280,
            hidden_size=768,
            state_size=16,
            num_hidden_layers=24,
            layer_norm_epsilon=1e-5,
            expand=2,
            conv_kernel=4,
            use_bias=False,
            use_conv_bias=True,
            time_step_rank=48,
            intermediate_size=1536,
            tie_word_embeddings=True,
        ),
    ),
    # state-spaces/mamba2-130m (d_model 768, n_layer 24, vocab 50277 padded to a multiple of 16, Mamba2 defaults:
    # d_state 128, headdim 64, expand 2, ngroups 1, tied), as transformers' Mamba2Config writes it.
    "mamba2-130m": (
        "Mamba2Config",
        dict(
            vocab_size=50288,
            hidden_size=768,
            num_heads=24,
            head_dim=64,
            state_size=128,
            n_groups=1,
            num_hidden_layers=24,
            expand=2,
            conv_kernel=4,
            chunk_size=256,
            layer_norm_epsilon=1e-5,
            tie_word_embeddings=True,
        ),
    ),
}


PUBLISHED["falcon-mamba-7b"] = (
    # tiiuae/falcon-mamba-7b/config.json (the network's keys)
    "FalconMambaConfig",
    dict(
        vocab_size=65024,
        hidden_size=4096,
        state_size=16,
        num_hidden_layers=64,
        layer_norm_epsilon=1e-5,
        expand=2,
        intermediate_size=8192,
        conv_kernel=4,
        use_bias=False,
        use_conv_bias=True,
        time_step_rank=256,
        mixer_rms_eps=1e-6,
        tie_word_embeddings=False,
    ),
)

PUBLISHED["jamba-v0.1"] = (
    # ai21labs/Jamba-v0.1/config.json (the network's keys; they are JambaConfig's defaults)
    "JambaConfig",
    dict(
        vocab_size=65536,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        num_experts=16,
        num_experts_per_tok=2,
        attn_layer_period=8,
        attn_layer_offset=4,
        expert_layer_period=2,
        expert_layer_offset=1,
        mamba_d_state=16,
        mamba_d_conv=4,
        mamba_expand=2,
        mamba_dt_rank=256,
        mamba_conv_bias=True,
        mamba_proj_bias=False,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
    ),
)

PUBLISHED["bamba-9b"] = (
    # ibm-ai-platform/Bamba-9B/config.json (the network's keys; a transformers 4.x config: the base at the top level,
    # and attn_rotary_emb, which transformers does not read, saying the 64 of 128 head dims it rotates)
    "BambaConfig",
    dict(
        vocab_size=128256,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        attn_layer_indices=[9, 18, 27],
        attn_rotary_emb=64,
        mamba_n_heads=128,
        mamba_d_head=64,
        mamba_n_groups=1,
        mamba_d_state=128,
        mamba_d_conv=4,
        mamba_expand=2,
        mamba_chunk_size=256,
        mamba_conv_bias=True,
        mamba_proj_bias=False,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        max_position_embeddings=262144,
        pad_token_id=0,
        tie_word_embeddings=False,
    ),
)

FAMILY = {
    "mamba-130m": "mamba",
    "mamba2-130m": "mamba2",
    "jamba-v0.1": "jamba",
    "falcon-mamba-7b": "falcon_mamba",
    "bamba-9b": "bamba",
}
MILLIONS = {
    "mamba-130m": 129.1,
    "mamba2-130m": 129.0,
    "jamba-v0.1": 51570.3,
    "falcon-mamba-7b": 7272.7,
    "bamba-9b": 9780.2,
}


@pytest.mark.parametrize("recipe", sorted(PUBLISHED))
def test_named_recipe_has_the_published_parameter_count(recipe):
    config_class, config = PUBLISHED[recipe]
    with torch.device("meta"):
        hf = transformers.AutoModelForCausalLM.from_config(getattr(transformers, config_class)(**config))
    expected = sum(p.numel() for p in hf.parameters())
    model = zoo.build(recipe, device="meta")
    assert zoo.count_parameters(model) == expected == model.recipe.expect.parameters
    assert zoo.hf.family_of(model.recipe).name == FAMILY[recipe]  # it exports as its own family
    assert math.isclose(expected / 1e6, MILLIONS[recipe], abs_tol=0.05)


@pytest.mark.parametrize("recipe", ["bamba-9b"])
def test_the_published_config_imports_as_the_named_recipe(recipe, tmp_path):
    config_class, config = PUBLISHED[recipe]
    model_type = getattr(transformers, config_class).model_type
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type, **config}))
    imported = zoo.load_recipe({**hf_recipe(tmp_path), "name": recipe})
    named = zoo.load_recipe(recipe)
    assert imported.model_dump(exclude={"description", "expect"}) == named.model_dump(exclude={"description", "expect"})


def test_jamba_tiny_exports_as_jamba_and_transformers_gives_the_same_logits(tmp_path):
    torch.manual_seed(0)
    model = zoo.build("jamba-tiny").eval()
    out = to_hf(model, tmp_path)
    hf = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    assert type(hf).__name__ == "JambaForCausalLM"
    assert hf.config.layers_block_type == ["mamba", "mamba", "attention", "mamba"]
    assert hf.config.layers_num_experts == [1, 4, 1, 4]
    x = torch.randint(1, 256, (2, 17), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        assert (model(x).logits - hf(x).logits).abs().max() <= 1e-4


def test_bamba_tiny_exports_as_bamba_and_transformers_gives_the_same_logits(tmp_path):
    torch.manual_seed(0)
    model = zoo.build("bamba-tiny").eval()
    hf = transformers.AutoModelForCausalLM.from_pretrained(to_hf(model, tmp_path)).eval()
    assert type(hf).__name__ == "BambaForCausalLM" and hf.config.attn_layer_indices == [2]
    assert hf.config.rope_parameters["partial_rotary_factor"] == 0.5
    x = torch.randint(1, 256, (2, 37), generator=torch.Generator().manual_seed(5))  # two chunks and a part
    with torch.no_grad():
        assert (model(x).logits - hf(x).logits).abs().max() <= 1e-4


def test_a_hybrid_jamba_cannot_say_is_refused_by_layer():
    attention = {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "bias": False}
    recipe = zoo.load_recipe("jamba-tiny", layers=[{"select": [1, 2], "attention": attention}])
    problems = families()["jamba"].misfits(recipe)
    assert problems == ["the attention layers [1, 2] are not every k-th layer from one below k (Jamba's pattern)"]
    # the same network said another way fits: multi-head attention is GQA with as many KV heads as heads
    mha = {"type": "mha", "num_heads": 4, "bias": False}
    assert families()["jamba"].misfits(zoo.load_recipe("jamba-tiny", layers=[{"select": 2, "attention": mha}])) == []
    recipe = zoo.load_recipe("jamba-tiny", **{"attention.inner_norms": False})
    assert families()["jamba"].misfits(recipe) == ["layer 0's attention (attention): inner_norms=False (Jamba: True)"]


def _bamba_config(tmp_path, **options):
    config = {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "mamba_n_heads": 4, **options}
    transformers.BambaConfig(**config).save_pretrained(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        (dict(time_step_limit=(0.0, 1.0)), r"time_step_limit=.* is not supported: zoo's mamba2 does not clamp"),
        (dict(z_loss_coefficient=1e-4), r"z_loss_coefficient=0.0001 is not supported: .* no z-loss term"),
        (dict(hidden_act="gelu"), r"hidden_act='gelu' is not supported"),
        (dict(num_key_value_heads=3), r"num_attention_heads=4 must be a multiple of num_key_value_heads=3"),
        (dict(rope_parameters={"rope_type": "proportional", "rope_theta": 1e4}), r"rope_type='proportional'"),
        (
            dict(attn_layer_indices=[1], attn_rotary_emb=8),
            r"attn_rotary_emb=8, but transformers ignores it and rotates 4",
        ),
        (
            dict(attn_layer_indices=[1], rope_parameters={"rope_theta": 1e4, "partial_rotary_factor": 0.4}),
            r"rope rotates 3 of 8 head dims; zoo \(and transformers' own cos/sin tables\) need an even number",
        ),
    ],
)
def test_a_bamba_option_zoo_cannot_reproduce_is_refused_by_name(tmp_path, options, refusal):
    with pytest.raises(zoo.hf.HFImportError, match=refusal):
        hf_recipe(_bamba_config(tmp_path, **options))


def test_bamba_export_is_refused_by_layer_where_bamba_config_cannot_say_it():
    bamba = families()["bamba"]
    recipe = zoo.load_recipe("bamba-9b", num_layers=4, layers=[])
    assert bamba.misfits(recipe) == []  # no attention layer: Mamba-2 and SwiGLU layers only
    rope = {"type": "rope", "theta": 10000.0, "rotary_fraction": 0.5}
    gqa = {"type": "gqa", "num_heads": 32, "num_kv_heads": 8, "bias": False, "rotary": rope}
    two = [{"select": 1, "attention": gqa}, {"select": 3, "attention": {**gqa, "rotary": {**rope, "theta": 500.0}}}]
    problems = bamba.misfits(zoo.load_recipe("bamba-9b", num_layers=4, layers=two))
    assert len(problems) == 1 and problems[0].startswith("layer 3's attention (layers.1.attention): rotary=")
    # the same network said another way fits: multi-head attention is GQA with as many KV heads as heads
    mha = {"type": "mha", "num_heads": 8, "bias": False, "rotary": rope}
    assert bamba.misfits(zoo.load_recipe("bamba-9b", num_layers=4, layers=[{"select": 2, "attention": mha}])) == []
    # the initial step sizes are no part of the network; the mixer's norm epsilon is
    assert bamba.misfits(zoo.load_recipe("bamba-9b", **{"attention.dt_min": 0.01})) == []
    assert bamba.misfits(zoo.load_recipe("bamba-9b", **{"attention.norm_eps": 1e-6})) == [
        "layer 0's attention (attention): norm_eps=1e-06 (Bamba: 1e-05)"
    ]


@torch.no_grad()
def test_a_bamba_without_attention_layers_imports_and_exports(tmp_path):
    """Mamba-2 and SwiGLU layers only. transformers computes it without a cache only: its hybrid cache needs an
    attention layer to count tokens (so its generate fails on such a model)."""
    config = transformers.BambaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=24, num_hidden_layers=2, mamba_n_heads=2, mamba_d_state=4
    )
    torch.manual_seed(0)
    hf = transformers.BambaForCausalLM(config).eval()
    hf.save_pretrained(tmp_path / "hf")
    model = from_hf(tmp_path / "hf").eval()
    assert not model.recipe.layers
    x = torch.randint(1, 64, (2, 11), generator=torch.Generator().manual_seed(6))
    assert (model(x).logits - hf(x, use_cache=False).logits).abs().max() <= 1e-4
    again = type(hf).from_pretrained(to_hf(model, tmp_path / "out")).eval()
    assert again.config.attn_layer_indices == [] and again.config.num_attention_heads == 1
    torch.testing.assert_close(again(x, use_cache=False).logits, hf(x, use_cache=False).logits, rtol=0, atol=0)


@pytest.mark.parametrize(("model_type", "config_class"), [("falcon_h1", "FalconH1Config"), ("zamba2", "Zamba2Config")])
def test_hybrids_zoo_cannot_express_yet_are_refused_by_name(model_type, config_class, tmp_path):
    getattr(transformers, config_class)().save_pretrained(tmp_path)
    with pytest.raises(zoo.hf.HFImportError, match=rf"model_type '{model_type}' is not supported"):
        hf_recipe(tmp_path)
