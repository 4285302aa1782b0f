"""Attention as a lookup: the prototypes of lesson 03.

A query is compared with the key of every item in a set; the comparison decides how much of
each item's value comes back.

- *Soft* attention returns a convex combination of the values,
  ``a = softmax(K q / τ)``, ``output = Σ_i a_i v_i``; it is differentiable in ``q`` and ``K``.
- *Hard* attention returns the single best item, ``output = v_{argmax_i k_i·q}``; its output is
  piecewise constant in ``q``, so its gradient is zero almost everywhere.
- *Stochastic* hard attention samples one item with probabilities ``a`` by the Gumbel-max trick,
  ``i = argmax_i (log a_i + g_i)``, ``g_i ~ Gumbel(0, 1)``.
- Nadaraya–Watson kernel regression is soft attention with the score ``−(x − x_i)² / (2h²)``.
- A document of facts, each sentence encoded as a vector first, answers questions by soft
  attention over its sentences.

Masks are boolean with True = "may attend". Masked items get exactly zero weight; a fully masked
row gets all-zero weights and a zero output (never NaN). Every function takes its device from
its inputs; the data generators return CPU tensors.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from course_lib.attention import masked_softmax
from course_lib.seeding import make_generator

# ----------------------------------------------------------------------------------------------
# Soft, hard and sampled attention over a set of items
# ----------------------------------------------------------------------------------------------


def _shape(tensor: torch.Tensor) -> tuple[int, ...]:
    return tuple(tensor.shape)


def _check_temperature(temperature: float) -> None:
    if not temperature > 0:  # also rejects NaN
        raise ValueError(f"temperature must be > 0, got {temperature}")


def _check_mask(mask: torch.Tensor | None, expected: tuple[int, ...], what: str) -> None:
    if mask is None:
        return
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a torch.bool tensor (True = may attend), got {mask.dtype}")
    if _shape(mask) != expected:
        raise ValueError(f"mask must have shape {what} = {expected}, got {_shape(mask)}")


def check_lookup_shapes(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                        mask: torch.Tensor | None = None) -> tuple[int, int, int]:
    """Raise ``ValueError`` naming expected and actual shapes unless they fit together.

    Shapes: ``query`` (B, d), ``keys`` (B, N, d), ``values`` (B, N, d_v), ``mask`` (B, N) bool.
    Returns ``(B, N, d)``.
    """
    if keys.dim() != 3:
        raise ValueError(f"keys must have shape (B, N, d), got {_shape(keys)}")
    batch, items, dim = keys.shape
    if _shape(query) != (batch, dim):
        raise ValueError(f"query must have shape (B, d) = ({batch}, {dim}) to match keys "
                         f"{_shape(keys)}, got {_shape(query)}")
    if values.dim() != 3 or _shape(values)[:2] != (batch, items):
        raise ValueError(f"values must have shape (B, N, d_v) = ({batch}, {items}, d_v) to match "
                         f"keys {_shape(keys)}, got {_shape(values)}")
    _check_mask(mask, (batch, items), "(B, N)")
    return batch, items, dim


def lookup_scores(query: torch.Tensor, keys: torch.Tensor,
                  temperature: float = 1.0) -> torch.Tensor:
    """Dot-product match of the query with every key, ``e_i = k_i · q / τ``.

    Shapes: ``query`` (B, d), ``keys`` (B, N, d) -> scores (B, N).
    """
    _check_temperature(temperature)
    if keys.dim() != 3 or _shape(query) != (keys.shape[0], keys.shape[2]):
        raise ValueError(f"query (B, d) and keys (B, N, d) do not fit: got query "
                         f"{_shape(query)} and keys {_shape(keys)}")
    scores = keys @ query.unsqueeze(-1)  # (B, N, d) @ (B, d, 1) -> (B, N, 1)
    return scores.squeeze(-1) / temperature  # (B, N)


def soft_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, *,
                   mask: torch.Tensor | None = None,
                   temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Soft attention pooling: ``a = softmax(K q / τ)``, ``output = Σ_i a_i v_i = Vᵀ a``.

    The output is a convex combination of the values (weights ≥ 0, summing to one) and is
    differentiable in the query, the keys and the values. Lower ``τ`` sharpens the weights
    towards the best match; higher ``τ`` flattens them towards the plain mean.

    Shapes: ``query`` (B, d), ``keys`` (B, N, d), ``values`` (B, N, d_v), ``mask`` (B, N) bool
    -> output (B, d_v), weights (B, N).
    """
    check_lookup_shapes(query, keys, values, mask)
    weights = masked_softmax(lookup_scores(query, keys, temperature), mask)  # (B, N)
    output = (weights.unsqueeze(1) @ values).squeeze(1)  # (B, 1, N) @ (B, N, d_v) -> (B, d_v)
    return output, weights


