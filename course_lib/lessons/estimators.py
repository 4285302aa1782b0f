"""Lesson 06's comparison of gradient estimators for hard attention.

The loss of a hard choice has no gradient along the sampled path. REINFORCE (Williams, 1992)
uses ``∇_θ E_j[ℒ(j)] = E_j[(ℒ(j) − b) ∇_θ log a_j]`` for the score parameters θ, unbiased for
any baseline ``b`` that does not depend on the sample; straight-through Gumbel-softmax
back-propagates through ``ã = softmax((e + g)/τ)`` as if it were the one-hot draw ``â``: low
variance, but biased. This module trains the pointer network with each estimator and measures the
bias and variance of their gradients against the exact one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from course_lib.arguments import check_choice
from course_lib.models.pointer import (
    DEFAULT_CLASSES,
    ESTIMATORS,
    MovingAverageBaseline,
    PointerConfig,
    PointerNet,
    PointerTask,
    attention_weights,
    pointer_accuracy,
    pointer_loss,
    pointer_task,
    reinforce_surrogate,
)
from course_lib.seeding import make_generator


@dataclass
class PointerTraining:
    model: PointerNet
    history: list[dict[str, float]]  # one record per evaluation: step, loss, accuracy, pick


def train_pointer(estimator: str, steps: int = 400, batch_size: int = 64, lr: float = 3e-3,
                  seed: int = 0, use_baseline: bool = True, eval_every: int = 25,
                  task_kwargs: dict | None = None, device: torch.device | str = "cpu",
                  ) -> PointerTraining:
    """Train a :class:`PointerNet` with one estimator on fresh batches of the pointer task and
    evaluate (argmax picks) on a fixed held-out set."""
    task_kwargs = dict(task_kwargs or {})
    torch.manual_seed(seed)
    probe = pointer_task(n=1, seed=seed, **task_kwargs)
    model = PointerNet(PointerConfig(dim=probe.query.shape[1],
                                           n_classes=task_kwargs.get("n_classes", DEFAULT_CLASSES),
                                           estimator=estimator)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    baseline = MovingAverageBaseline() if use_baseline else None
    data_generator, noise_generator = make_generator(seed + 1), make_generator(seed + 2)
    held_out = pointer_task(n=1000, seed=10_000 + seed, **task_kwargs)
    history = []
    for step in range(1, steps + 1):
        model.train()
        loss = pointer_loss(model, pointer_task(n=batch_size, seed=data_generator,
                                                **task_kwargs), baseline, noise_generator)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % eval_every == 0 or step == steps:
            history.append({"step": step, "loss": loss.item(),
                            **pointer_accuracy(model, held_out)})
    return PointerTraining(model, history)


def expected_loss(model: PointerNet, task: PointerTask) -> torch.Tensor:
    """The objective the hard estimators estimate, computed exactly by enumerating the items:
    the mean over the batch of ``Σ_j a_j · ℒ(j)``, ``ℒ(j)`` the loss when item j is read."""
    scores = model.scores(task.query, task.keys)  # (B, S)
    logits = model.out(model.values(task.labels))  # (B, S, C): the answer for every choice
    losses = nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),  # (B·S, C)
        task.target.repeat_interleave(task.labels.shape[1]),  # (B·S,)
        reduction="none").reshape(task.labels.shape)  # (B, S)
    return (torch.softmax(scores, dim=-1) * losses).sum(-1).mean()


def score_gradient(model: PointerNet, loss: torch.Tensor) -> torch.Tensor:
    """The gradient of ``loss`` with respect to the score matrix (the layer ``W``, which stores
    W_gᵀ), flattened: (d·d,)."""
    (gradient,) = torch.autograd.grad(loss, model.W.weight)
    return gradient.flatten()  # (d·d,)


def gradient_samples(model: PointerNet, task: PointerTask, estimator: str, n_samples: int,
                     baseline: float = 0.0, temperature: float = 1.0,
                     seed: int = 0) -> torch.Tensor:
    """``n_samples`` independent estimates of ∇_{W_g} of the training loss with ``estimator``
    (``"reinforce"`` with a constant ``baseline``, ``"gumbel"`` with ``temperature``, or
    ``"soft"``) at the model's current weights. Shapes: -> (n_samples, d·d)."""
    check_choice("estimator", estimator, ESTIMATORS)
    generator = make_generator(seed)
    samples = []
    for _ in range(n_samples):
        scores = model.scores(task.query, task.keys)  # (B, S)
        values = model.values(task.labels)  # (B, S, d_v)
        weights, log_prob = attention_weights(scores, estimator, temperature, generator)
        logits = model.out((weights.unsqueeze(1) @ values).squeeze(1))  # (B, C)
        losses = nn.functional.cross_entropy(logits, task.target, reduction="none")
        loss = losses.mean() if log_prob is None else \
            reinforce_surrogate(losses, log_prob, baseline)
        samples.append(score_gradient(model, loss))
    return torch.stack(samples)  # (n_samples, d·d)


def estimator_statistics(samples: torch.Tensor, exact: torch.Tensor) -> dict[str, float]:
    """Bias and spread of gradient estimates against the exact gradient.

    ``relative_bias = ‖mean − exact‖ / ‖exact‖``; ``variance`` = total variance
    ``Σ_i Var(ĝ_i)`` (the expected squared distance of one estimate from the mean);
    ``relative_std = sqrt(variance) / ‖exact‖``. Shapes: (n, P), (P,).
    """
    if samples.dim() != 2 or samples.shape[1:] != exact.shape:
        raise ValueError(f"expected samples (n, P) and exact (P,), got {tuple(samples.shape)} "
                         f"and {tuple(exact.shape)}")
    if samples.shape[0] < 2:
        raise ValueError("need at least two samples to measure a variance")
    norm = float(exact.norm())
    variance = float(samples.var(dim=0).sum())
    return {"relative_bias": float((samples.mean(0) - exact).norm()) / norm,
            "variance": variance, "relative_std": variance ** 0.5 / norm}
