"""Hard attention as a sequential decision: REINFORCE and straight-through Gumbel-softmax.

Soft attention reads a convex average of the values, ``c = Σ_i a_i v_i``. Hard attention reads
ONE item, ``c = v_i`` with ``i ~ Categorical(a)``, ``a = softmax(e)``. The choice is discrete, so
the loss has no gradient with respect to the scores ``e`` along the sampled path. Two ways out:

- REINFORCE (Williams, 1992; used for hard attention by Mnih et al., 2014 and Xu et al., 2015):
  ``∇_θ E_i[L(i)] = E_i[(L(i) − b) ∇_θ log a_i]``, unbiased for any baseline ``b`` that does not
  depend on the sample; a good ``b`` (here a moving average of the loss) lowers the variance.
- Straight-through Gumbel-softmax (Jang et al., 2017; Maddison et al., 2017): draw
  ``i = argmax_i(e_i + g_i)`` with Gumbel noise ``g``, use the one-hot ``z`` going forward, and
  back-propagate through ``y = softmax((e + g)/τ)`` as if ``z = y``: low variance, but biased.

The task is a pointer lookup where one item suffices: N items carry random keys and distinct
labels, the query is a noisy copy of one item's key, and the answer is that item's label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from course_lib.seeding import make_generator

ESTIMATORS = ("soft", "reinforce", "gumbel")
# More classes than items: with as many classes as items every label is in every row, and a
# near-uniform policy can settle on "answer anything but the label read", a trap that soft,
# Gumbel and REINFORCE all fell into for some seeds (lesson 06 shows it).
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


# ---------------------------------------------------------------------------------------------
# Sampling


def gumbel_noise(shape: torch.Size | tuple[int, ...], generator: torch.Generator | None = None,
                 like: torch.Tensor | None = None) -> torch.Tensor:
    """Standard Gumbel noise ``g = −log(−log u)``, ``u ~ U(0, 1)``, drawn on the CPU from
    ``generator`` and moved to ``like``'s device and dtype."""
    uniform = torch.rand(shape, generator=generator, dtype=torch.float64)
    tiny = torch.finfo(torch.float64).tiny
    noise = -torch.log(-torch.log(uniform.clamp(min=tiny)))
    return noise.to(like) if like is not None else noise.float()


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
    """One-hot ``z = onehot(argmax(e + g))`` forward, gradient of ``y = softmax((e + g)/τ)``.

    Returns ``z`` exactly in value, with the gradient of ``y`` (what ``z + y − stopgrad(y)``
    does, without its rounding error in the forward value). Masked items
    (False) are never picked. Shapes: ``scores`` (B, N) -> weights (B, N).
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    perturbed = scores + gumbel_noise(scores.shape, generator, like=scores)
    if mask is not None:
        perturbed = perturbed.masked_fill(~mask, torch.finfo(scores.dtype).min)
    soft = torch.softmax(perturbed / temperature, dim=-1)
    hard = torch.zeros_like(soft).scatter(-1, perturbed.argmax(dim=-1, keepdim=True), 1.0)
    return _StraightThrough.apply(hard, soft)


def sample_item(scores: torch.Tensor, generator: torch.Generator | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """``i ~ Categorical(softmax(e))`` (Gumbel-max) and ``log a_i``, differentiable in ``e``.

    Shapes: ``scores`` (B, N) -> index (B,), log-probability (B,).
    """
    index = (scores.detach() + gumbel_noise(scores.shape, generator, like=scores)).argmax(-1)
    log_prob = torch.log_softmax(scores, dim=-1).gather(-1, index.unsqueeze(-1)).squeeze(-1)
    return index, log_prob


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
    model = PointerNet(HardAttentionConfig(dim=probe.query.shape[1],
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


# ---------------------------------------------------------------------------------------------
# Gradient estimators compared


def expected_loss(model: PointerNet, task: PointerTask) -> torch.Tensor:
    """The objective the hard estimators estimate, computed exactly by enumerating the items:
    ``mean_b Σ_i a_bi · L_b(i)``, ``L_b(i)`` the loss when item i is read."""
    scores = model.scores(task.query, task.keys)  # (B, N)
    logits = model.out(model.values(task.labels))  # (B, N, C): the answer for every choice
    losses = nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),  # (B·N, C)
        task.target.repeat_interleave(task.labels.shape[1]),  # (B·N,)
        reduction="none").reshape(task.labels.shape)  # (B, N)
    return (torch.softmax(scores, dim=-1) * losses).sum(-1).mean()


def score_gradient(model: PointerNet, loss: torch.Tensor) -> torch.Tensor:
    """The gradient of ``loss`` with respect to the score matrix W, flattened: (d·d,)."""
    (gradient,) = torch.autograd.grad(loss, model.W.weight)
    return gradient.flatten()  # (d·d,)


def gradient_samples(model: PointerNet, task: PointerTask, estimator: str, n_samples: int,
                     baseline: float = 0.0, temperature: float = 1.0,
                     seed: int = 0) -> torch.Tensor:
    """``n_samples`` independent estimates of ∇_W of the training loss with ``estimator``
    (``"reinforce"`` with a constant ``baseline``, ``"gumbel"`` with ``temperature``, or
    ``"soft"``) at the model's current weights. Shapes: -> (n_samples, d·d)."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    generator = make_generator(seed)
    samples = []
    for _ in range(n_samples):
        scores = model.scores(task.query, task.keys)  # (B, N)
        values = model.values(task.labels)  # (B, N, V)
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
    ``Σ_k Var(ĝ_k)`` (the expected squared distance of one estimate from the mean);
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
