"""Input checks shared by the attention building blocks: each raises an error that names the
expected and the actual shape or value."""

from __future__ import annotations

import torch


def shape_of(tensor: torch.Tensor) -> tuple[int, ...]:
    """``tensor.shape`` as a plain tuple, for error messages and comparisons."""
    return tuple(tensor.shape)


def check_temperature(temperature: float) -> None:
    """A softmax temperature must be a positive number (NaN is refused too)."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")


def check_mask(mask: torch.Tensor | None, expected: tuple[int, ...], what: str) -> None:
    """``mask`` is None or a boolean tensor (True = may attend) of shape ``expected``, which
    the message calls ``what`` (for example ``"(B, N)"``)."""
    if mask is None:
        return
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a torch.bool tensor (True = may attend), got {mask.dtype}")
    if shape_of(mask) != expected:
        raise ValueError(f"mask must have shape {what} = {expected}, got {shape_of(mask)}")
