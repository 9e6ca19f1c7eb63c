import inspect
import typing

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from pydantic import ValidationError

from zoo.components.ffn import (
    ACTIVATIONS,
    MLP,
    Activation,
    GatedMLP,
    GeGLU,
    GeGLUConfig,
    MLPConfig,
    ReGLU,
    ReGLUConfig,
    SwiGLU,
    SwiGLUConfig,
    activation_module,
    gated_hidden,
)

FORMULAS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "quick_gelu": lambda t: t * torch.sigmoid(1.702 * t),
    "silu": F.silu,
    "identity": lambda t: t,
    "relu2": lambda t: F.relu(t) ** 2,
    "xielu": lambda t: xielu(t, 0.8, 0.8),
}


def xielu(t: torch.Tensor, alpha_p: float, alpha_n: float, beta: float = 0.5, eps: float = -1e-6) -> torch.Tensor:
    """xIELU at its effective scalars (after softplus): the paper's piecewise formula."""
    negative = (torch.expm1(t.clamp(max=eps)) - t) * alpha_n + beta * t
    return torch.where(t > 0, alpha_p * t * t + beta * t, negative)


GATED = [(SwiGLU, SwiGLUConfig, "silu"), (GeGLU, GeGLUConfig, "gelu"), (ReGLU, ReGLUConfig, "relu")]


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def randomize(module: nn.Module) -> None:
    """Non-zero biases too, so that formulas are checked on every parameter (a learned activation's scalars
    stay at their initial values, which ``FORMULAS`` assume)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if not name.startswith("act."):
                p.normal_(0, 0.5)


class TestActivations:
    def test_config_choices_are_the_registered_activations(self):
        assert set(typing.get_args(Activation)) == set(ACTIVATIONS)

    @pytest.mark.parametrize("name", sorted(ACTIVATIONS))
    def test_each_activation_is_its_formula(self, name):
        x = torch.linspace(-4, 4, 101)
        torch.testing.assert_close(activation_module(name)(x), FORMULAS[name](x), rtol=0, atol=0)

    def test_lookup_returns_fresh_modules(self):
        assert activation_module("gelu") is not activation_module("gelu")

    def test_unknown_activation_lists_choices(self):
        with pytest.raises(ValueError, match=rf"unknown activation 'swish'; choose one of: {', '.join(ACTIVATIONS)}$"):
            activation_module("swish")


class TestMLP:
    def test_parameter_count_with_bias(self):
        e, h = 8, 12
        assert n_params(MLP(e, hidden=h)) == 2 * e * h + h + e

    def test_parameter_count_without_bias(self):
        e, h = 8, 12
        assert n_params(MLP(e, hidden=h, bias=False)) == 2 * e * h

    def test_default_hidden_is_four_times_d_model(self):
        mlp = MLP(8)
        assert mlp.up_proj.weight.shape == (32, 8)
        assert mlp.down_proj.weight.shape == (8, 32)

    def test_parameter_names(self):
        names = [n for n, _ in MLP(8, hidden=4).named_parameters()]
        assert names == ["up_proj.weight", "up_proj.bias", "down_proj.weight", "down_proj.bias"]

    @pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
    def test_forward_is_the_formula(self, activation):
        torch.manual_seed(0)
        mlp = MLP(8, hidden=12, activation=activation)
        randomize(mlp)
        x = torch.randn(2, 3, 8)
        up, down = mlp.up_proj, mlp.down_proj
        expected = F.linear(FORMULAS[activation](F.linear(x, up.weight, up.bias)), down.weight, down.bias)
        out = mlp(x)
        assert out.shape == (2, 3, 8)
        torch.testing.assert_close(out, expected)

    def test_no_dropout_module_when_off(self):
        assert isinstance(MLP(8, dropout=0.0).dropout, nn.Identity)

    def test_dropout_applies_to_the_output(self):
        # p = 1 zeroes everything after down_proj, its bias included: dropout sits on the output.
        mlp = MLP(8, hidden=12, dropout=1.0).train()
        randomize(mlp)
        assert torch.count_nonzero(mlp(torch.randn(2, 3, 8))) == 0
        mlp.eval()
        assert torch.count_nonzero(mlp(torch.randn(2, 3, 8))) > 0

    def test_device_and_dtype(self):
        mlp = MLP(8, device="meta", dtype=torch.float64)
        assert {(p.device.type, p.dtype) for p in mlp.parameters()} == {("meta", torch.float64)}


class TestGatedMLP:
    @pytest.mark.parametrize("cls", [SwiGLU, GeGLU, ReGLU])
    def test_parameter_count(self, cls):
        e, h = 8, 12
        assert n_params(cls(e, hidden=h)) == 3 * e * h
        assert n_params(cls(e, hidden=h, bias=True)) == 3 * e * h + 2 * h + e

    def test_parameter_names(self):
        names = [n for n, _ in SwiGLU(8, hidden=4).named_parameters()]
        assert names == ["gate_proj.weight", "up_proj.weight", "down_proj.weight"]

    @pytest.mark.parametrize("cls,config,activation", GATED)
    def test_forward_is_the_formula(self, cls, config, activation):
        torch.manual_seed(0)
        module = cls(8, hidden=12, bias=True)
        randomize(module)
        x = torch.randn(2, 3, 8)
        gate = F.linear(x, module.gate_proj.weight, module.gate_proj.bias)
        up = F.linear(x, module.up_proj.weight, module.up_proj.bias)
        expected = F.linear(FORMULAS[activation](gate) * up, module.down_proj.weight, module.down_proj.bias)
        out = module(x)
        assert out.shape == (2, 3, 8)
        torch.testing.assert_close(out, expected)

    @pytest.mark.parametrize("cls,config,activation", GATED)
    def test_named_variant_is_gated_mlp_with_its_activation(self, cls, config, activation):
        torch.manual_seed(0)
        named = cls(8, hidden=12)
        generic = GatedMLP(8, hidden=12, activation=activation)
        generic.load_state_dict(named.state_dict())
        x = torch.randn(2, 3, 8)
        torch.testing.assert_close(named(x), generic(x), rtol=0, atol=0)

    def test_default_hidden_follows_llama(self):
        assert gated_hidden(4096) == 11008
        assert gated_hidden(64) == 256
        assert gated_hidden(50, multiple_of=8) == 136  # int(133.3) = 133, rounded up to 136
        assert SwiGLU(50, multiple_of=8).up_proj.out_features == 136
        assert SwiGLU(50, hidden=7, multiple_of=8).up_proj.out_features == 7


class TestFFNConfigs:
    REGISTERED = [
        ("mlp", MLP, MLPConfig),
        ("swiglu", SwiGLU, SwiGLUConfig),
        ("geglu", GeGLU, GeGLUConfig),
        ("reglu", ReGLU, ReGLUConfig),
    ]

    @pytest.mark.parametrize("name,cls,config", REGISTERED)
    def test_config_fields_are_constructor_keywords(self, name, cls, config):
        keywords = inspect.signature(cls).parameters
        arguments = config(hidden=12, bias=True, dropout=0.1).arguments()
        assert set(arguments) <= set(keywords)
        module = cls(8, **arguments)
        assert module.up_proj.out_features == 12

    def test_unknown_activation_lists_choices(self):
        with pytest.raises(ValidationError, match=r"activation\n  Input should be 'relu', "):
            MLPConfig(activation="swish")

    def test_extra_key_forbidden(self):
        with pytest.raises(ValidationError, match=r"hiden\n  Extra inputs are not permitted"):
            MLPConfig(hiden=12)

    def test_gated_name_fixes_the_activation(self):
        with pytest.raises(ValidationError, match=r"activation\n  Extra inputs are not permitted"):
            SwiGLUConfig(activation="relu")

    @pytest.mark.parametrize("config", [MLPConfig, SwiGLUConfig])
    def test_hidden_at_least_one(self, config):
        with pytest.raises(ValidationError, match=r"hidden\n  Input should be greater than or equal to 1"):
            config(hidden=0)

    def test_dropout_is_a_probability(self):
        with pytest.raises(ValidationError, match=r"dropout\n  Input should be less than or equal to 1"):
            MLPConfig(dropout=1.5)

    def test_defaults(self):
        assert MLPConfig().model_dump() == {
            "type": "mlp",
            "hidden": None,
            "activation": "gelu",
            "bias": True,
            "dropout": 0.0,
        }
        assert GeGLUConfig().model_dump() == {
            "type": "geglu",
            "hidden": None,
            "multiple_of": 256,
            "approximate": "none",
            "bias": False,
            "dropout": 0.0,
        }


def test_geglu_tanh_approximation_is_the_tanh_gelu():
    torch.manual_seed(0)
    exact = GeGLU(8, **GeGLUConfig(hidden=16).arguments())
    approx = GeGLU(8, **GeGLUConfig(hidden=16, approximate="tanh").arguments())
    approx.load_state_dict(exact.state_dict())
    x = torch.randn(2, 3, 8)
    gate = torch.nn.functional.gelu(exact.gate_proj(x), approximate="tanh")
    torch.testing.assert_close(approx(x), exact.down_proj(gate * exact.up_proj(x)))
    assert not torch.allclose(approx(x), exact(x))


def test_bilinear_glu_multiplies_the_gate_without_an_activation():
    from zoo.components.ffn import Bilinear, BilinearConfig

    torch.manual_seed(0)
    module = Bilinear(8, **BilinearConfig(hidden=16, bias=True).arguments())
    x = torch.randn(2, 3, 8)
    expected = module.down_proj(module.gate_proj(x) * module.up_proj(x))
    torch.testing.assert_close(module(x), expected, rtol=0, atol=0)
    assert sum(p.numel() for p in module.parameters()) == 3 * 8 * 16 + 2 * 16 + 8


def test_xielu_is_its_piecewise_formula_and_learns_two_scalars():
    from zoo.components.ffn import XIELU

    act = XIELU()
    assert [n for n, _ in act.named_parameters()] == ["alpha_p", "alpha_n"]
    alpha_p = torch.nn.functional.softplus(act.alpha_p).item()
    alpha_n = 0.5 + torch.nn.functional.softplus(act.alpha_n).item()
    assert alpha_p == pytest.approx(0.8) and alpha_n == pytest.approx(0.8)  # the published initial values
    act.alpha_p.data.fill_(0.3)
    act.alpha_n.data.fill_(-0.2)
    x = torch.linspace(-4, 4, 101)
    softplus = torch.nn.functional.softplus
    torch.testing.assert_close(act(x), xielu(x, softplus(act.alpha_p), 0.5 + softplus(act.alpha_n)))
    act.alpha_p.data.fill_(3.0)
    act.fill_weights()  # as a model built on meta is filled: back to the initial values
    assert torch.nn.functional.softplus(act.alpha_p).item() == pytest.approx(0.8)


def test_a_learned_activation_lives_on_the_mlps_device_and_dtype():
    from zoo.components.ffn import MLP

    mlp = MLP(8, hidden=16, activation="xielu", device="meta", dtype=torch.bfloat16)
    assert mlp.act.alpha_p.is_meta and mlp.act.alpha_p.dtype == torch.bfloat16
