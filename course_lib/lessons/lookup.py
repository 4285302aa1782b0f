"""Attention as a lookup: the prototypes of lesson 03.

A query ``q`` is compared with the key ``k_j`` of every item ``j = 1..S`` of a set; the
comparison decides how much of each item's value ``v_j`` comes back. Vectors are columns and
``K`` holds the keys as rows, so the scores are ``K q``; the code stores a batch of queries as the
rows of a (B, d) tensor.

- *Soft* attention returns a convex combination of the values,
  ``a = softmax(K q / τ)``, ``output = Σ_j a_j v_j``; it is differentiable in ``q`` and ``K``.
- *Hard* attention returns the single best item, ``output = v_{j*}``, ``j* = argmax_j k_j·q``;
  its output is piecewise constant in ``q``, so its gradient is zero almost everywhere.
- *Stochastic* hard attention samples one item with probabilities ``a`` by the Gumbel-max trick,
  ``j* = argmax_j (log a_j + g_j)``, ``g_j ~ Gumbel(0, 1)``.

Nadaraya–Watson kernel regression (:mod:`course_lib.lessons.kernel_regression`) and a document
that answers questions (:mod:`course_lib.lessons.document_qa`) are the lesson's other two
prototypes; Gumbel sampling is :mod:`course_lib.nn.gumbel`.

Masks are boolean with True = "may attend". Masked items get exactly zero weight; a fully masked
row gets all-zero weights and a zero output (never NaN). Every function takes its device from
its inputs; the data generators return CPU tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from course_lib.arguments import (
    FLOATING,
    check_choice,
    check_mask,
    check_same_device,
    check_temperature,
    check_tensor,
    shape_of,
)
from course_lib.nn.attention import masked_softmax
from course_lib.nn.gumbel import gumbel_max_sample
from course_lib.seeding import make_generator

# Soft, hard and sampled attention over a set of items


def check_lookup_shapes(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                        mask: torch.Tensor | None = None) -> tuple[int, int, int]:
    """Raise ``ValueError`` naming expected and actual shapes unless they fit together.

    Shapes: ``query`` (B, d), ``keys`` (B, S, d), ``values`` (B, S, d_v), ``mask`` (B, S) bool
    (each dimension may be 1). Returns ``(B, S, d)``.
    """
    for name, x in (("query", query), ("keys", keys), ("values", values)):
        check_tensor(name, x, dtype=FLOATING)
    check_same_device(query=query, keys=keys, values=values)
    if keys.dim() != 3:
        raise ValueError(f"keys must have shape (B, S, d), got {shape_of(keys)}")
    batch, items, dim = keys.shape
    if shape_of(query) != (batch, dim):
        raise ValueError(f"query must have shape (B, d) = ({batch}, {dim}) to match keys "
                         f"{shape_of(keys)}, got {shape_of(query)}")
    if values.dim() != 3 or shape_of(values)[:2] != (batch, items):
        raise ValueError(f"values must have shape (B, S, d_v) = ({batch}, {items}, d_v) to match "
                         f"keys {shape_of(keys)}, got {shape_of(values)}")
    check_mask("mask", mask, (batch, items), what="(B, S)", device=keys.device)
    return batch, items, dim


def lookup_scores(query: torch.Tensor, keys: torch.Tensor,
                  temperature: float = 1.0) -> torch.Tensor:
    """Dot-product match of the query with every key, ``e_j = k_j · q / τ``.

    Shapes: ``query`` (B, d), ``keys`` (B, S, d) -> scores (B, S).
    """
    check_temperature(temperature)
    check_tensor("query", query, dtype=FLOATING)
    check_tensor("keys", keys, dtype=FLOATING)
    if keys.dim() != 3 or shape_of(query) != (keys.shape[0], keys.shape[2]):
        raise ValueError(f"query (B, d) and keys (B, S, d) do not fit: got query "
                         f"{shape_of(query)} and keys {shape_of(keys)}")
    scores = keys @ query.unsqueeze(-1)  # (B, S, d) @ (B, d, 1) -> (B, S, 1)
    return scores.squeeze(-1) / temperature  # (B, S)


def soft_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, *,
                   mask: torch.Tensor | None = None,
                   temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Soft attention pooling: ``a = softmax(K q / τ)``, ``output = Σ_j a_j v_j = Vᵀ a``.

    The output is a convex combination of the values (weights ≥ 0, summing to one) and is
    differentiable in the query, the keys and the values. Lower ``τ`` sharpens the weights
    towards the best match; higher ``τ`` flattens them towards the plain mean.

    Shapes: ``query`` (B, d), ``keys`` (B, S, d), ``values`` (B, S, d_v), ``mask`` (B, S) bool
    -> output (B, d_v), weights (B, S).
    """
    check_lookup_shapes(query, keys, values, mask)
    weights = masked_softmax(lookup_scores(query, keys, temperature), mask)  # (B, S)
    output = (weights.unsqueeze(1) @ values).squeeze(1)  # (B, 1, S) @ (B, S, d_v) -> (B, d_v)
    return output, weights


