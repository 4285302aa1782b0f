"""One model and its dataclass Config per module; :func:`count_parameters` sizes any of them."""

from __future__ import annotations

from torch import nn


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """The number of parameters of ``model`` (a tied weight counts once), or of those with
    ``requires_grad`` when ``trainable_only``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def parameters_by_part(model: nn.Module) -> dict[str, int]:
    """Parameters per top-level submodule (the first part of each parameter's name), in the
    model's order; a tied weight counts once, under the part that registers it first, so the
    parts add up to :func:`count_parameters`."""
    counts: dict[str, int] = {}
    for name, parameter in model.named_parameters():
        part = name.split(".")[0]
        counts[part] = counts.get(part, 0) + parameter.numel()
    return counts
