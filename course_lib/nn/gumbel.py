"""Sampling one item of a categorical distribution with Gumbel noise.

- :func:`gumbel_noise`: ``g = −log(−log u)``, ``u ~ Uniform(0, 1)``;
- :func:`gumbel_max_sample`: ``j* = argmax_j (log a_j + g_j)`` is a draw from ``a`` (Gumbel-max);
- :func:`sample_item`: the draw and ``log a_{j*}``, for REINFORCE;
- :func:`straight_through_gumbel`: the one-hot draw ``â`` forward, the gradient of the relaxed
  ``ã = softmax((e + g)/τ)`` backward (Jang et al., 2017; Maddison et al., 2017).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from course_lib.arguments import (
    FLOATING,
    check_mask,
    check_temperature,
    check_tensor,
    shape_of,
)


def gumbel_noise(shape: Sequence[int], *, generator: torch.Generator | None = None,
                 dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None) -> torch.Tensor:
    """Standard Gumbel noise, ``g = −log(−log u)``, ``u ~ Uniform(0, 1)``.

    The uniform draw is made on the generator's device (CPU for :func:`make_generator`), in
    float64 there when that device is the CPU (a float16 or float32 ``u`` is too coarse in the
    tails), then cast to ``dtype`` and moved to ``device`` (default: the generator's device).

    Shapes: returns ``shape``.
    """
    source = torch.device(generator.device if generator is not None else device or "cpu")
    draw = torch.float64 if source.type == "cpu" else torch.float32
    uniform = torch.rand(tuple(shape), generator=generator, dtype=draw, device=source)
    uniform = uniform.clamp(min=torch.finfo(draw).tiny)  # u = 0 would give g = −inf
    noise = -torch.log(-torch.log(uniform))
    return noise.to(dtype=dtype, device=device if device is not None else source)


def gumbel_max_sample(logits: torch.Tensor, *, mask: torch.Tensor | None = None,
                      generator: torch.Generator | None = None) -> torch.Tensor:
    """One sample per row from ``softmax(logits)`` by the Gumbel-max trick:
    ``j* = argmax_j (logits_j + g_j)``, ``g_j ~ Gumbel(0, 1)``.

    Since ``log a_j = logits_j − log Σ_j' exp(logits_j')`` differs from ``logits_j`` by a
    constant per row, this is ``argmax_j (log a_j + g_j)`` and ``P(j* = j) = a_j``. Masked items
    are never drawn. A fully masked row returns index 0 (callers zero its weights).

    Shapes: ``logits`` (B, S), ``mask`` (B, S) bool -> indices (B,) int64.
    """
    check_tensor("logits", logits, dtype=FLOATING, shape=("B", "S"))
    check_mask("mask", mask, shape_of(logits), what="(B, S)", scores="logits",
               device=logits.device)
    dtype = torch.promote_types(logits.dtype, torch.float32)  # fp16 uniforms are too coarse
    noise = gumbel_noise(shape_of(logits), generator=generator, dtype=dtype,
                         device=logits.device)  # (B, S)
    perturbed = logits.detach().to(dtype) + noise
    if mask is not None:
        perturbed = perturbed.masked_fill(~mask, -math.inf)
    return perturbed.argmax(dim=-1)


class _StraightThrough(torch.autograd.Function):
    """Forward: the hard value. Backward: the gradient goes to the soft value unchanged."""

    @staticmethod
    def forward(ctx, hard: torch.Tensor, soft: torch.Tensor) -> torch.Tensor:
        return hard.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return None, grad


def straight_through_gumbel(scores: torch.Tensor, temperature: float = 1.0,
                            generator: torch.Generator | None = None,
                            mask: torch.Tensor | None = None) -> torch.Tensor:
    """One-hot ``â = onehot(argmax_j (e_j + g_j))`` forward, gradient of ``ã = softmax((e + g)/τ)``.

    Returns ``â`` exactly in value, with the gradient of ``ã`` (what ``â + ã − stopgrad(ã)``
    does, without its rounding error in the forward value). Masked items
    (False) are never picked. Shapes: ``scores`` (B, S) -> weights (B, S).
    """
    check_temperature(temperature)
    check_tensor("scores", scores, dtype=FLOATING, shape=("B", "S"))
    check_mask("mask", mask, shape_of(scores), what="(B, S)", device=scores.device)
    perturbed = scores + gumbel_noise(scores.shape, generator=generator, dtype=scores.dtype,
                         device=scores.device)
    if mask is not None:
        perturbed = perturbed.masked_fill(~mask, torch.finfo(scores.dtype).min)
    soft = torch.softmax(perturbed / temperature, dim=-1)
    hard = torch.zeros_like(soft).scatter(-1, perturbed.argmax(dim=-1, keepdim=True), 1.0)
    return _StraightThrough.apply(hard, soft)


def sample_item(scores: torch.Tensor, generator: torch.Generator | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """``j* ~ Categorical(a = softmax(e))`` (Gumbel-max) and ``log a_{j*}``, differentiable in
    ``e``.

    Shapes: ``scores`` (B, S) -> index (B,), log-probability (B,).
    """
    check_tensor("scores", scores, dtype=FLOATING, shape=("B", "S"))
    index = (scores.detach() + gumbel_noise(scores.shape, generator=generator, dtype=scores.dtype,
                         device=scores.device)).argmax(-1)
    log_prob = torch.log_softmax(scores, dim=-1).gather(-1, index.unsqueeze(-1)).squeeze(-1)
    return index, log_prob