def _one_hot_output(index: torch.Tensor, values: torch.Tensor, scores: torch.Tensor,
                    mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """One-hot weights at ``index`` (zero for fully masked rows) and the values they select."""
    weights = torch.zeros_like(scores).scatter(-1, index.unsqueeze(-1), 1.0)  # (B, S)
    if mask is not None:
        weights = weights * mask.any(dim=-1, keepdim=True)  # fully masked rows -> all zeros
    output = (weights.unsqueeze(1) @ values).squeeze(1)  # (B, 1, S) @ (B, S, d_v) -> (B, d_v)
    return output, weights


def hard_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, *,
                   mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Hard attention: ``j* = argmax_j k_j · q`` over allowed items, ``output = v_{j*}``.

    The weights are one-hot. ``argmax`` is piecewise constant in the query, so no gradient
    reaches the query or the keys (autograd sees no path). Ties go to the first best item.

    Shapes: ``query`` (B, d), ``keys`` (B, S, d), ``values`` (B, S, d_v), ``mask`` (B, S) bool
    -> output (B, d_v), one-hot weights (B, S).
    """
    check_lookup_shapes(query, keys, values, mask)
    scores = lookup_scores(query, keys).detach()  # (B, S); argmax has no gradient anyway
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    return _one_hot_output(scores.argmax(dim=-1), values, scores, mask)


def sample_hard_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, *,
                          generator: torch.Generator | None = None,
                          mask: torch.Tensor | None = None,
                          temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Stochastic hard attention: draw ``j* ~ a = softmax(K q / τ)`` with Gumbel noise,
    ``j* = argmax_j (log a_j + g_j)``, and return ``v_{j*}``.

    On average the output equals soft attention's, ``E[v_{j*}] = Σ_j a_j v_j``, but each draw
    is one whole item. Pass a seeded ``torch.Generator`` for repeatable draws.

    Shapes: ``query`` (B, d), ``keys`` (B, S, d), ``values`` (B, S, d_v), ``mask`` (B, S) bool
    -> output (B, d_v), one-hot weights (B, S).
    """
    check_lookup_shapes(query, keys, values, mask)
    scores = lookup_scores(query, keys, temperature).detach()  # (B, S)
    index = gumbel_max_sample(scores, mask=mask, generator=generator)  # (B,)
    return _one_hot_output(index, values, scores, mask)


# A generated lookup task: hard versus soft attention, and their gradients


@dataclass
class LookupTask:
    """Sets of items and one query per set; the answer is the value of item ``targets[b]``.

    Shapes: ``keys`` (B, S, d), ``values`` (B, S, d_v), ``queries`` (B, d), ``targets`` (B,).
    """

    keys: torch.Tensor
    values: torch.Tensor
    queries: torch.Tensor
    targets: torch.Tensor

    @property
    def answers(self) -> torch.Tensor:
        """The value of the target item of every set. Shape: (B, d_v)."""
        rows = torch.arange(self.values.shape[0], device=self.values.device)
        return self.values[rows, self.targets]  # (B, d_v)

    def __len__(self) -> int:
        return self.keys.shape[0]


def random_rotation(dim: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """A random orthogonal matrix (its transpose is its inverse), from the QR decomposition of a
    Gaussian matrix with the signs fixed so that it is uniformly distributed. Shape: (dim, dim)."""
    gaussian = torch.randn(dim, dim, generator=generator)
    q, r = torch.linalg.qr(gaussian)
    return q * torch.sign(torch.diagonal(r)).unsqueeze(0)  # (dim, dim)


def make_lookup_task(n_examples: int = 256, n_items: int = 8, dim: int = 16,
                     value_dim: int | None = None, *, noise: float = 0.3,
                     rotate: bool = False, seed: int = 0) -> LookupTask:
    """Generate a key–query lookup task: each set holds ``S = n_items`` random keys ``k_j`` (unit
    length on average) with random values ``v_j``; the query is a noisy copy of the key of one
    item ``j*``, ``q = k_{j*} + ε``, ``ε ~ N(0, noise² / d)``, and the answer is ``v_{j*}``.

    With ``rotate=True`` the query lives in another coordinate system, ``q = R (k_{j*} + ε)``
    for one random rotation ``R`` shared by the whole task (the code multiplies the rows of the
    queries by ``Rᵀ``, drawn by :func:`random_rotation`): plain dot products no longer find the
    item, but a learned query map ``W = Rᵀ`` does (see :func:`train_query_map`).

    Shapes: returns a :class:`LookupTask` of CPU tensors, ``keys`` (B, S, d), ``values``
    (B, S, d_v), ``queries`` (B, d), ``targets`` (B,) int64.
    """
    if n_examples < 1 or n_items < 1 or dim < 1:
        raise ValueError(f"n_examples, n_items and dim must be at least 1, got {n_examples}, "
                         f"{n_items}, {dim}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    value_dim = dim if value_dim is None else value_dim
    generator = make_generator(seed)
    keys = torch.randn(n_examples, n_items, dim, generator=generator) / math.sqrt(dim)
    values = torch.randn(n_examples, n_items, value_dim, generator=generator)
    targets = torch.randint(n_items, (n_examples,), generator=generator)
    queries = keys[torch.arange(n_examples), targets]  # (B, d)
    queries = queries + noise / math.sqrt(dim) * torch.randn(queries.shape, generator=generator)
    if rotate:
        queries = queries @ random_rotation(dim, generator=generator)  # (B, d): rows times Rᵀ
    return LookupTask(keys=keys, values=values, queries=queries, targets=targets)


def lookup_loss(output: torch.Tensor, task: LookupTask) -> torch.Tensor:
    """Mean squared distance to the right answer, ``ℒ = mean_b ‖output_b − v_{j*_b}‖²``, where
    ``j*_b = targets[b]``."""
    return (output - task.answers).pow(2).sum(dim=-1).mean()


def lookup_accuracy(weights: torch.Tensor, task: LookupTask) -> float:
    """Fraction of sets whose largest attention weight is on the target item."""
    return (weights.argmax(dim=-1) == task.targets).float().mean().item()


def lookup_gradient_norms(task: LookupTask, *, temperature: float = 0.2,
                          eps: float = 1e-3) -> dict[str, float]:
    """How much the loss :func:`lookup_loss` of hard and soft attention changes with the query.

    Measured twice: with autograd (``∂ℒ/∂q``; for hard attention autograd finds no path from the
    loss to the query, which counts as zero) and by central finite differences, which move one
    component ``q_i`` at a time by ``±ε`` (``ε = eps``),
    ``∂ℒ/∂q_i ≈ (ℒ(…, q_i + ε, …) − ℒ(…, q_i − ε, …)) / 2ε``, and need no autograd at all.
    Returns the mean over sets of the per-set gradient norm ``‖∂ℒ_b/∂q_b‖``, for the keys
    ``soft_autograd``, ``soft_finite_difference``, ``hard_autograd`` and
    ``hard_finite_difference``. Soft attention has a useful gradient; hard attention's is zero
    except in the rare set whose argmax flips within ``±ε``.
    """
    queries = task.queries.detach().clone().requires_grad_(True)
    keys, values, answers = task.keys, task.values, task.answers

    def per_set_losses(attend, q: torch.Tensor) -> torch.Tensor:
        output, _ = attend(q, keys, values)
        return (output - answers).pow(2).sum(dim=-1)  # (B,)

    def soft(q, k, v):
        return soft_attention(q, k, v, temperature=temperature)

    norms = {}
    for name, attend in (("soft", soft), ("hard", hard_attention)):
        losses = per_set_losses(attend, queries)
        if losses.requires_grad:
            (grad,) = torch.autograd.grad(losses.sum(), queries)  # (B, d)
        else:  # argmax cut the graph: the loss does not depend on q as far as autograd knows
            grad = torch.zeros_like(queries)
        norms[f"{name}_autograd"] = grad.norm(dim=-1).mean().item()
        with torch.no_grad():
            columns = []
            for j in range(queries.shape[-1]):
                step = torch.zeros_like(queries)
                step[:, j] = eps
                difference = per_set_losses(attend, queries + step) - per_set_losses(
                    attend, queries - step)  # (B,)
                columns.append(difference / (2 * eps))
            finite = torch.stack(columns, dim=-1)  # (B, d)
        norms[f"{name}_finite_difference"] = finite.norm(dim=-1).mean().item()
    return norms


def train_query_map(task: LookupTask, *, mode: str = "soft", steps: int = 100, lr: float = 0.5,
                    temperature: float = 0.1, seed: int = 0) -> tuple[list[float], torch.Tensor]:
    """Learn a query map ``W`` by plain gradient descent, ``W ← W − η ∂ℒ/∂W``, so that attention
    with scores ``K (W q)`` returns the right answer; ``ℒ`` is :func:`lookup_loss` of ``mode``
    attention (``"soft"`` or ``"hard"``), and ``W`` starts small and random.

    On a ``rotate=True`` task soft attention learns a multiple of ``Rᵀ`` (the ``R`` of
    :func:`make_lookup_task`); with hard attention the gradient is zero, so ``W`` never moves
    and the loss stays where it started. Runs on the task's device.

    Shapes: ``W`` (d, d), applied to a column query as ``q ↦ W q`` (in code ``queries @ W.T``,
    the queries being rows). Returns the loss before every step and ``W``.
    """
    check_choice("mode", mode, ("soft", "hard"))
    dim = task.queries.shape[-1]
    start = torch.randn(dim, dim, generator=make_generator(seed)) * 0.1 / math.sqrt(dim)
    weight = start.to(task.queries.device).requires_grad_(True)  # (d, d)
    losses = []
    for _ in range(steps):
        query = task.queries @ weight.T  # (B, d)
        if mode == "soft":
            output, _ = soft_attention(query, task.keys, task.values, temperature=temperature)
        else:
            output, _ = hard_attention(query, task.keys, task.values)
        loss = lookup_loss(output, task)
        if loss.requires_grad:
            (grad,) = torch.autograd.grad(loss, weight)
        else:  # hard attention: argmax cut the graph, no gradient reaches W
            grad = torch.zeros_like(weight)
        with torch.no_grad():
            weight -= lr * grad
        losses.append(loss.item())
    return losses, weight.detach()


