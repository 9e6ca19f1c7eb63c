"""Weight init has one owner per parameter: a component's own ``reset_parameters``, else the architecture's."""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

import zoo
from zoo.config import ComponentConfig
from zoo.init import init_weights, is_residual_output, residual_output


def test_t5_relative_bias_keeps_its_own_init():
    torch.manual_seed(0)
    model = zoo.build("t5-small", num_layers=1, num_decoder_layers=1)
    table = model.encoder.positional.relative_attention_bias.weight
    # T5 draws this table with std d_model^-0.5 (0.044 at 512), not the recipe's init_std (0.02).
    assert abs(table.std().item() - 512**-0.5) < 0.005
    assert abs(model.encoder.blocks[0].attention.q_proj.weight.std().item() - 0.02) < 0.002


def test_learned_positions_follow_the_recipe_init_std():
    torch.manual_seed(0)
    model = zoo.build("gpt2-small", num_layers=1, init_std=0.05)
    assert abs(model.positional.embedding.weight.std().item() - 0.05) < 0.002


def test_residual_outputs_are_marked_not_guessed_by_name():
    torch.manual_seed(0)
    model = zoo.build("gpt2-small", num_layers=4)
    block = model.blocks[0]
    assert is_residual_output(block.attention.o_proj) and is_residual_output(block.ffn.down_proj)
    assert not is_residual_output(block.attention.q_proj)
    scaled = 0.02 / (2 * 4) ** 0.5
    assert abs(block.attention.o_proj.weight.std().item() - scaled) < 0.001
    assert abs(block.ffn.down_proj.weight.std().item() - scaled) < 0.001
    assert abs(block.ffn.up_proj.weight.std().item() - 0.02) < 0.001


def test_a_projection_named_o_proj_without_the_mark_gets_the_plain_std():
    model = nn.ModuleDict({"o_proj": nn.Linear(64, 64), "out": residual_output(nn.Linear(64, 64))})
    torch.manual_seed(0)
    init_weights(model, set(), std=0.1, num_layers=50)
    assert abs(model["o_proj"].weight.std().item() - 0.1) < 0.01
    assert abs(model["out"].weight.std().item() - 0.01) < 0.002


class Constant(nn.Module):
    """A plugin norm that initialises itself to 0.5 everywhere, and holds a Linear of its own."""

    def __init__(self, d_model: int, *, device=None, dtype=None) -> None:
        super().__init__()
        self.inner = nn.Linear(d_model, d_model, device=device, dtype=dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.constant_(self.inner.weight, 0.5)
        nn.init.constant_(self.inner.bias, 0.5)

    def forward(self, x):
        return x + 0 * self.inner(x)


class ConstantConfig(ComponentConfig):
    type: Literal["constant"] = "constant"


def test_a_component_that_defines_reset_parameters_owns_its_init(register_plugin):
    class Plugin:
        @zoo.hookimpl
        def register_components(self, register):
            register("norm", "constant", Constant, ConstantConfig)

    register_plugin(Plugin(), "constant-norm")
    model = zoo.build("gpt-tiny", norm={"type": "constant"})
    inner = model.blocks[0].attention_norm.inner
    assert torch.equal(inner.weight, torch.full_like(inner.weight, 0.5))  # not N(0, 0.02), not zeroed bias
    assert torch.equal(inner.bias, torch.full_like(inner.bias, 0.5))
