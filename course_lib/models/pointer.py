"""The pointer network of lesson 06: soft or hard attention over S items, trained to return the
label of the item whose key the query copies.

Soft attention reads a convex average of the values, ``c = Σ_j a_j v_j``. Hard attention reads
ONE item, ``c = v_j`` with ``j ~ Categorical(a)``, ``a = softmax(e)``. The choice is discrete, so
the loss has no gradient with respect to the scores ``e`` along the sampled path. Two ways out:

- REINFORCE (Williams, 1992; used for hard attention by Mnih et al., 2014 and Xu et al., 2015):
  ``∇_θ E_j[ℒ(j)] = E_j[(ℒ(j) − b) ∇_θ log a_j]`` for the parameters θ of the scores (the
  loss of a chosen item does not depend on them), unbiased for any baseline ``b`` that does not
  depend on the sample; a good ``b`` (here a moving average of the loss) lowers the variance.
- Straight-through Gumbel-softmax (Jang et al., 2017; Maddison et al., 2017): draw
  ``j = argmax_j(e_j + g_j)`` with Gumbel noise ``g``, use the one-hot ``â`` going forward, and
  back-propagate through ``ã = softmax((e + g)/τ)`` as if ``â = ã``: low variance, but biased.

The gradient estimators compared are :mod:`course_lib.lessons.estimators`; the sampling is
:mod:`course_lib.nn.gumbel`. The task is a pointer lookup where one item suffices: S items
carry random keys and distinct labels, the query is a noisy copy of one item's key, and the
answer is that item's label. Symbols as in ``docs/notation.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from course_lib.arguments import (
    FLOATING,
    check_choice,
    check_index,
    check_model_tokens,
    check_module_input,
    check_tensor,
)
from course_lib.nn.gumbel import sample_item, straight_through_gumbel
from course_lib.seeding import make_generator

ESTIMATORS = ("soft", "reinforce", "gumbel")
# More classes than items: with as many classes as items every label is in every row, and a
# near-uniform policy can settle on "answer anything but the label read" (lesson 06 shows why).
DEFAULT_CLASSES = 16


# The task


@dataclass
class PointerTask:
    """Shapes: ``query`` (n, d), ``keys`` (n, S, d), ``labels`` (n, S) (distinct in a row),
    ``target_index`` (n,), ``target`` (n,) = ``labels[row, target_index]``. CPU tensors."""

    query: torch.Tensor
    keys: torch.Tensor
    labels: torch.Tensor
    target_index: torch.Tensor
    target: torch.Tensor

    def __len__(self) -> int:
        return self.query.shape[0]

    def batch(self, index: torch.Tensor | list[int]) -> PointerTask:
        """The lookups at the positions ``index`` (a non-empty list or 1-D integer tensor)."""
        index = check_index("index", index, len(self))
        index = [index] if isinstance(index, int) else index
        return PointerTask(self.query[index], self.keys[index], self.labels[index],
                           self.target_index[index], self.target[index])


def pointer_task(n: int = 512, n_items: int = 8, dim: int = 16, n_classes: int = DEFAULT_CLASSES,
                 noise: float = 0.3, seed: int | torch.Generator = 0) -> PointerTask:
    """``n`` lookups: the query is ``k_j* + noise · ε`` and the answer the target j*'s label."""
    if n < 1 or n_items < 2 or dim < 1 or noise < 0:
        raise ValueError(f"need n >= 1, n_items >= 2, dim >= 1, noise >= 0; got n={n}, "
                         f"n_items={n_items}, dim={dim}, noise={noise}")
    if n_classes < n_items:
        raise ValueError(f"labels are distinct within a row, so n_classes ({n_classes}) must be "
                         f">= n_items ({n_items})")
    generator = make_generator(seed) if isinstance(seed, int) else seed
    keys = torch.randn(n, n_items, dim, generator=generator)
    labels = torch.rand(n, n_classes, generator=generator).argsort(dim=1)[:, :n_items]  # (n, S)
    target_index = torch.randint(n_items, (n,), generator=generator)
    rows = torch.arange(n)
    query = keys[rows, target_index] + noise * torch.randn(n, dim, generator=generator)
    return PointerTask(query, keys, labels, target_index, labels[rows, target_index])


