"""One call that makes a run repeatable, and the thread count that keeps it so.

On the CPU, PyTorch's matrix products and convolutions split their sums over the intra-op
threads, and floating-point sums depend on their order: the same seed gives bitwise the same
model only with the same number of threads (and the same torch build and CPU instruction set).
``course reproduce`` therefore trains with a fixed count, :data:`REPRODUCE_THREADS`, whatever
the machine has (:func:`fixed_threads`).
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

DETERMINISTIC_ENV = "COURSE_DETERMINISTIC"


def seed_everything(seed: int, deterministic: bool | None = None) -> int:
    """Seed Python's ``random``, NumPy and torch (CPU and every GPU) with ``seed``.

    With ``deterministic=True`` torch is also asked to use deterministic kernels (slower on GPU;
    ops without a deterministic version warn instead of failing). None (the default) takes it
    from the environment: ``COURSE_DETERMINISTIC=1``. CPU kernels are deterministic already;
    on CUDA, atomic additions in some backward passes and cuBLAS's workspace otherwise vary
    from run to run. Returns ``seed``.
    """
    if deterministic is None:
        deterministic = os.environ.get(DETERMINISTIC_ENV, "").strip().lower() in ("1", "true")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an int in [0, 2**32), got {seed!r}")
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - the legacy global RNG is what learners' code uses
    torch.manual_seed(seed)  # also seeds every CUDA device
    os.environ["PYTHONHASHSEED"] = str(seed)  # for subprocesses such as DataLoader workers
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    return seed


def make_generator(seed: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with ``seed``, for data generators (CPU tensors)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator


# Intra-op threads of every `course reproduce` run: the count its numbers are documented with.
# One thread splits no sum, gives the same bits on any number of cores, and leaves a laptop's
# other cores free; `course reproduce all --jobs N` runs N such runs side by side.
REPRODUCE_THREADS = 1


@contextmanager
def fixed_threads(threads: int) -> Iterator[None]:
    """Run the block with ``threads`` intra-op torch threads, then restore the previous count.

    The count, not the cores, fixes how sums are split, so a run gives the same bits on a 2-core
    laptop and a 64-core server (the second is just not faster)."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive int, got {threads!r}")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
