"""Self-check helpers for exercise notebooks.

Each check prints a pass line or raises :class:`SelfCheckFailed` (an ``AssertionError``) whose
message names the exercise and says what was expected and what came instead (shape, dtype or
values, and the index of the first wrong or NaN entry), so a learner sees at once what to fix::

    check_shape("pairwise_scores", scores, (2, 3, 4))
    check_close("stable_softmax", probs, torch.softmax(x, dim=-1))
    check_close("masked_mean", means, expected, rows=[f"length {n}" for n in lengths])

``rows`` says what each row (the first index) means, and the message then names it ("row 2,
length 0"). In a notebook the traceback shows the learner's own lines and the message, not the
checker's code.
"""

from __future__ import annotations

import traceback
import types
from collections.abc import Sequence
from typing import Any

import torch


class SelfCheckFailed(AssertionError):
    """A self-check's verdict. IPython draws its traceback without the checker's own frames."""

    def _render_traceback_(self) -> list[str]:  # IPython calls this instead of its own traceback
        frames = _without_checker_frames(self.__traceback__)
        try:
            from IPython import get_ipython

            shell = get_ipython()
        except ImportError:
            shell = None
        if shell is None:
            return ["Traceback (most recent call last):",
                    *(traceback.format_tb(frames) if frames else []),
                    f"{type(self).__name__}: {self}"]
        return shell.InteractiveTB.structured_traceback(type(self), self, frames)


def _without_checker_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback ``tb`` without the frames of this module (rebuilt, innermost last)."""
    kept = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename != __file__:
            kept.append((tb.tb_frame, tb.tb_lasti, tb.tb_lineno))
        tb = tb.tb_next
    rebuilt = None
    for frame, lasti, lineno in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, frame, lasti, lineno)
    return rebuilt


def _row(index: tuple[int, ...], rows: Sequence[str] | None) -> str:
    if rows is None or not index or not 0 <= index[0] < len(rows):
        return ""
    return f" (row {index[0]}, {rows[index[0]]})"


def _as_tensor(value: Any, name: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    raise SelfCheckFailed(f"{name}: expected a torch.Tensor, got {type(value).__name__} "
                          f"({value!r:.80})")


def passed(name: str) -> None:
    print(f"✓ {name}: passed")


def check_shape(name: str, actual: Any, expected_shape: tuple[int, ...]) -> None:
    """``actual`` is a tensor of exactly ``expected_shape``."""
    actual = _as_tensor(actual, name)
    if tuple(actual.shape) != tuple(expected_shape):
        raise SelfCheckFailed(f"{name}: expected shape {tuple(expected_shape)}, "
                              f"got {tuple(actual.shape)}")
    passed(f"{name} shape {tuple(expected_shape)}")


def check_close(name: str, actual: Any, expected: torch.Tensor, *, rtol: float = 1e-5,
                atol: float = 1e-6, rows: Sequence[str] | None = None) -> None:
    """``actual`` matches ``expected`` in shape, dtype kind and values (to tolerance), no NaN.
    ``rows`` describes each row (first index) for the message."""
    actual = _as_tensor(actual, name)
    if actual.shape != expected.shape:
        raise SelfCheckFailed(f"{name}: expected shape {tuple(expected.shape)}, "
                              f"got {tuple(actual.shape)}")
    if actual.is_floating_point() != expected.is_floating_point():
        raise SelfCheckFailed(f"{name}: expected dtype {expected.dtype}, got {actual.dtype}")
    actual_cpu, expected_cpu = actual.detach().cpu(), expected.detach().cpu()
    unexpected_nan = torch.isnan(actual_cpu) & ~torch.isnan(expected_cpu)
    if unexpected_nan.any():
        index = tuple(int(i) for i in torch.nonzero(unexpected_nan)[0])
        raise SelfCheckFailed(f"{name}: the result contains NaN, first at index {index}"
                              f"{_row(index, rows)}, where {expected_cpu[index].item():.6g} "
                              f"was expected")
    if not torch.allclose(actual_cpu.to(expected_cpu.dtype), expected_cpu, rtol=rtol, atol=atol,
                          equal_nan=True):
        difference = (actual_cpu.to(expected_cpu.dtype) - expected_cpu).abs()
        index = tuple(int(i) for i in torch.nonzero(difference == difference.max())[0])
        raise SelfCheckFailed(
            f"{name}: values differ; largest difference {difference.max().item():.3g} at index "
            f"{index}{_row(index, rows)}: expected {expected_cpu[index].item():.6g}, got "
            f"{actual_cpu[index].item():.6g}")
    passed(name)


def check_equal(name: str, actual: Any, expected: Any, *,
                rows: Sequence[str] | None = None) -> None:
    """Exact equality, for tensors (shape, dtype and every value) and plain Python values.
    ``rows`` describes each row (first index) for the message."""
    if isinstance(expected, torch.Tensor):
        actual = _as_tensor(actual, name)
        if actual.shape != expected.shape:
            raise SelfCheckFailed(f"{name}: expected shape {tuple(expected.shape)}, "
                                  f"got {tuple(actual.shape)}")
        if actual.dtype != expected.dtype:
            raise SelfCheckFailed(f"{name}: expected dtype {expected.dtype}, got {actual.dtype}")
        if not torch.equal(actual.cpu(), expected.cpu()):
            wrong = torch.nonzero(actual.cpu() != expected.cpu())[0]
            index = tuple(int(i) for i in wrong)
            raise SelfCheckFailed(f"{name}: wrong value at index {index}{_row(index, rows)}: "
                                  f"expected {expected.cpu()[index].item()}, got "
                                  f"{actual.cpu()[index].item()}")
    elif actual != expected:
        raise SelfCheckFailed(f"{name}: expected {expected!r}, got {actual!r}")
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
        raise SelfCheckFailed(f"{name}: expected {error.__name__}, got "
                              f"{type(other).__name__}: {other}") from None
    raise SelfCheckFailed(f"{name}: expected {error.__name__}, but nothing was raised")
