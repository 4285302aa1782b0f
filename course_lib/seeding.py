"""One call that makes a run repeatable."""

from __future__ import annotations

import os
import random

import numpy as np
import torch


def seed_everything(seed: int, deterministic: bool = False) -> int:
    """Seed Python's ``random``, NumPy and torch (CPU and every GPU) with ``seed``.

    With ``deterministic=True`` torch is also asked to use deterministic kernels (slower on GPU;
    ops without a deterministic version warn instead of failing). Returns ``seed``.
    """
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
