"""The pointer network of lesson 06: soft or hard attention over N items, trained to return the
label of the item whose key the query copies.

Soft attention reads a convex average of the values, ``c = Σ_i a_i v_i``. Hard attention reads
ONE item, ``c = v_i`` with ``i ~ Categorical(a)``, ``a = softmax(e)``. The choice is discrete, so
the loss has no gradient with respect to the scores ``e`` along the sampled path. Two ways out:

- REINFORCE (Williams, 1992; used for hard attention by Mnih et al., 2014 and Xu et al., 2015):
  ``∇_θ E_i[L(i)] = E_i[(L(i) − b) ∇_θ log a_i]``, unbiased for any baseline ``b`` that does not
  depend on the sample; a good ``b`` (here a moving average of the loss) lowers the variance.
- Straight-through Gumbel-softmax (Jang et al., 2017; Maddison et al., 2017): draw
  ``i = argmax_i(e_i + g_i)`` with Gumbel noise ``g``, use the one-hot ``z`` going forward, and
  back-propagate through ``y = softmax((e + g)/τ)`` as if ``z = y``: low variance, but biased.

The gradient estimators compared are :mod:`course_lib.lessons.estimators`; the sampling is
:mod:`course_lib.nn.gumbel`. The task is a pointer lookup where one item suffices: N items
carry random keys and distinct labels, the query is a noisy copy of one item's key, and the
answer is that item's label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from course_lib.nn.gumbel import sample_item, straight_through_gumbel
from course_lib.seeding import make_generator

ESTIMATORS = ("soft", "reinforce", "gumbel")
# More classes than items: with as many classes as items every label is in every row, and a
# near-uniform policy can settle on "answer anything but the label read" (lesson 06 shows why).
DEFAULT_CLASSES = 16


# ---------------------------------------------------------------------------------------------
# The task


@dataclass
class PointerTask:
    """Shapes: ``query`` (n, d), ``keys`` (n, N, d), ``labels`` (n, N) (distinct in a row),
    ``target_index`` (n,), ``target`` (n,) = ``labels[row, target_index]``. CPU tensors."""

    query: torch.Tensor
    keys: torch.Tensor
    labels: torch.Tensor
    target_index: torch.Tensor
    target: torch.Tensor

    def __len__(self) -> int:
        return self.query.shape[0]

    def batch(self, index: torch.Tensor) -> PointerTask:
        return PointerTask(self.query[index], self.keys[index], self.labels[index],
                           self.target_index[index], self.target[index])


def pointer_task(n: int = 512, n_items: int = 8, dim: int = 16, n_classes: int = DEFAULT_CLASSES,
                 noise: float = 0.3, seed: int | torch.Generator = 0) -> PointerTask:
    """``n`` lookups: the query is ``k_target + noise · ε`` and the answer the target's label."""
    if n < 1 or n_items < 2 or dim < 1 or noise < 0:
        raise ValueError(f"need n >= 1, n_items >= 2, dim >= 1, noise >= 0; got n={n}, "
                         f"n_items={n_items}, dim={dim}, noise={noise}")
    if n_classes < n_items:
        raise ValueError(f"labels are distinct within a row, so n_classes ({n_classes}) must be "
                         f">= n_items ({n_items})")
    generator = make_generator(seed) if isinstance(seed, int) else seed
    keys = torch.randn(n, n_items, dim, generator=generator)
    labels = torch.rand(n, n_classes, generator=generator).argsort(dim=1)[:, :n_items]  # (n, N)
    target_index = torch.randint(n_items, (n,), generator=generator)
    rows = torch.arange(n)
    query = keys[rows, target_index] + noise * torch.randn(n, dim, generator=generator)
    return PointerTask(query, keys, labels, target_index, labels[rows, target_index])


