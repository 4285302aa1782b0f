"""Choosing the device, and moving batches onto it.

Only notebooks and the training loop call :func:`get_device`; modules take their device from
their inputs. Order of preference: the ``COURSE_DEVICE`` environment variable, then CUDA, then
Apple's MPS, then the CPU.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any, NamedTuple, TypeVar

import torch

DEVICE_ENV = "COURSE_DEVICE"
KNOWN_DEVICE_TYPES = ("cpu", "cuda", "mps")

T = TypeVar("T")


class DeviceChoice(NamedTuple):
    """The chosen device and a sentence saying why it was chosen."""

    device: torch.device
    reason: str


def mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def _parse_override(value: str) -> torch.device:
    text = value.strip().lower()
    kind, _, index = text.partition(":")
    if kind not in KNOWN_DEVICE_TYPES or (index and not index.isdigit()):
        raise ValueError(
            f"{DEVICE_ENV}={value!r} is not a device this course knows; expected one of "
            f"{', '.join(KNOWN_DEVICE_TYPES)} (optionally with an index, e.g. 'cuda:1'), "
            f"or unset it to choose automatically."
        )
    device = torch.device(text)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
            raise RuntimeError(
                f"{DEVICE_ENV}={value!r} asks for CUDA, but torch.cuda.is_available() is False "
                f"(torch {torch.__version__}, {build}). Unset {DEVICE_ENV} or install a CUDA "
                f"build of torch (README, 'GPU and other set-ups')."
            )
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise RuntimeError(
                f"{DEVICE_ENV}={value!r} asks for GPU {device.index}, but only {count} "
                f"CUDA device(s) are visible (indices 0 to {count - 1})."
            )
    if device.type == "mps" and not mps_available():
        raise RuntimeError(
            f"{DEVICE_ENV}={value!r} asks for Apple's MPS backend, which is not available here "
            f"(it needs macOS 12.3+ on Apple silicon and a torch build with MPS)."
        )
    return device


def choose_device() -> DeviceChoice:
    """Pick the device as :func:`get_device` does, and say why."""
    override = os.environ.get(DEVICE_ENV, "").strip()
    if override:
        return DeviceChoice(_parse_override(override), f"set by {DEVICE_ENV}={override}")
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        return DeviceChoice(torch.device("cuda"), f"CUDA is available ({name})")
    if mps_available():
        return DeviceChoice(torch.device("mps"), "Apple's MPS backend is available")
    return DeviceChoice(torch.device("cpu"), "no CUDA or MPS device found")


def get_device() -> torch.device:
    """The device the course runs on: ``COURSE_DEVICE``, else CUDA, else MPS, else CPU.

    Raises ``ValueError`` for an unknown override and ``RuntimeError`` for a known device that
    this machine does not have.
    """
    return choose_device().device


def to_device(batch: T, device: torch.device | str, non_blocking: bool = False) -> T:
    """Move every tensor inside a nested batch to ``device``; other values are left as they are.

    Handles tensors, mappings, lists, tuples, named tuples and dataclass instances, at any depth.
    """
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, Mapping):
        return type(batch)(
            {key: to_device(value, device, non_blocking) for key, value in batch.items()}
        )
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a named tuple
        return type(batch)(*(to_device(value, device, non_blocking) for value in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(value, device, non_blocking) for value in batch)
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        changes: dict[str, Any] = {
            field.name: to_device(getattr(batch, field.name), device, non_blocking)
            for field in dataclasses.fields(batch)
            if field.init
        }
        return dataclasses.replace(batch, **changes)
    return batch


def synchronize(device: torch.device | str | None) -> None:
    """Wait for the work queued on ``device`` (CUDA and MPS run asynchronously), so that a clock
    read afterwards sees it done. Does nothing for the CPU or None."""
    if device is None:
        return
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def bench_devices(cuda: bool | None = None) -> list[torch.device]:
    """The devices ``course bench`` measures on: always the CPU, then the first CUDA GPU when
    ``cuda`` is True, or, for ``cuda=None``, when one is available."""
    use_cuda = torch.cuda.is_available() if cuda is None else cuda
    if use_cuda and not torch.cuda.is_available():
        raise ValueError("cuda=True but torch.cuda.is_available() is False")
    return [torch.device("cpu")] + ([torch.device("cuda", 0)] if use_cuda else [])
