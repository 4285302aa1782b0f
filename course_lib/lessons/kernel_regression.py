"""Nadaraya–Watson kernel regression, lesson 03: soft attention with the score
``−(x − x_j)² / (2σ²)`` over training points, whose values are their targets."""

from __future__ import annotations

import math

import torch

from course_lib.arguments import (
    FLOATING,
    check_mask,
    check_positive_number,
    check_same_device,
    check_tensor,
    shape_of,
)
from course_lib.nn.attention import masked_softmax
from course_lib.seeding import make_generator


def regression_function(x: torch.Tensor) -> torch.Tensor:
    """The function behind the regression data, ``f(x) = 2 sin(x) + x^0.8`` (for x ≥ 0)."""
    return 2 * torch.sin(x) + x.clamp(min=0).pow(0.8)


def make_regression_data(n: int = 50, *, noise: float = 0.5, low: float = 0.0,
                         high: float = 5.0, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Noisy samples of :func:`regression_function`: ``x_j ~ U(low, high)`` (sorted),
    ``y_j = f(x_j) + ε_j``, ``ε_j ~ N(0, noise²)``.

    Shapes: returns ``x`` (n,) and ``y`` (n,), float32 on the CPU.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if noise < 0 or not high > low:
        raise ValueError(f"need noise >= 0 and high > low, got noise={noise}, low={low}, "
                         f"high={high}")
    generator = make_generator(seed)
    x = torch.sort(low + (high - low) * torch.rand(n, generator=generator)).values
    y = regression_function(x) + noise * torch.randn(n, generator=generator)
    return x, y


def nadaraya_watson(x_query: torch.Tensor, x_train: torch.Tensor, y_train: torch.Tensor,
                    bandwidth: float, *, mask: torch.Tensor | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Nadaraya–Watson kernel regression as attention pooling:

    ``f(x) = Σ_j a_j(x) y_j``, ``a_j(x) = softmax_j(−(x − x_j)² / (2σ²))``, ``σ = bandwidth``,

    i.e. soft attention whose query is ``x``, whose keys are the ``x_j`` and whose values are the
    ``y_j``, with a Gaussian kernel of bandwidth ``σ`` as the score. As ``σ → 0`` it returns the
    nearest neighbour's ``y``; as ``σ → ∞`` the global mean of ``y`` (``σ = inf`` is allowed).

    Shapes: ``x_query`` (T,), ``x_train`` (S,), ``y_train`` (S,) or (S, C), ``mask`` (T, S) or
    (1, S) bool -> predictions (T,) or (T, C), weights (T, S).
    """
    bandwidth = check_positive_number("bandwidth", bandwidth, allow_inf=True)
    for name, x in (("x_query", x_query), ("x_train", x_train), ("y_train", y_train)):
        check_tensor(name, x, dtype=FLOATING)
    check_same_device(x_query=x_query, x_train=x_train, y_train=y_train)
    if x_query.dim() != 1 or x_train.dim() != 1:
        raise ValueError(f"x_query must have shape (M,) and x_train (N,), got "
                         f"{shape_of(x_query)} and {shape_of(x_train)}")
    if y_train.dim() not in (1, 2) or y_train.shape[0] != x_train.shape[0]:
        raise ValueError(f"y_train must have shape (N,) or (N, C) with N = {x_train.shape[0]} "
                         f"(the length of x_train), got {shape_of(y_train)}")
    check_mask("mask", mask, (x_query.shape[0], x_train.shape[0]), what="(M, N)",
               device=x_query.device)
    squared = (x_query.unsqueeze(1) - x_train.unsqueeze(0)).pow(2)  # (T, 1) - (1, S) -> (T, S)
    # Softmax ignores a shift per row: subtracting each row's smallest allowed distance keeps the
    # nearest point's score at exactly 0, so even a tiny σ gives the nearest neighbour, not NaN.
    allowed = squared if mask is None else squared.masked_fill(~mask, math.inf)
    nearest = allowed.amin(dim=-1, keepdim=True)  # (T, 1)
    nearest = torch.where(torch.isfinite(nearest), nearest, torch.zeros_like(nearest))
    denominator = max(2 * bandwidth**2, torch.finfo(squared.dtype).tiny)  # σ = inf gives inf
    scores = -(squared - nearest) / denominator  # (T, S), all <= 0
    weights = masked_softmax(scores, mask)  # (T, S)
    predictions = weights @ y_train  # (T, S) @ (S,) or (S, C) -> (T,) or (T, C)
    return predictions, weights


def leave_one_out_error(x: torch.Tensor, y: torch.Tensor, bandwidth: float) -> float:
    """Mean squared error of predicting each ``y_j`` from all the other points,
    ``mean_j (y_j − f_{−j}(x_j))²``: the diagonal of the attention mask is False, so no point
    looks at itself. A fair way to choose the bandwidth. Shapes: ``x`` (S,), ``y`` (S,)."""
    if x.shape[0] < 2:
        raise ValueError(f"leave-one-out needs at least 2 points, got {x.shape[0]}")
    not_self = ~torch.eye(x.shape[0], dtype=torch.bool, device=x.device)  # (S, S)
    predictions, _ = nadaraya_watson(x, x, y, bandwidth, mask=not_self)
    return (predictions - y).pow(2).mean().item()


