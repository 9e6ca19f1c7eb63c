"""zoo.compat: each wrapper of a private torch API works on the installed torch, checked per version range."""

from __future__ import annotations

import pytest
import torch

from zoo import compat

VERSION = compat.torch_version()


def test_the_version_is_read_from_torch():
    assert VERSION >= (2, 5), "zoo needs torch >= 2.5 (pyproject.toml)"


@pytest.mark.skipif(VERSION < (2, 7), reason="dynamo's recompile_limit has this name from torch 2.7")
def test_recompile_limit_reads_recompile_limit_from_2_7():
    assert compat.recompile_limit() == torch._dynamo.config.recompile_limit


@pytest.mark.skipif(VERSION >= (2, 7), reason="before torch 2.7 the limit is cache_size_limit")
def test_recompile_limit_reads_cache_size_limit_before_2_7():
    assert compat.recompile_limit() == torch._dynamo.config.cache_size_limit


def test_guards_can_be_skipped_from_2_6_only():
    assert compat.can_skip_guards() == (VERSION >= (2, 6))


def test_compiled_graphs_are_counted_per_function():
    torch._dynamo.reset()

    def double(x):
        return x * 2

    assert compat.compiled_graph_count(double) == 0
    compiled = torch.compile(double, backend="eager", dynamic=False)
    compiled(torch.ones(2))
    assert compat.compiled_graph_count(double) == 1
    compiled(torch.ones(3))  # a new static shape: a graph of its own
    assert compat.compiled_graph_count(double) == 2


def test_a_static_address_is_marked():
    t = torch.zeros(3)
    compat.mark_static_address(t)
    assert getattr(t, "_dynamo_static_input_type", None) is not None


def test_a_dispatch_mode_sees_operators_and_pytrees_flatten():
    seen = []

    class Count(compat.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    with Count():
        torch.ones(2) + 1
    assert torch.ops.aten.add.Tensor in seen
    flat, spec = compat.tree_flatten(({"a": 1}, [2, 3]))
    assert flat == [1, 2, 3] and compat.tree_unflatten([4, 5, 6], spec) == ({"a": 4}, [5, 6])


def test_the_backward_pass_is_told_apart():
    during = []
    x = torch.ones(2, requires_grad=True)
    x.register_hook(lambda g: during.append(compat.in_backward()))
    (x * 2).sum().backward()
    assert during == [True] and not compat.in_backward()


def test_meta_kernels_run_past_every_dispatch_mode():
    seen = []

    class Count(compat.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    a, b = torch.empty(2, 3, device="meta"), torch.empty(3, 4, device="meta")
    with Count(), compat.meta_kernels():
        out = a @ b
    assert out.is_meta and out.shape == (2, 4) and seen == []


def test_fake_tensors_are_recognised():
    from torch._subclasses.fake_tensor import FakeTensorMode

    assert not compat.is_fake_tensor(torch.ones(1))
    with FakeTensorMode():
        fake = torch.ones(2)
    assert compat.is_fake_tensor(fake)


def test_the_fused_adamw_step_is_adamws():
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(5))
    p.grad = torch.randn(5)
    q = torch.nn.Parameter(p.detach().clone())
    q.grad = p.grad.clone()
    torch.optim.AdamW([q], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, foreach=False).step()
    exp_avg, exp_avg_sq, step = torch.zeros(5), torch.zeros(5), torch.zeros(())
    compat.foreach_add_([step], 1)
    compat.fused_adamw_(
        [p],
        [p.grad],
        [exp_avg],
        [exp_avg_sq],
        [],
        [step],
        amsgrad=False,
        lr=1e-3,
        beta1=0.9,
        beta2=0.999,
        weight_decay=0.01,
        eps=1e-8,
        maximize=False,
    )
    assert step.item() == 1.0
    torch.testing.assert_close(p.detach(), q.detach())


def test_dynamo_disabled_calls_the_function_before_and_after_dynamo_loads():
    wrapped = compat.dynamo_disabled(lambda x: x + 1)
    assert wrapped(1) == 2
    compat.import_dynamo()
    assert wrapped(2) == 3


def test_a_dcp_folder_is_read_whole_without_a_process_group(tmp_path):
    import torch.distributed.checkpoint as dcp

    saved = {"model": {"w": torch.arange(6.0).view(2, 3)}, "optimizer": {"lr": 0.5}}
    dcp.save(saved, checkpoint_id=str(tmp_path), no_dist=True)
    state: dict = {}
    compat.dcp_read_keys(state, dcp.FileSystemReader(str(tmp_path)), {"model"})
    assert state.keys() == {"model"} and torch.equal(state["model"]["w"], saved["model"]["w"])
    compat.dcp_set_element(state, ("optimizer", "lr"), 0.5)
    assert state["optimizer"] == {"lr": 0.5}


def test_a_mesh_flattens_into_one_dimension():
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("fake", store=compat.fake_store(), rank=0, world_size=4)
    try:
        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("a", "b"))
        flat = compat.flatten_mesh(mesh, "ab")
        assert flat.size() == 4 and flat.mesh_dim_names == ("ab",)
    finally:
        dist.destroy_process_group()