def attention_weights(scores: torch.Tensor, estimator: str, temperature: float = 1.0,
                      generator: torch.Generator | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The weights one estimator reads with, and ``log a_j`` of the sampled item (REINFORCE).

    ``"soft"``: ``softmax(e)``; ``"gumbel"``: straight-through Gumbel-softmax; ``"reinforce"``:
    a one-hot sample ``j ~ softmax(e)``; ``"argmax"``: one-hot ``argmax_j e_j`` (evaluation).
    Shapes: ``scores`` (B, S) -> weights (B, S), log-probability (B,) or None.
    """
    check_choice("estimator", estimator, (*ESTIMATORS, "argmax"))
    if estimator == "soft":
        return torch.softmax(scores, dim=-1), None
    if estimator == "argmax":
        return torch.zeros_like(scores).scatter(-1, scores.argmax(-1, keepdim=True), 1.0), None
    if estimator == "gumbel":
        return straight_through_gumbel(scores, temperature, generator), None
    index, log_prob = sample_item(scores, generator)  # "reinforce"
    return torch.zeros_like(scores).scatter(-1, index.unsqueeze(-1), 1.0), log_prob


# The model


@dataclass
class PointerConfig:
    """A :class:`PointerNet`: key and query size ``dim``, ``n_classes`` labels, each a learned
    value of ``value_dim``, read through ``estimator`` (one of :data:`ESTIMATORS`)."""

    dim: int = 16
    n_classes: int = DEFAULT_CLASSES
    value_dim: int = 16
    estimator: str = "soft"
    temperature: float = 1.0  # of the Gumbel-softmax relaxation

    def __post_init__(self) -> None:
        check_choice("estimator", self.estimator, ESTIMATORS)
        if self.temperature <= 0:
            raise ValueError(f"temperature must be positive, got {self.temperature}")


class PointerOutput(NamedTuple):
    """``logits`` (B, C); ``weights`` (B, S): soft weights or the one-hot choice;
    ``log_prob`` (B,): log a_j of the sampled item (REINFORCE only, else None)."""

    logits: torch.Tensor
    weights: torch.Tensor
    log_prob: torch.Tensor | None


class PointerNet(nn.Module):
    """Attend over items, read their value, classify.

    ``e_j = qᵀ W_g k_j`` (the general score; the layer ``W`` stores W_gᵀ and maps the query,
    ``e_j = k_jᵀ (W_gᵀ q)``); values ``v_j = Embed(label_j)``; ``logits = W_out c + b_out`` with
    ``c = Σ_j a_j v_j`` (soft) or ``c = v_j`` for one chosen item (hard). In training the hard
    estimators sample; in eval mode they take ``argmax_j e_j``.
    """

    config_class = PointerConfig

    def __init__(self, config: PointerConfig) -> None:
        super().__init__()
        self.config = config
        self.W = nn.Linear(config.dim, config.dim, bias=False)
        self.values = nn.Embedding(config.n_classes, config.value_dim)
        self.out = nn.Linear(config.value_dim, config.n_classes)

    def scores(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``e_j = qᵀ W_g k_j``. Shapes: (B, d), (B, S, d) -> (B, S)."""
        for name, x in (("query", query), ("keys", keys)):
            check_tensor(name, x, dtype=FLOATING)
            check_module_input(name, x, self)
        if query.dim() != 2 or keys.dim() != 3 or keys.shape[0] != query.shape[0] \
                or keys.shape[2] != self.config.dim or query.shape[1] != self.config.dim:
            raise ValueError(f"expected query (B, {self.config.dim}) and keys "
                             f"(B, S, {self.config.dim}), got {tuple(query.shape)} and "
                             f"{tuple(keys.shape)}")
        return (keys @ self.W(query).unsqueeze(-1)).squeeze(-1)  # (B, S, d) @ (B, d, 1) -> (B, S)

    def forward(self, query: torch.Tensor, keys: torch.Tensor, labels: torch.Tensor,
                generator: torch.Generator | None = None) -> PointerOutput:
        scores = self.scores(query, keys)  # (B, S)
        check_model_tokens("labels", labels, self.values, "the model's labels", "classes")
        check_tensor("labels", labels, shape=scores.shape)
        values = self.values(labels)  # (B, S, d_v)
        estimator = self.config.estimator
        if estimator != "soft" and not self.training:
            estimator = "argmax"  # hard estimators evaluate with their best pick
        weights, log_prob = attention_weights(scores, estimator, self.config.temperature,
                                              generator)
        context = (weights.unsqueeze(1) @ values).squeeze(1)  # (B, 1, S) @ (B, S, d_v) -> (B, d_v)
        return PointerOutput(self.out(context), weights, log_prob)


# Losses and training


def pointer_loss(model: PointerNet, task: PointerTask,
                 baseline: MovingAverageBaseline | None = None,
                 generator: torch.Generator | None = None) -> torch.Tensor:
    """The training loss of ``model``'s estimator on a batch (REINFORCE's surrogate for
    ``"reinforce"``, with the baseline's value before this batch, then updating it)."""
    device = model.W.weight.device
    output = model(task.query.to(device), task.keys.to(device), task.labels.to(device),
                   generator)
    losses = nn.functional.cross_entropy(output.logits, task.target.to(device),
                                         reduction="none")  # (B,)
    if output.log_prob is None:
        return losses.mean()
    value = 0.0 if baseline is None or baseline.value is None else baseline.value
    if baseline is not None:
        baseline.update(losses)
    return reinforce_surrogate(losses, output.log_prob, value)


@torch.no_grad()
def pointer_accuracy(model: PointerNet, task: PointerTask) -> dict[str, float]:
    """In eval mode: the share of correct answers and of picks (attention argmax) on the
    target item."""
    was_training = model.training
    model.eval()
    device = model.W.weight.device
    output = model(task.query.to(device), task.keys.to(device), task.labels.to(device))
    model.train(was_training)
    return {"accuracy": (output.logits.argmax(-1).cpu() == task.target).float().mean().item(),
            "pick": (output.weights.argmax(-1).cpu() == task.target_index).float().mean().item()}


class MovingAverageBaseline:
    """``b ← ρ·b + (1 − ρ)·mean(ℒ)``, ρ = ``momentum``, a scalar baseline for REINFORCE (starts
    at the first loss it sees)."""

    def __init__(self, momentum: float = 0.9) -> None:
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        self.momentum, self.value = momentum, None

    def update(self, losses: torch.Tensor) -> float:
        mean = float(losses.detach().mean())
        self.value = mean if self.value is None else \
            self.momentum * self.value + (1 - self.momentum) * mean
        return self.value



def reinforce_surrogate(losses: torch.Tensor, log_prob: torch.Tensor,
                        baseline: float = 0.0) -> torch.Tensor:
    """``mean(ℒ) + mean((ℒ − b) · log a_j)``, with ``ℒ − b`` held constant.

    Its gradient is the REINFORCE estimate ``(ℒ − b) ∇ log a_j`` for the choice and the ordinary
    gradient of ``ℒ`` for everything after it. Shapes: ``losses``, ``log_prob`` (B,) -> ().
    """
    if losses.shape != log_prob.shape or losses.dim() != 1:
        raise ValueError(f"expected losses and log_prob of the same shape (B,), got "
                         f"{tuple(losses.shape)} and {tuple(log_prob.shape)}")
    return losses.mean() + ((losses.detach() - baseline) * log_prob).mean()
