"""Every shipped recipe builds to its reference size; every tiny recipe runs forward and backward."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.recipe import named_recipes

REFERENCE_PARAMETERS = {
    "gpt2-small": 124_439_808,
    "bert-base": 109_482_240,
    "vit-b16": 86_567_656,
    "t5-small": 60_506_624,
    "llama-3.2-1b": 1_235_814_400,
    "mixtral-8x7b": 46_702_792_704,
    "led-base-16384": 161_844_480,
}
TINY = ["gpt-tiny", "bert-tiny", "vit-tiny", "t5-tiny", "llama-tiny", "moe-tiny", "led-tiny"]


def tiny_inputs(model: torch.nn.Module, batch: int = 2, length: int = 12) -> dict[str, torch.Tensor]:
    """Inputs of the model's family, with labels, for a tiny recipe."""
    recipe = model.recipe
    g = torch.Generator().manual_seed(0)
    if recipe.architecture == "vit":
        images = torch.randn(batch, recipe.num_channels, recipe.image_size, recipe.image_size, generator=g)
        return {"images": images, "labels": torch.randint(0, recipe.num_classes, (batch,), generator=g)}
    ids = torch.randint(1, recipe.vocab_size, (batch, length), generator=g)
    if recipe.architecture == "encoder-decoder":
        return {"input_ids": ids, "labels": torch.randint(1, recipe.vocab_size, (batch, length - 3), generator=g)}
    return {"input_ids": ids, "labels": ids}


@pytest.mark.parametrize("name", sorted(REFERENCE_PARAMETERS))
def test_named_recipe_has_the_reference_parameter_count(name):
    model = zoo.build(name, device="meta")
    assert zoo.count_parameters(model) == REFERENCE_PARAMETERS[name]
    assert all(p.is_meta for p in model.parameters())


def test_every_shipped_recipe_is_named_and_valid():
    names = set(named_recipes())
    assert set(REFERENCE_PARAMETERS) | set(TINY) <= names
    for name in names:
        zoo.load_recipe(name)


@pytest.mark.parametrize("name", TINY)
def test_tiny_recipe_forward_and_backward(name):
    torch.manual_seed(0)
    model = zoo.build(name)
    out = model(**tiny_inputs(model))
    assert torch.isfinite(out.loss)
    out.loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert not missing, f"parameters without gradient: {missing}"
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_tied_head_shares_the_embedding_tensor():
    model = zoo.build("gpt-tiny")
    assert model.head.proj.weight is model.embedding.token.weight
    untied = zoo.build("gpt-tiny", **{"head.tie_embeddings": False})
    assert zoo.count_parameters(untied) == zoo.count_parameters(model) + 256 * 64


def test_moe_recipe_reports_aux_loss_and_selected_layers_only():
    model = zoo.build("moe-tiny")
    kinds = [model.zoo_components[f"blocks.{i}.ffn"].name for i in range(len(model.blocks))]
    assert kinds == ["swiglu", "moe", "swiglu", "moe"]
    out = model(**tiny_inputs(model))
    assert out.aux_loss is not None and out.aux_loss.ndim == 0 and out.aux_loss > 0


def test_build_applies_overrides_and_meta_allocates_nothing():
    model = zoo.build("gpt2-small", device="meta", num_layers=2, **{"attention.num_heads": 4})
    assert len(model.blocks) == 2
    assert model.blocks[0].attention.num_heads == 4
    assert model.recipe.num_layers == 2


def test_build_in_bfloat16():
    model = zoo.build("llama-tiny", dtype="bfloat16")
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    out = model(torch.randint(0, 256, (1, 8)))
    assert out.logits.dtype == torch.bfloat16


def test_provenance_names_component_and_plugin():
    model = zoo.build("llama-tiny")
    prov = model.zoo_components
    assert prov[""].kind == "architecture" and prov[""].name == "decoder"
    assert (prov["blocks.0.attention"].kind, prov["blocks.0.attention"].name) == ("attention", "gqa")
    assert prov["blocks.1.ffn"].plugin == "zoo.components.ffn"
    assert prov["positional"].name == "rope"


