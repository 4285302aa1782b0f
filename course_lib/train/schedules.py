"""Learning-rate schedules, counted in optimiser steps so that they run alike on every machine:
a cosine decay over a step budget and the Transformer paper's warm-up then 1/√step."""

from __future__ import annotations

import math

import torch


def cosine_decay(optimizer: torch.optim.Optimizer, total_steps: int,
                 final_fraction: float = 0.05) -> torch.optim.lr_scheduler.LambdaLR:
    """A cosine learning-rate decay over ``total_steps`` optimiser steps:

        lr(n) = lr₀ · (f + (1 − f) · ½ · (1 + cos(π · min(1, n / total_steps))))

    with n the steps already taken and f = ``final_fraction``: lr₀ at the first step, f · lr₀
    from step ``total_steps`` on. Counted in steps, it decays the same way on every machine.
    """
    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"total_steps must be a positive int, got {total_steps!r}")
    if not 0.0 <= final_fraction <= 1.0:
        raise ValueError(f"final_fraction must lie in [0, 1], got {final_fraction}")

    def factor(done: int) -> float:
        progress = min(1.0, done / total_steps)
        return final_fraction + (1.0 - final_fraction) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def transformer_lr(step: int, d_model: int, warmup_steps: int) -> float:
    """The Transformer paper's rate (Vaswani et al., 2017, eq. 3), step counted from 1:

        lr = D^(-1/2) · min(step^(-1/2), step · warmup^(-3/2))

    It rises linearly for ``warmup_steps`` steps, peaks at (D · warmup)^(-1/2), then decays as
    1/√step."""
    if step < 1 or d_model < 1 or warmup_steps < 1:
        raise ValueError(f"step, d_model and warmup_steps must be at least 1, got {step}, "
                         f"{d_model} and {warmup_steps}")
    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def warmup_inverse_sqrt(optimizer: torch.optim.Optimizer, warmup_steps: int
                        ) -> torch.optim.lr_scheduler.LambdaLR:
    """The paper's schedule scaled to peak at the optimiser's own rate lr₀:

        lr(step) = lr₀ · min(step / warmup, √(warmup / step)) = lr₀ · transformer_lr(step) /
                   transformer_lr(warmup)

    (the first optimiser step is step 1). Warm-up keeps Adam's early, badly estimated updates
    small while post-norm layers settle."""
    if warmup_steps < 1:
        raise ValueError(f"warmup_steps must be at least 1, got {warmup_steps}")

    def factor(done: int) -> float:
        step = done + 1  # LambdaLR calls with the number of steps already taken
        return min(step / warmup_steps, math.sqrt(warmup_steps / step))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
