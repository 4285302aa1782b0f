"""Self-check helpers for exercise notebooks.

Each check prints a pass line or raises ``AssertionError`` whose message names the exercise and
says what was expected and what came instead (shape, dtype or values), so a learner sees at once
what to fix::

    check_shape("pairwise_scores", scores, (2, 3, 4))
    check_close("stable_softmax", probs, torch.softmax(x, dim=-1))
"""

from __future__ import annotations

from typing import Any

import torch


def _as_tensor(value: Any, name: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    raise AssertionError(f"{name}: expected a torch.Tensor, got {type(value).__name__} "
                         f"({value!r:.80})")


def passed(name: str) -> None:
    print(f"✓ {name}: passed")


def check_shape(name: str, actual: Any, expected_shape: tuple[int, ...]) -> None:
    """``actual`` is a tensor of exactly ``expected_shape``."""
    actual = _as_tensor(actual, name)
    if tuple(actual.shape) != tuple(expected_shape):
        raise AssertionError(f"{name}: expected shape {tuple(expected_shape)}, "
                             f"got {tuple(actual.shape)}")
    passed(f"{name} shape {tuple(expected_shape)}")


def check_close(name: str, actual: Any, expected: torch.Tensor, *, rtol: float = 1e-5,
                atol: float = 1e-6) -> None:
    """``actual`` matches ``expected`` in shape, dtype kind and values (to tolerance), no NaN."""
    actual = _as_tensor(actual, name)
    if actual.shape != expected.shape:
        raise AssertionError(f"{name}: expected shape {tuple(expected.shape)}, "
                             f"got {tuple(actual.shape)}")
    if actual.is_floating_point() != expected.is_floating_point():
        raise AssertionError(f"{name}: expected dtype {expected.dtype}, got {actual.dtype}")
    actual_cpu, expected_cpu = actual.detach().cpu(), expected.detach().cpu()
    if torch.isnan(actual_cpu).any() and not torch.isnan(expected_cpu).any():
        raise AssertionError(f"{name}: the result contains NaN")
    if not torch.allclose(actual_cpu.to(expected_cpu.dtype), expected_cpu, rtol=rtol, atol=atol,
                          equal_nan=True):
        difference = (actual_cpu.to(expected_cpu.dtype) - expected_cpu).abs()
        index = tuple(int(i) for i in torch.nonzero(difference == difference.max())[0])
        raise AssertionError(
            f"{name}: values differ; largest difference {difference.max().item():.3g} at index "
            f"{index}: expected {expected_cpu[index].item():.6g}, got "
            f"{actual_cpu[index].item():.6g}")
    passed(name)


def check_equal(name: str, actual: Any, expected: Any) -> None:
    """Exact equality, for tensors (shape, dtype and every value) and plain Python values."""
    if isinstance(expected, torch.Tensor):
        actual = _as_tensor(actual, name)
        if actual.shape != expected.shape:
            raise AssertionError(f"{name}: expected shape {tuple(expected.shape)}, "
                                 f"got {tuple(actual.shape)}")
        if actual.dtype != expected.dtype:
            raise AssertionError(f"{name}: expected dtype {expected.dtype}, got {actual.dtype}")
        if not torch.equal(actual.cpu(), expected.cpu()):
            wrong = torch.nonzero(actual.cpu() != expected.cpu())[0]
            index = tuple(int(i) for i in wrong)
            raise AssertionError(f"{name}: wrong value at index {index}: expected "
                                 f"{expected.cpu()[index].item()}, got "
                                 f"{actual.cpu()[index].item()}")
    elif actual != expected:
        raise AssertionError(f"{name}: expected {expected!r}, got {actual!r}")
    passed(name)


def check_raises(name: str, error: type[BaseException], function: Any, *args: Any,
                 **kwargs: Any) -> None:
    """Calling ``function(*args, **kwargs)`` raises ``error``."""
    try:
        function(*args, **kwargs)
    except error:
        passed(f"{name} raises {error.__name__}")
        return
    except Exception as other:  # noqa: BLE001 - any other exception is the wrong answer
        raise AssertionError(f"{name}: expected {error.__name__}, got "
                             f"{type(other).__name__}: {other}") from None
    raise AssertionError(f"{name}: expected {error.__name__}, but nothing was raised")