def test_module_names_are_stable():
    names = {n for n, _ in zoo.build("gpt-tiny").named_parameters()}
    for expected in [
        "embedding.token.weight",
        "positional.embedding.weight",
        "blocks.0.attention.q_proj.weight",
        "blocks.0.attention_norm.weight",
        "blocks.1.ffn.up_proj.weight",
        "blocks.1.ffn_norm.bias",
        "final_norm.weight",
    ]:
        assert expected in names
    t5 = {n for n, _ in zoo.build("t5-tiny").named_parameters()}
    assert "decoder.blocks.0.cross_attention.k_proj.weight" in t5
    assert "encoder.positional.relative_attention_bias.weight" in t5


def test_save_and_load_round_trip_is_bit_identical(tmp_path):
    model = zoo.build("moe-tiny")
    zoo.save(model, tmp_path / "run")
    loaded = zoo.load(tmp_path / "run")
    a, b = model.state_dict(), loaded.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert loaded.recipe == model.recipe
    assert not list(tmp_path.glob("run/.*tmp"))


def test_expect_mismatch_names_both_numbers():
    with pytest.raises(zoo.RecipeError, match=r"expects 1,000 parameters but the built model has 124,672"):
        zoo.build("gpt-tiny", **{"expect.parameters": 1000})


@pytest.mark.slow
@pytest.mark.parametrize("name", TINY)
def test_tiny_forward_compiles_fullgraph(name):
    torch.manual_seed(0)
    model = zoo.build(name).eval()
    inputs = tiny_inputs(model)
    compiled = torch.compile(model, fullgraph=True, backend="eager" if name != "gpt-tiny" else "inductor")
    with torch.no_grad():
        expected = model(**inputs)
        got = compiled(**inputs)
    torch.testing.assert_close(got.logits, expected.logits, rtol=1e-4, atol=1e-4)


def test_forward_never_touches_the_registry_or_pluggy(monkeypatch):
    models = {name: zoo.build(name) for name in TINY}
    inputs = {name: tiny_inputs(model) for name, model in models.items()}

    def forbidden(*args, **kwargs):
        raise AssertionError("registry or plugin manager used inside forward")

    monkeypatch.setattr(zoo.registry.Registry, "get", forbidden)
    monkeypatch.setattr(zoo.registry.Registry, "__iter__", forbidden)
    monkeypatch.setattr(zoo.plugins, "get_registry", forbidden)
    monkeypatch.setattr(zoo.plugins, "load_plugins", forbidden)
    monkeypatch.setattr(zoo.plugins.pm, "_hookexec", forbidden)
    for name, model in models.items():
        assert torch.isfinite(model(**inputs[name]).loss)


def test_save_and_load_keeps_a_low_precision_dtype(tmp_path):
    model = zoo.build("llama-tiny", dtype="bfloat16")
    zoo.save(model, tmp_path / "bf16")
    loaded = zoo.load(tmp_path / "bf16")
    assert {p.dtype for p in loaded.parameters()} == {torch.bfloat16}
    a, b = model.state_dict(), loaded.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_validated_recipe_holds_nested_configs_that_dump_as_they_load():
    from zoo.components.ffn import SwiGLUConfig
    from zoo.components.norm import RMSNormConfig
    from zoo.config import nested_config

    recipe = zoo.load_recipe("moe-tiny", attention={"qk_norm": "rmsnorm"})
    assert isinstance(recipe.attention.qk_norm, RMSNormConfig)
    moe = recipe.layers[0].ffn  # the per-layer overrides are validated the same way
    assert isinstance(moe.expert, SwiGLUConfig) and moe.expert.hidden == 96
    assert nested_config(moe, "expert") is moe.expert
    again = zoo.load_recipe(recipe.model_dump(mode="json"))
    assert again == recipe
    with pytest.raises(ValueError, match=r"MoEConfig.expert is the unvalidated spec \{'type': 'swiglu'\}"):
        from zoo.components.moe import MoEConfig

        nested_config(MoEConfig(num_experts=2, top_k=1), "expert")
