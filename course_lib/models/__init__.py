"""One model and its dataclass Config per module; :func:`count_parameters` sizes any of them."""

from __future__ import annotations

from torch import nn


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """The number of parameters of ``model`` (a tied weight counts once), or of those with
    ``requires_grad`` when ``trainable_only``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
