"""Device choice: ``COURSE_DEVICE`` overrides, then CUDA, MPS and CPU; bad overrides are
explained; tensors move with ``to_device``."""

from collections import namedtuple
from dataclasses import dataclass

import pytest
import torch

from course_lib import device as device_mod
from course_lib.device import choose_device, get_device, synchronize, to_device


def test_override_cpu(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    choice = choose_device()
    assert choice.device == torch.device("cpu")
    assert "COURSE_DEVICE" in choice.reason


def test_unknown_override_names_the_choices(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "tpu")
    with pytest.raises(ValueError, match=r"'tpu'.*cpu, cuda, mps"):
        get_device()


def test_malformed_index_is_refused(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cuda:x")
    with pytest.raises(ValueError, match="cuda:x"):
        get_device()


def test_cuda_override_without_cuda_explains(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="torch.cuda.is_available\\(\\) is False"):
        get_device()


def test_cuda_index_beyond_count(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cuda:3")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(RuntimeError, match="GPU 3.*only 1"):
        get_device()


def test_mps_override_without_mps(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "mps")
    monkeypatch.setattr(device_mod, "mps_available", lambda: False)
    with pytest.raises(RuntimeError, match="MPS"):
        get_device()


@pytest.mark.parametrize(
    ("cuda", "mps", "expected"),
    [(True, True, "cuda"), (False, True, "mps"), (False, False, "cpu")],
)
def test_preference_order(monkeypatch, no_device_override, cuda, mps, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "Fake GPU")
    monkeypatch.setattr(device_mod, "mps_available", lambda: mps)
    choice = choose_device()
    assert choice.device.type == expected
    assert choice.reason


def test_blank_override_means_automatic(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "  ")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(device_mod, "mps_available", lambda: False)
    assert get_device() == torch.device("cpu")


Pair = namedtuple("Pair", "src tgt")


@dataclass
class Batch:
    tokens: torch.Tensor
    lengths: list
    name: str = "b"


def test_to_device_moves_nested_tensors_and_keeps_types():
    batch = {
        "pair": Pair(torch.ones(2), torch.zeros(3)),
        "list": [torch.ones(1), ("text", torch.ones(2, 2))],
        "dc": Batch(torch.ones(4), [torch.ones(1)]),
        "plain": 7,
    }
    moved = to_device(batch, "meta")
    assert isinstance(moved["pair"], Pair)
    assert moved["pair"].src.device.type == "meta"
    assert moved["pair"].tgt.shape == (3,)
    assert isinstance(moved["list"][1], tuple)
    assert moved["list"][1][0] == "text"
    assert moved["list"][1][1].device.type == "meta"
    assert isinstance(moved["dc"], Batch)
    assert moved["dc"].tokens.device.type == "meta"
    assert moved["dc"].lengths[0].device.type == "meta"
    assert moved["dc"].name == "b"
    assert moved["plain"] == 7
    # The input is left untouched.
    assert batch["pair"].src.device.type == "cpu"


@pytest.mark.cuda
def test_get_device_prefers_cuda_when_present(no_device_override):
    assert get_device().type == "cuda"
    assert to_device(torch.ones(2), get_device()).is_cuda


@pytest.mark.mps
def test_get_device_uses_mps_on_macs(no_device_override, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert get_device().type == "mps"


def test_synchronize_waits_only_on_asynchronous_devices(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    synchronize(None)
    synchronize("cpu")
    assert calls == []
    synchronize("cuda:0")
    assert calls == [torch.device("cuda:0")]


def test_bench_devices_are_the_cpu_then_a_gpu_only_when_present():
    from course_lib.device import bench_devices

    assert bench_devices(cuda=False) == [torch.device("cpu")]
    if not torch.cuda.is_available():
        assert bench_devices() == [torch.device("cpu")]
        with pytest.raises(ValueError, match="torch.cuda.is_available"):
            bench_devices(cuda=True)
    else:
        assert bench_devices() == [torch.device("cpu"), torch.device("cuda", 0)]