def _one_hot_output(index: torch.Tensor, values: torch.Tensor, scores: torch.Tensor,
                    mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """One-hot weights at ``index`` (zero for fully masked rows) and the values they select."""
    weights = torch.zeros_like(scores).scatter(-1, index.unsqueeze(-1), 1.0)  # (B, N)
    if mask is not None:
        weights = weights * mask.any(dim=-1, keepdim=True)  # fully masked rows -> all zeros
    output = (weights.unsqueeze(1) @ values).squeeze(1)  # (B, 1, N) @ (B, N, d_v) -> (B, d_v)
    return output, weights


def hard_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, *,
                   mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Hard attention: ``i* = argmax_i k_i · q`` over allowed items, ``output = v_{i*}``.

    The weights are one-hot. ``argmax`` is piecewise constant in the query, so no gradient
    reaches the query or the keys (autograd sees no path). Ties go to the first best item.

    Shapes: ``query`` (B, d), ``keys`` (B, N, d), ``values`` (B, N, d_v), ``mask`` (B, N) bool
    -> output (B, d_v), one-hot weights (B, N).
    """
    check_lookup_shapes(query, keys, values, mask)
    scores = lookup_scores(query, keys).detach()  # (B, N); argmax has no gradient anyway
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    return _one_hot_output(scores.argmax(dim=-1), values, scores, mask)


def gumbel_noise(shape: Sequence[int], *, generator: torch.Generator | None = None,
                 dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None) -> torch.Tensor:
    """Standard Gumbel noise, ``g = −log(−log u)``, ``u ~ Uniform(0, 1)``.

    The uniform draw is made on the generator's device (CPU for :func:`make_generator`) and then
    moved to ``device`` (default: the generator's device).

    Shapes: returns ``shape``.
    """
    source = generator.device if generator is not None else device
    uniform = torch.rand(tuple(shape), generator=generator, dtype=dtype, device=source)
    uniform = uniform.clamp(min=torch.finfo(dtype).tiny)  # u = 0 would give g = −inf
    noise = -torch.log(-torch.log(uniform))
    return noise if device is None else noise.to(device)


def gumbel_max_sample(logits: torch.Tensor, *, mask: torch.Tensor | None = None,
                      generator: torch.Generator | None = None) -> torch.Tensor:
    """One sample per row from ``softmax(logits)`` by the Gumbel-max trick:
    ``i = argmax_i (logits_i + g_i)``, ``g_i ~ Gumbel(0, 1)``.

    Since ``log a_i = logits_i − log Σ_j exp(logits_j)`` differs from ``logits_i`` by a constant
    per row, this is ``argmax_i (log a_i + g_i)`` and ``P(i) = a_i``. Masked items are never
    drawn. A fully masked row returns index 0 (callers zero its weights).

    Shapes: ``logits`` (B, N), ``mask`` (B, N) bool -> indices (B,) int64.
    """
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape (B, N), got {_shape(logits)}")
    _check_mask(mask, _shape(logits), "(B, N)")
    dtype = torch.promote_types(logits.dtype, torch.float32)  # fp16 uniforms are too coarse
    noise = gumbel_noise(_shape(logits), generator=generator, dtype=dtype,
                         device=logits.device)  # (B, N)
    perturbed = logits.detach().to(dtype) + noise
    if mask is not None:
        perturbed = perturbed.masked_fill(~mask, -math.inf)
    return perturbed.argmax(dim=-1)


def sample_hard_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, *,
                          generator: torch.Generator | None = None,
                          mask: torch.Tensor | None = None,
                          temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Stochastic hard attention: draw ``i ~ a = softmax(K q / τ)`` with Gumbel noise,
    ``i = argmax_i (log a_i + g_i)``, and return ``v_i``.

    On average the output equals soft attention's, ``E[v_i] = Σ_i a_i v_i``, but each draw is
    one whole item. Pass a seeded ``torch.Generator`` for repeatable draws.

    Shapes: ``query`` (B, d), ``keys`` (B, N, d), ``values`` (B, N, d_v), ``mask`` (B, N) bool
    -> output (B, d_v), one-hot weights (B, N).
    """
    check_lookup_shapes(query, keys, values, mask)
    scores = lookup_scores(query, keys, temperature).detach()  # (B, N)
    index = gumbel_max_sample(scores, mask=mask, generator=generator)  # (B,)
    return _one_hot_output(index, values, scores, mask)


# ----------------------------------------------------------------------------------------------
# A generated lookup task: hard versus soft attention, and their gradients
# ----------------------------------------------------------------------------------------------


@dataclass
class LookupTask:
    """Sets of items and one query per set; the answer is the value of item ``targets[b]``.

    Shapes: ``keys`` (B, N, d), ``values`` (B, N, d_v), ``queries`` (B, d), ``targets`` (B,).
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
    """A random orthogonal matrix ``R`` (``Rᵀ R = I``), from the QR decomposition of a Gaussian
    matrix with the signs fixed so that it is uniformly distributed. Shape: (dim, dim)."""
    gaussian = torch.randn(dim, dim, generator=generator)
    q, r = torch.linalg.qr(gaussian)
    return q * torch.sign(torch.diagonal(r)).unsqueeze(0)  # (dim, dim)


def make_lookup_task(n_examples: int = 256, n_items: int = 8, dim: int = 16,
                     value_dim: int | None = None, *, noise: float = 0.3,
                     rotate: bool = False, seed: int = 0) -> LookupTask:
    """Generate a key–query lookup task: each set holds ``n_items`` random keys ``k_i`` (unit
    length on average) with random values ``v_i``; the query is a noisy copy of one key,
    ``q = k_t + ε``, ``ε ~ N(0, noise² / d)``, and the answer is ``v_t``.

    With ``rotate=True`` the query lives in another coordinate system, ``q = (k_t + ε) R`` for one
    random rotation ``R`` shared by the whole task: plain dot products no longer find the item,
    but a learned query map ``W = Rᵀ`` does (see :func:`train_query_map`).

    Shapes: returns a :class:`LookupTask` of CPU tensors, ``keys`` (B, N, d), ``values``
    (B, N, d_v), ``queries`` (B, d), ``targets`` (B,) int64.
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
        queries = queries @ random_rotation(dim, generator=generator)  # (B, d)
    return LookupTask(keys=keys, values=values, queries=queries, targets=targets)


def lookup_loss(output: torch.Tensor, task: LookupTask) -> torch.Tensor:
    """Mean squared distance to the right answer, ``L = mean_b ‖output_b − v_{t_b}‖²``."""
    return (output - task.answers).pow(2).sum(dim=-1).mean()


def lookup_accuracy(weights: torch.Tensor, task: LookupTask) -> float:
    """Fraction of sets whose largest attention weight is on the target item."""
    return (weights.argmax(dim=-1) == task.targets).float().mean().item()


def lookup_gradient_norms(task: LookupTask, *, temperature: float = 0.2,
                          eps: float = 1e-3) -> dict[str, float]:
    """How much the loss :func:`lookup_loss` of hard and soft attention changes with the query.

    Measured twice: with autograd (``dL/dq``; for hard attention autograd finds no path from the
    loss to the query, which counts as zero) and by central finite differences,
    ``(L(q + ε e_j) − L(q − ε e_j)) / 2ε`` per coordinate ``j``, which needs no autograd at all.
    Returns the mean over sets of the per-set gradient norm ``‖∂L_b/∂q_b‖``, for the keys
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
    """Learn a query map ``W`` by plain gradient descent, ``W ← W − η ∂L/∂W``, so that attention
    with scores ``K (W q)`` returns the right answer; ``L`` is :func:`lookup_loss` of ``mode``
    attention (``"soft"`` or ``"hard"``), and ``W`` starts small and random.

    On a ``rotate=True`` task soft attention learns ``W ≈ c Rᵀ``; with hard attention the
    gradient is zero, so ``W`` never moves and the loss stays where it started. Runs on the
    task's device.

    Shapes: ``W`` (d, d), applied as ``q ↦ q Wᵀ``. Returns the loss before every step and ``W``.
    """
    if mode not in ("soft", "hard"):
        raise ValueError(f"mode must be 'soft' or 'hard', got {mode!r}")
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


# ----------------------------------------------------------------------------------------------
# Nadaraya–Watson kernel regression: attention pooling with a Gaussian kernel
# ----------------------------------------------------------------------------------------------


def regression_function(x: torch.Tensor) -> torch.Tensor:
    """The function behind the regression data, ``f(x) = 2 sin(x) + x^0.8`` (for x ≥ 0)."""
    return 2 * torch.sin(x) + x.clamp(min=0).pow(0.8)


def make_regression_data(n: int = 50, *, noise: float = 0.5, low: float = 0.0,
                         high: float = 5.0, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Noisy samples of :func:`regression_function`: ``x_i ~ U(low, high)`` (sorted),
    ``y_i = f(x_i) + ε_i``, ``ε_i ~ N(0, noise²)``.

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

    ``f(x) = Σ_i a_i(x) y_i``, ``a_i(x) = softmax_i(−(x − x_i)² / (2h²))``,

    i.e. soft attention whose query is ``x``, whose keys are the ``x_i`` and whose values are the
    ``y_i``, with a Gaussian kernel of bandwidth ``h`` as the score. As ``h → 0`` it returns the
    nearest neighbour's ``y``; as ``h → ∞`` the global mean of ``y`` (``h = inf`` is allowed).

    Shapes: ``x_query`` (M,), ``x_train`` (N,), ``y_train`` (N,) or (N, C), ``mask`` (M, N) or
    (N,) bool -> predictions (M,) or (M, C), weights (M, N).
    """
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be > 0, got {bandwidth}")
    if x_query.dim() != 1 or x_train.dim() != 1:
        raise ValueError(f"x_query must have shape (M,) and x_train (N,), got "
                         f"{_shape(x_query)} and {_shape(x_train)}")
    if y_train.dim() not in (1, 2) or y_train.shape[0] != x_train.shape[0]:
        raise ValueError(f"y_train must have shape (N,) or (N, C) with N = {x_train.shape[0]} "
                         f"(the length of x_train), got {_shape(y_train)}")
    if mask is not None and _shape(mask) not in ((x_query.shape[0], x_train.shape[0]),
                                                  (x_train.shape[0],)):
        raise ValueError(f"mask must have shape (M, N) = ({x_query.shape[0]}, "
                         f"{x_train.shape[0]}) or (N,), got {_shape(mask)}")
    squared = (x_query.unsqueeze(1) - x_train.unsqueeze(0)).pow(2)  # (M, 1) - (1, N) -> (M, N)
    # Softmax ignores a shift per row: subtracting each row's smallest allowed distance keeps the
    # nearest point's score at exactly 0, so even a tiny h gives the nearest neighbour, not NaN.
    allowed = squared if mask is None else squared.masked_fill(~mask, math.inf)
    nearest = allowed.amin(dim=-1, keepdim=True)  # (M, 1)
    nearest = torch.where(torch.isfinite(nearest), nearest, torch.zeros_like(nearest))
    denominator = max(2 * bandwidth**2, torch.finfo(squared.dtype).tiny)  # h = inf gives inf
    scores = -(squared - nearest) / denominator  # (M, N), all <= 0
    weights = masked_softmax(scores, mask)  # (M, N)
    predictions = weights @ y_train  # (M, N) @ (N,) or (N, C) -> (M,) or (M, C)
    return predictions, weights


def leave_one_out_error(x: torch.Tensor, y: torch.Tensor, bandwidth: float) -> float:
    """Mean squared error of predicting each ``y_i`` from all the other points,
    ``mean_i (y_i − f_{−i}(x_i))²``: the diagonal of the attention mask is False, so no point
    looks at itself. A fair way to choose the bandwidth. Shapes: ``x`` (N,), ``y`` (N,)."""
    if x.shape[0] < 2:
        raise ValueError(f"leave-one-out needs at least 2 points, got {x.shape[0]}")
    not_self = ~torch.eye(x.shape[0], dtype=torch.bool, device=x.device)  # (N, N)
    predictions, _ = nadaraya_watson(x, x, y, bandwidth, mask=not_self)
    return (predictions - y).pow(2).mean().item()


# ----------------------------------------------------------------------------------------------
# Document -> answer lookup: attention over encoded sentences
# ----------------------------------------------------------------------------------------------

STOP_WORDS = frozenset(
    "a an the is are was of in on at to as does do did what which who whom where when how ? "
    "'s".split()
)
PEOPLE = ("alice", "bruno", "chen", "dana", "emil", "farah", "goran", "hana", "ivan", "julia")
# relation: (fact template, question template, possible answers)
RELATIONS = {
    "home": ("{s} lives in {o}", "where does {s} live?",
             ("paris", "lyon", "oslo", "lima", "cairo", "delhi", "quito", "rome")),
    "job": ("{s} works as a {o}", "what does {s} work as?",
            ("baker", "pilot", "nurse", "farmer", "lawyer", "painter", "chemist", "tailor")),
    "pet": ("{s} owns a pet {o}", "which pet does {s} own?",
            ("cat", "dog", "parrot", "rabbit", "tortoise", "goldfish", "hamster", "ferret")),
    "colour": ("{s} likes the colour {o}", "which colour does {s} like?",
               ("red", "green", "blue", "yellow", "purple", "orange", "black", "white")),
    "music": ("{s} plays the {o}", "what does {s} play?",
              ("piano", "violin", "guitar", "drums", "flute", "cello", "trumpet", "harp")),
}


def tokenize(text: str) -> list[str]:
    """Lower-case content words: punctuation split off, stop words dropped, a plural or
    third-person ``s`` stripped (``lives`` -> ``live``), so that a question and the sentence that
    answers it share their words."""
    words = text.lower().replace("?", " ? ").replace("'s", " 's").replace(",", " ").split()
    content = [word for word in words if word not in STOP_WORDS]
    return [word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss")
            else word for word in content]


def word_vector(word: str, dim: int = 256, seed: int = 0) -> torch.Tensor:
    """A random unit vector for ``word``, the same for the same (word, dim, seed) in any order
    and any process (seeded from a CRC32 of the word, not Python's salted ``hash``).
    Random vectors in high dimension are nearly orthogonal, so different words barely match.
    Shape: (dim,), on the CPU."""
    generator = make_generator(zlib.crc32(f"{seed}:{word}".encode()))
    vector = torch.randn(dim, generator=generator)
    return vector / vector.norm()


def embed_text(text: str, dim: int = 256, seed: int = 0) -> torch.Tensor:
    """Bag-of-words sentence vector: the sum of :func:`word_vector` over :func:`tokenize`'s
    words, scaled to unit length (zero for a text with no content word). Shape: (dim,)."""
    words = tokenize(text)
    if not words:
        return torch.zeros(dim)
    total = torch.stack([word_vector(word, dim, seed) for word in words]).sum(dim=0)  # (d,)
    return total / total.norm()


@dataclass
class Document:
    """A generated document of facts ``"alice lives in paris"``: for fact ``i``, the key sentence
    ``key_texts[i]`` (the fact without its answer, ``"alice lives in"``), the answer
    ``answers[i]`` and a question it answers, ``questions[i]``.

    Shapes: ``keys`` (N, d), the embedded key sentences; ``values`` (N, d), the embedded answers.
    """

    facts: list[str]
    key_texts: list[str]
    answers: list[str]
    questions: list[str]
    keys: torch.Tensor
    values: torch.Tensor
    dim: int
    seed: int

    def __len__(self) -> int:
        return len(self.facts)

    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        """Embed questions with the document's word vectors. Shape: (len(texts), d)."""
        return torch.stack([embed_text(text, self.dim, self.seed) for text in texts])  # (Q, d)


def make_document(n_people: int = 4, relations: Sequence[str] | None = None, *,
                  dim: int = 256, seed: int = 0) -> Document:
    """Generate a document: for each of ``n_people`` people and each relation (default: all of
    :data:`RELATIONS`), one fact with an answer drawn by a seeded generator. Each item is
    encoded first, ``k_i = embed(key sentence)``, ``v_i = embed(answer)``, the ``E = f_enc(V)``
    step of attention.

    Shapes: ``keys`` and ``values`` (n_people · n_relations, dim), on the CPU.
    """
    relations = list(RELATIONS if relations is None else relations)
    unknown = [name for name in relations if name not in RELATIONS]
    if unknown or not relations:
        raise ValueError(f"relations must be a non-empty subset of {list(RELATIONS)}, "
                         f"got {relations}")
    if not 1 <= n_people <= len(PEOPLE):
        raise ValueError(f"n_people must be between 1 and {len(PEOPLE)}, got {n_people}")
    generator = make_generator(seed)
    facts, key_texts, answers, questions = [], [], [], []
    for person in PEOPLE[:n_people]:
        for name in relations:
            fact, question, choices = RELATIONS[name]
            answer = choices[int(torch.randint(len(choices), (1,), generator=generator))]
            facts.append(fact.format(s=person, o=answer))
            key_texts.append(fact.format(s=person, o="").strip())
            answers.append(answer)
            questions.append(question.format(s=person))
    keys = torch.stack([embed_text(text, dim, seed) for text in key_texts])  # (N, d)
    values = torch.stack([embed_text(answer, dim, seed) for answer in answers])  # (N, d)
    return Document(facts, key_texts, answers, questions, keys, values, dim, seed)


def document_lookup(queries: torch.Tensor, document: Document, *, temperature: float = 0.1,
                    mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Soft attention of each query over the document's sentences,
    ``a = softmax(K q / τ)``, ``output = Σ_i a_i v_i``, where the rows of ``K`` are the encoded
    key sentences and the ``v_i`` the encoded answers. Runs on the queries' device.

    Shapes: ``queries`` (B, d), ``mask`` (B, N) bool -> output (B, d), weights (B, N).
    """
    if queries.dim() != 2 or queries.shape[-1] != document.keys.shape[-1]:
        raise ValueError(f"queries must have shape (B, d) with d = {document.keys.shape[-1]}, "
                         f"got {_shape(queries)}")
    batch = queries.shape[0]
    keys = document.keys.to(queries.device).expand(batch, -1, -1)  # (N, d) -> (B, N, d)
    values = document.values.to(queries.device).expand(batch, -1, -1)  # (N, d) -> (B, N, d)
    return soft_attention(queries, keys, values, mask=mask, temperature=temperature)


def decode_answers(outputs: torch.Tensor, document: Document) -> list[str]:
    """The document's answer whose vector is closest (cosine) to each output vector.

    Shapes: ``outputs`` (B, d) -> B strings.
    """
    names = sorted(set(document.answers))
    table = document.embed(names).to(outputs.device)  # (A, d), unit rows
    similarity = outputs @ table.T  # (B, d) @ (d, A) -> (B, A)
    return [names[i] for i in similarity.argmax(dim=-1).tolist()]


def answer_questions(questions: Sequence[str], document: Document, *,
                     temperature: float = 0.1) -> tuple[list[str], torch.Tensor]:
    """Answer questions in words: embed, attend over the document, decode the nearest answer.

    Returns the answers and the attention weights (len(questions), N) for plotting.
    """
    outputs, weights = document_lookup(document.embed(questions), document,
                                       temperature=temperature)
    return decode_answers(outputs, document), weights
