"""The reductions that let :func:`course_lib.train.loop.fit` run unchanged on every process of a
``torchrun`` job: every rank records the same global losses and agrees on when to stop.
Outside a distributed job the world has one process and nothing is reduced.

Under ``torchrun`` with a ``DistributedDataParallel`` model (as
:mod:`course_lib.experiments.ddp_demo` trains) the loop is the same on every rank; only three
things change, and only when ``torch.distributed`` is initialised with more than one process:

- ``train_loss`` and ``val_loss`` are means over every rank's rows (an all-reduce of the
  loss sums and row counts), so every rank records the same, global history and early
  stopping on them is decided alike on every rank;
- the ``max_time_s`` stop is agreed (an all-reduce of the maximum of a stop flag after each
  step): one rank stopping alone would leave the others waiting in their next all-reduce;
- progress bars show on rank 0 only.

If ``train_batches`` has a ``sampler`` with ``set_epoch`` (a ``DistributedSampler``), ``fit``
calls ``sampler.set_epoch(epoch - 1)`` before each epoch (else it repeats its first order).
Metrics and callbacks run on every rank as given; a metric must run on every rank too (a DDP
forward may synchronise buffers across ranks), or call ``model.module``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import distributed as dist


def world_size() -> int:
    """Processes training together: ``torch.distributed``'s world size once it is initialised
    (under ``torchrun``), else 1."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return 1


def is_main_process() -> bool:
    """True on rank 0, and in a run that is not distributed."""
    return world_size() == 1 or dist.get_rank() == 0


def sum_over_ranks(values: Sequence[float], device: torch.device) -> list[float]:
    """Each value summed over every rank (an all-reduce); every rank gets the same sums."""
    summed = torch.tensor(list(values), dtype=torch.float64, device=device)  # (len(values),)
    dist.all_reduce(summed, op=dist.ReduceOp.SUM)
    return summed.tolist()


def any_rank(flag: bool, device: torch.device) -> bool:
    """True on every rank if ``flag`` is True on any (an all-reduce of the maximum)."""
    agreed = torch.tensor([int(flag)], device=device)  # (1,)
    dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
    return bool(agreed.item())
