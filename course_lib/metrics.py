"""Evaluation metrics. (BLEU arrives with the translation lessons.)"""

from __future__ import annotations

import torch


def accuracy(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """Share of rows whose arg-max class equals the target.

    Shapes: ``logits`` (N, C), ``targets`` (N,) -> a float in [0, 1].
    """
    if logits.dim() != 2 or targets.shape != logits.shape[:1]:
        raise ValueError(
            f"expected logits (N, C) and targets (N,), got {tuple(logits.shape)} and "
            f"{tuple(targets.shape)}"
        )
    if targets.numel() == 0:
        raise ValueError("accuracy of an empty batch is undefined")
    return (logits.argmax(dim=-1) == targets).float().mean().item()
