"""A mesh of several ranks in this one process, on torch's fake process group (collectives do nothing): plans split
real modules on it, and the trainer's refusals are raised as they would be under torchrun."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch.distributed as dist

from zoo import compat


@contextlib.contextmanager
def fake_ranks(size: int) -> Iterator[Any]:
    """A 1-D mesh of ``size`` ranks, this process rank 0; the process group ends with the block."""
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("fake", store=compat.fake_store(), rank=0, world_size=size)
    try:
        yield init_device_mesh("cpu", (size,))
    finally:
        dist.destroy_process_group()
