"""Cross-layer parameter sharing (``layer_groups``, ALBERT's): the layers of a group hold one set of weights, the
parameter count and ``zoo summary`` count it once, the work of every layer still counts, and a checkpoint keeps
the sharing."""

from __future__ import annotations

import json

import pytest
import torch

import zoo
from zoo.analysis.parts import model_parts
from zoo.builder import count_parameters
from zoo.draw.describe import describe
from zoo.errors import RecipeError

TINY = {
    "name": "shared-tiny",
    "architecture": "encoder",
    "d_model": 32,
    "num_layers": 4,
    "vocab_size": 61,
    "max_len": 16,
    "norm_position": "post",
    "positional": "learned",
    "attention": {"type": "mha", "num_heads": 4},
    "norm": {"type": "layernorm", "eps": 1e-12},
    "ffn": {"type": "mlp", "hidden": 48},
}


def build(**changes):
    torch.manual_seed(0)
    return zoo.build({**TINY, **changes}).eval()


def block_params(model, i):
    return [p for _, p in sorted(model.blocks[i].named_parameters())]


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_a_group_holds_one_set_of_weights(groups):
    model = build(layer_groups=groups)
    size = 4 // groups
    for i in range(4):
        owner = i - i % size
        assert all(a is b for a, b in zip(block_params(model, i), block_params(model, owner), strict=True))
        if i > 0 and i % size == 0:  # the first layer of a later group has weights of its own
            assert all(a is not b for a, b in zip(block_params(model, i), block_params(model, i - 1), strict=True))
    unshared = build()
    per_block = sum(p.numel() for p in unshared.blocks[0].parameters())
    assert count_parameters(model) == count_parameters(unshared) - (4 - groups) * per_block


def test_shared_layers_compute_as_the_same_layer_applied_again():
    """A one-group stack equals an unshared stack whose every block holds block 0's weights."""
    shared, plain = build(layer_groups=1), build()
    for block in plain.blocks:
        block.load_state_dict(shared.blocks[0].state_dict())
    plain.load_state_dict(shared.state_dict(), strict=False)
    ids = torch.randint(0, 61, (2, 9))
    torch.testing.assert_close(shared(ids).logits, plain(ids).logits, rtol=0, atol=0)


def test_the_parts_count_shared_weights_once_and_every_layer_s_work():
    shared, plain = build(layer_groups=1), build()
    parts, plain_parts = model_parts(shared), model_parts(plain)
    assert sum(p.cost.params for p in parts) == count_parameters(shared)
    assert sum(p.cost.matmul for p in parts) == sum(p.cost.matmul for p in plain_parts)
    assert [p.cost.params for p in parts if p.layer == "blocks.3"] == [0, 0, 0, 0]


def test_gradients_of_a_shared_weight_sum_over_its_layers():
    model = build(layer_groups=1).train()
    ids = torch.randint(0, 61, (2, 9))
    model(ids, labels=ids).loss.backward()
    weight = model.blocks[0].attention.q_proj.weight
    assert weight.grad is not None and weight is model.blocks[3].attention.q_proj.weight


def test_a_checkpoint_keeps_the_sharing(tmp_path):
    model = build(layer_groups=2)
    zoo.save(model, tmp_path / "m")
    back = zoo.load(tmp_path / "m")
    assert back.blocks[1].ffn.up_proj.weight is back.blocks[0].ffn.up_proj.weight
    assert back.blocks[2].ffn.up_proj.weight is not back.blocks[0].ffn.up_proj.weight
    ids = torch.randint(0, 61, (2, 9))
    torch.testing.assert_close(back.eval()(ids).logits, model(ids).logits, rtol=0, atol=0)


def test_the_picture_says_the_layers_share_their_weights():
    (stack,), _ = describe(zoo.build({**TINY, "layer_groups": 2}, device="meta"))
    assert [(len(k.layers), k.weight_sets) for k in stack.kinds] == [(4, 2)]
    (stack,), _ = describe(zoo.build(TINY, device="meta"))
    assert [(len(k.layers), k.weight_sets) for k in stack.kinds] == [(4, 4)]


def test_groups_that_do_not_split_the_layers_are_refused():
    with pytest.raises(RecipeError, match=r"layer_groups: 3 groups cannot split the encoder's 4 layers evenly"):
        zoo.load_recipe({**TINY, "layer_groups": 3})


def test_a_layer_unlike_its_group_is_refused():
    layers = [{"select": [1], "ffn": {"type": "mlp", "hidden": 64}}]
    with pytest.raises(RecipeError, match=r"layers 0 and 1 of the encoder share their weights \(layer_groups: 2\)"):
        zoo.load_recipe({**TINY, "layer_groups": 2, "layers": layers})
    zoo.load_recipe({**TINY, "layer_groups": 2, "layers": [{**layers[0], "select": [2, 3]}]})  # a whole group


def test_zoo_list_names_the_sharing_among_each_architecture_s_recipe_fields():
    from typer.testing import CliRunner

    from zoo.cli import app

    result = CliRunner().invoke(app, ["list", "architecture", "--json"])
    entries = json.loads(result.output)
    listed = {e["name"]: e["recipe_fields"] for e in entries if e["plugin"] == "zoo.architectures"}  # zoo's own
    assert {name for name, fields in listed.items() if "layer_groups" in fields} == set(listed)
    assert "num_decoder_layers" in listed["encoder-decoder"] and "num_decoder_layers" not in listed["encoder"]


@pytest.mark.parametrize(("groups", "precision"), [(2, "bf16"), (3, "bf16"), (2, "fp32")])
def test_plan_composes_shared_layers_as_tracing_every_layer(groups, precision):
    """A group's layers cast its weights once (autocast keeps the copies) and accumulate one gradient: composing one
    traced layer over the stack counts them once per group, as tracing every layer measures."""
    from zoo.analysis.steptrace import trace_step
    from zoo.analysis.timeline import compose

    recipe = zoo.load_recipe("albert-tiny", num_layers=6, layer_groups=groups)
    kwargs = dict(micro_batch=2, seq_len=32, precision=precision)
    reduced, whole = trace_step(recipe, **kwargs), trace_step(recipe, whole=True, **kwargs)
    for trace in (reduced, whole):
        trace.composed = trace.weights + trace.optimizer + int(compose(trace).total.max())
    assert whole.composed == whole.traced_peak
    assert reduced.composed == pytest.approx(whole.traced_peak, rel=2e-3)