def attention_weights(scores: torch.Tensor, estimator: str, temperature: float = 1.0,
                      generator: torch.Generator | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The weights one estimator reads with, and ``log a_i`` of the sampled item (REINFORCE).

    ``"soft"``: ``softmax(e)``; ``"gumbel"``: straight-through Gumbel-softmax; ``"reinforce"``:
    a one-hot sample ``i ~ softmax(e)``; ``"argmax"``: one-hot ``argmax_i e_i`` (evaluation).
    Shapes: ``scores`` (B, N) -> weights (B, N), log-probability (B,) or None.
    """
    if estimator == "soft":
        return torch.softmax(scores, dim=-1), None
    if estimator == "argmax":
        return torch.zeros_like(scores).scatter(-1, scores.argmax(-1, keepdim=True), 1.0), None
    if estimator == "gumbel":
        return straight_through_gumbel(scores, temperature, generator), None
    if estimator == "reinforce":
        index, log_prob = sample_item(scores, generator)
        return torch.zeros_like(scores).scatter(-1, index.unsqueeze(-1), 1.0), log_prob
    raise ValueError(f"estimator must be one of {ESTIMATORS} or 'argmax', got {estimator!r}")


# ---------------------------------------------------------------------------------------------
# The model


@dataclass
class HardAttentionConfig:
    dim: int = 16
    n_classes: int = DEFAULT_CLASSES
    value_dim: int = 16
    estimator: str = "soft"
    temperature: float = 1.0  # of the Gumbel-softmax relaxation

    def __post_init__(self) -> None:
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {ESTIMATORS}, got {self.estimator!r}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be positive, got {self.temperature}")


class PointerOutput(NamedTuple):
    """``logits`` (B, C); ``weights`` (B, N): soft weights or the one-hot choice;
    ``log_prob`` (B,): log a_i of the sampled item (REINFORCE only, else None)."""

    logits: torch.Tensor
    weights: torch.Tensor
    log_prob: torch.Tensor | None


class PointerNet(nn.Module):
    """Attend over items, read their value, classify.

    ``e_i = k_iᵀ W q`` (the general score); values ``v_i = Embed(label_i)``; ``logits = W_o c``
    with ``c = Σ a_i v_i`` (soft) or ``c = v_i`` for one chosen item (hard). In training the
    hard estimators sample; in eval mode they take ``argmax_i e_i``.
    """

    config_class = HardAttentionConfig

    def __init__(self, config: HardAttentionConfig) -> None:
        super().__init__()
        self.config = config
        self.W = nn.Linear(config.dim, config.dim, bias=False)
        self.values = nn.Embedding(config.n_classes, config.value_dim)
        self.out = nn.Linear(config.value_dim, config.n_classes)

    def scores(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``e_i = k_iᵀ W q``. Shapes: (B, d), (B, N, d) -> (B, N)."""
        if query.dim() != 2 or keys.dim() != 3 or keys.shape[0] != query.shape[0] \
                or keys.shape[2] != self.config.dim or query.shape[1] != self.config.dim:
            raise ValueError(f"expected query (B, {self.config.dim}) and keys "
                             f"(B, N, {self.config.dim}), got {tuple(query.shape)} and "
                             f"{tuple(keys.shape)}")
        return (keys @ self.W(query).unsqueeze(-1)).squeeze(-1)  # (B, N, d) @ (B, d, 1) -> (B, N)

    def forward(self, query: torch.Tensor, keys: torch.Tensor, labels: torch.Tensor,
                generator: torch.Generator | None = None) -> PointerOutput:
        scores = self.scores(query, keys)  # (B, N)
        values = self.values(labels)  # (B, N, V)
        estimator = self.config.estimator
        if estimator != "soft" and not self.training:
            estimator = "argmax"  # hard estimators evaluate with their best pick
        weights, log_prob = attention_weights(scores, estimator, self.config.temperature,
                                              generator)
        context = (weights.unsqueeze(1) @ values).squeeze(1)  # (B, 1, N) @ (B, N, V) -> (B, V)
        return PointerOutput(self.out(context), weights, log_prob)


# ---------------------------------------------------------------------------------------------
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
    """``b ← m·b + (1 − m)·mean(L)``, a scalar baseline for REINFORCE (starts at the first
    loss it sees)."""

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
    """``mean(L) + mean((L − b) · log a_i)``, with ``L − b`` held constant.

    Its gradient is the REINFORCE estimate ``(L − b) ∇ log a_i`` for the choice and the ordinary
    gradient of ``L`` for everything after it. Shapes: ``losses``, ``log_prob`` (B,) -> ().
    """
    if losses.shape != log_prob.shape or losses.dim() != 1:
        raise ValueError(f"expected losses and log_prob of the same shape (B,), got "
                         f"{tuple(losses.shape)} and {tuple(log_prob.shape)}")
    return losses.mean() + ((losses.detach() - baseline) * log_prob).mean()
