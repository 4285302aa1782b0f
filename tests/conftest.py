"""Shared test set-up: headless plotting, the fast notebook profile, GPU-only markers."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("COURSE_PROFILE", "fast")
# Under pytest-xdist (`make test` runs two workers) each worker, and every kernel it starts,
# gets an equal share of the cores: two workers each using every core would oversubscribe them,
# which makes OpenMP spin and slows both many times over.
if os.environ.get("PYTEST_XDIST_WORKER"):
    _share = max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", 1)))
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(_share)

import pytest  # noqa: E402
import torch  # noqa: E402

if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

from course_lib.device import mps_available  # noqa: E402


def pytest_collection_modifyitems(config, items):
    skip_cuda = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
    skip_mps = pytest.mark.skip(reason="needs Apple's MPS backend")
    skip_slow = pytest.mark.skip(reason="minutes of training: run with `make test-full`")
    run_slow = config.getoption("-m") and "slow" in config.getoption("-m")
    for item in items:
        if "cuda" in item.keywords and not torch.cuda.is_available():
            item.add_marker(skip_cuda)
        if "mps" in item.keywords and not mps_available():
            item.add_marker(skip_mps)
        if "slow" in item.keywords and not run_slow:
            item.add_marker(skip_slow)


@pytest.fixture
def no_device_override(monkeypatch):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
