"""Timing and memory measurement that every lesson and ``course bench`` share.

- :func:`paired_medians` and :func:`median_seconds`: median wall-clock seconds, calls
  interleaved round by round so that a busy machine slows each alike, with a device
  synchronize around every call (GPU work is asynchronous);
- :class:`Stopwatch`: the wall-clock seconds of one run of a block of code, device work included;
- :func:`single_thread`: one CPU thread for steadier timings of small operations;
- :func:`peak_memory`: the peak bytes a call adds, from the tensors it creates (any device) or
  from the CUDA caching allocator.
"""

from __future__ import annotations

import statistics
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from course_lib.device import synchronize


class _LiveTensorBytes(TorchDispatchMode):
    """Adds up the bytes of every new storage an operator returns while active and subtracts
    them when the last tensor using the storage is freed; ``peak`` is the largest total."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._holders: dict[int, list[int]] = {}  # storage -> [bytes, tensors alive]

    def _release(self, key: int) -> None:
        entry = self._holders.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.live -= entry[0]
            del self._holders[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        output = func(*args, **kwargs)
        inputs = None
        for tensor in tree_flatten(output)[0]:
            if not isinstance(tensor, torch.Tensor):
                continue
            storage = tensor.untyped_storage()
            key = storage._cdata
            if key not in self._holders:
                if inputs is None:
                    inputs = {t.untyped_storage()._cdata for t in tree_flatten((args, kwargs))[0]
                              if isinstance(t, torch.Tensor)}
                if key in inputs:  # a view or an in-place result of a tensor from outside
                    continue
                self._holders[key] = [storage.nbytes(), 0]
                self.live += storage.nbytes()
                self.peak = max(self.peak, self.live)
            self._holders[key][1] += 1
            weakref.finalize(tensor, self._release, key)
        return output


def peak_memory(fn: Callable[[], Any], how: str = "tensors",
                device: torch.device | str | None = None) -> int:
    """Peak bytes that ``fn()`` adds while it runs (its result is dropped at the end).

    - ``how="tensors"`` (any device, including ``meta``): the largest total size of the tensors
      created by PyTorch operators during the call that are alive at the same moment, tracked
      operator by operator. Scratch memory a kernel allocates internally and frees before it
      returns (the tiles of a fused attention kernel) is not seen, nor are allocator caches.
    - ``how="allocator"`` (CUDA only, ``device`` a CUDA device): what the CUDA caching allocator
      reports, ``torch.cuda.max_memory_allocated`` minus the bytes allocated before the call:
      everything, kernel workspaces included.
    """
    if how == "tensors":
        tracker = _LiveTensorBytes()
        with tracker:
            result = fn()
        del result
        return tracker.peak
    if how == "allocator":
        device = torch.device(device) if device is not None else None
        if device is None or device.type != "cuda":
            raise ValueError(f"how='allocator' needs a CUDA device, got {device}")
        synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        result = fn()
        synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - before
        del result
        return peak
    raise ValueError(f"how must be 'tensors' or 'allocator', got {how!r}")


@contextmanager
def single_thread(device: torch.device | str | None = None) -> Iterator[None]:
    """Run the block with one CPU thread when ``device`` is the CPU (or None), then restore
    the thread count. Timings of many small operations on a shared CPU are far steadier on
    one thread: with several, each operation waits for the slowest, possibly descheduled,
    thread. Other devices are left alone."""
    device = torch.device(device) if device is not None else None
    threads = torch.get_num_threads()
    on_cpu = device is None or device.type == "cpu"
    if on_cpu:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if on_cpu:
            torch.set_num_threads(threads)


def paired_medians(calls: dict[str, Callable[[], Any]], repeats: int, warmup: int = 1,
                   device: torch.device | str | None = None) -> dict[str, float]:
    """Median wall-clock seconds of each call over ``repeats`` rounds after ``warmup`` untimed
    ones; every round runs each call once, in turn, so a slowdown of the machine (another
    process, a frequency drop) lands on every call alike. On a GPU ``device`` each call is
    bracketed by a synchronize (GPU work is asynchronous: without it the clock measures only
    the launch)."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got {repeats} and {warmup}")
    times: dict[str, list[float]] = {name: [] for name in calls}
    for round_index in range(warmup + repeats):
        for name, call in calls.items():
            synchronize(device)
            start = time.perf_counter()
            call()
            synchronize(device)
            if round_index >= warmup:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def median_seconds(fn: Callable[[], Any], repeats: int = 5, warmup: int = 1,
                   device: torch.device | str | None = None) -> float:
    """Median wall-clock seconds of ``fn()`` (:func:`paired_medians` of one call)."""
    return paired_medians({"fn": fn}, repeats, warmup, device)["fn"]


class Stopwatch:
    """Wall-clock seconds of one run of a block, the device's queued work included::

        with Stopwatch(device) as watch:
            y = x @ x
        watch.seconds

    The device is synchronized on entry (earlier work is not counted) and on exit (GPU kernels
    run asynchronously: without it the clock would stop once they are launched, not done). One
    run is one sample; compare calls with :func:`paired_medians` instead."""

    def __init__(self, device: torch.device | str | None = None) -> None:
        self.device = device
        self._start: float | None = None
        self._seconds: float | None = None

    def __enter__(self) -> Stopwatch:
        synchronize(self.device)
        self._start = time.perf_counter()
        self._seconds = None
        return self

    def __exit__(self, *exc_info: object) -> None:
        synchronize(self.device)
        self._seconds = time.perf_counter() - self._start

    @property
    def seconds(self) -> float:
        if self._seconds is None:
            raise RuntimeError("the stopwatch is still running (or never ran): read .seconds "
                               "after the with block")
        return self._seconds
