"""Word embeddings and dot-product similarity (lesson 01).

An embedding matrix ``E`` (V, d) holds one row ``E[w]`` per word ``w`` of a vocabulary of V
words. Looking a word up reads its row, which is the same as multiplying its one-hot vector by
``E``. Words with similar meanings get similar rows, measured by the dot product or the cosine.
Softmax turns such scores into probabilities, and the same dot product with an *output* embedding
matrix maps a decoder state back to a word: the last step of every language model in this course.

Real vectors (GloVe) are loaded by :mod:`course_lib.data.glove`. Every function takes its device
from its inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from course_lib.arguments import (
    FLOATING,
    check_positive_int,
    check_same_device,
    check_same_dtype,
    check_temperature,
    check_tensor,
    check_token_ids,
)


def _need_float(name: str, value: object) -> torch.Tensor:
    return check_tensor(name, value, dtype=FLOATING)


def _need_matrix(name: str, value: object, what: str = "(V, d)") -> torch.Tensor:
    tensor = _need_float(name, value)
    if tensor.dim() != 2:
        raise ValueError(f"{name} must be a 2-D matrix {what}, got shape {tuple(tensor.shape)}")
    return tensor


# One-hot vectors and embedding lookups


def _check_indices(indices: object, vocab_size: int) -> torch.Tensor:
    return check_token_ids("indices", indices, vocab_size).long()


def one_hot(indices: torch.Tensor, vocab_size: int,
            dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """One-hot vectors: ``x_w`` has a 1 at position ``w`` and 0 elsewhere.

    Shapes: ``indices`` (...) integer -> (..., vocab_size) of ``dtype``.
    """
    vocab_size = check_positive_int("vocab_size", vocab_size)
    return torch.nn.functional.one_hot(_check_indices(indices, vocab_size), vocab_size).to(dtype)


def embedding_lookup(embeddings: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """The rows of ``E`` for the given word ids: ``e_w = E[w]`` (what ``nn.Embedding`` does).

    Shapes: ``embeddings`` (V, d), ``indices`` (...) integer -> (..., d).
    """
    embeddings = _need_matrix("embeddings", embeddings)
    return embeddings[_check_indices(indices, embeddings.shape[0])]


def one_hot_lookup(embeddings: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """The same lookup as a matrix product: ``e_w = x_wᵀ E`` with ``x_w`` the one-hot vector.

    Every product but one is multiplied by zero, so the result equals ``E[w]`` exactly; it just
    costs V·d multiply-adds per word instead of a copy of d numbers.

    Shapes: ``embeddings`` (V, d), ``indices`` (...) integer -> (..., d).
    """
    embeddings = _need_matrix("embeddings", embeddings)
    indices = check_tensor("indices", indices).to(embeddings.device)
    x = one_hot(indices, embeddings.shape[0], dtype=embeddings.dtype)
    return x @ embeddings  # (..., V) @ (V, d) -> (..., d)


# Similarity


def _check_same_width(a: torch.Tensor, b: torch.Tensor, names: str,
                      product: bool = False) -> None:
    """Same device, same last dimension, and for a matrix ``product`` the same dtype."""
    first, second = names.split(" and ")
    check_same_device(**{first: a, second: b})
    if product:
        check_same_dtype(**{first: a, second: b})
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"{names} must have the same vector size d (last dimension), got "
                         f"shapes {tuple(a.shape)} and {tuple(b.shape)}")


def cosine_similarity(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Cosine of the angle between vectors, along the last dimension:
    ``cos(a, b) = a·b / (max(‖a‖, ε) · max(‖b‖, ε))``, in [-1, 1].

    Equals ``torch.nn.functional.cosine_similarity(a, b, dim=-1)``; a zero vector gives 0.

    Shapes: ``a`` (..., d), ``b`` (..., d), broadcast against each other -> (...).
    """
    a, b = _need_float("a", a), _need_float("b", b)
    _check_same_width(a, b, "a and b")
    a_norm = a.norm(dim=-1, keepdim=True).clamp_min(eps)
    b_norm = b.norm(dim=-1, keepdim=True).clamp_min(eps)
    return ((a / a_norm) * (b / b_norm)).sum(dim=-1)


def cosine_matrix(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """All pairwise cosines: ``C[i, j] = cos(a_i, b_j)``, i.e. ``Â B̂ᵀ`` of unit-length rows.

    Shapes: ``a`` (N, d), ``b`` (M, d) -> (N, M).
    """
    a, b = _need_matrix("a", a, "(N, d)"), _need_matrix("b", b, "(M, d)")
    _check_same_width(a, b, "a and b", product=True)
    a_unit = a / a.norm(dim=-1, keepdim=True).clamp_min(eps)  # (N, d)
    b_unit = b / b.norm(dim=-1, keepdim=True).clamp_min(eps)  # (M, d)
    return a_unit @ b_unit.T  # (N, M)


# The dot product as a preference score: users and movies


def preference_scores(user_tastes: torch.Tensor, movie_features: torch.Tensor) -> torch.Tensor:
    """Predicted ratings of each movie by each user: ``R̂ = U Mᵀ``, ``R̂[u, m] = Σ_f U[u,f] M[m,f]``.

    Shapes: ``user_tastes`` (U, F), ``movie_features`` (M, F) -> (U, M).
    """
    user_tastes = _need_matrix("user_tastes", user_tastes, "(U, F)")
    movie_features = _need_matrix("movie_features", movie_features, "(M, F)")
    _check_same_width(user_tastes, movie_features, "user_tastes and movie_features",
                      product=True)
    return user_tastes @ movie_features.T  # (U, F) @ (F, M) -> (U, M)


# From scores to probabilities, and from a decoder state to a word


def softmax_with_temperature(scores: torch.Tensor, temperature: float = 1.0,
                             dim: int = -1) -> torch.Tensor:
    """``p_i = exp(e_i / τ) / Σ_j exp(e_j / τ)`` along ``dim``, with ``τ = temperature``.

    τ = 1 is the plain softmax; τ → 0 approaches a one-hot vector on the largest score (ties
    share it); large τ approaches the uniform distribution. Only τ > 0 is allowed.

    Shapes: ``scores`` (..., n) -> (..., n), every slice along ``dim`` sums to one.
    """
    scores = _need_float("scores", scores)
    temperature = check_temperature(temperature)
    # Shifting by the largest score first keeps e_i / τ from overflowing for a small τ.
    shifted = scores - scores.amax(dim=dim, keepdim=True) if scores.numel() else scores
    return torch.softmax(shifted / temperature, dim=dim)


def entropy(probs: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``H(p) = -Σ_i p_i log p_i`` in nats (0 for one-hot, log n for uniform over n).

    Shapes: ``probs`` (..., n) -> (...).
    """
    probs = _need_float("probs", probs)
    return -(probs * probs.clamp_min(1e-30).log()).sum(dim=dim)


def output_distribution(hidden: torch.Tensor, output_embeddings: torch.Tensor,
                        temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Score every word of the vocabulary against a decoder state ``s`` (``hidden``), then
    normalise: ``logits = W_out s`` (one dot product per word) and ``p = softmax(logits / τ)``.

    ``W_out`` (``output_embeddings``) is the output embedding matrix, one row per word (tied
    models reuse the input ``E``).

    Shapes: ``hidden`` (..., d), ``output_embeddings`` (V, d) -> logits (..., V), probs (..., V).
    """
    hidden = _need_float("hidden", hidden)
    output_embeddings = _need_matrix("output_embeddings", output_embeddings)
    _check_same_width(hidden, output_embeddings, "hidden and output_embeddings", product=True)
    logits = hidden @ output_embeddings.T  # (..., d) @ (d, V) -> (..., V)
    return logits, softmax_with_temperature(logits, temperature)


def predict_word(hidden: torch.Tensor, output_embeddings: torch.Tensor,
                 words: Sequence[str]) -> str | list[str]:
    """The most probable word, ``argmax_w (W_out s)_w`` (softmax and τ > 0 keep the order).

    Shapes: ``hidden`` (d,) -> one word; (B, d) -> a list of B words. ``output_embeddings``
    (V, d) and ``len(words) == V``.
    """
    hidden = _need_float("hidden", hidden)
    output_embeddings = _need_matrix("output_embeddings", output_embeddings)
    if hidden.dim() not in (1, 2):
        raise ValueError(f"hidden must be (d,) or (B, d), got shape {tuple(hidden.shape)}")
    if len(words) != output_embeddings.shape[0]:
        raise ValueError(f"words has {len(words)} entries but output_embeddings has "
                         f"{output_embeddings.shape[0]} rows; they must match")
    logits, _ = output_distribution(hidden, output_embeddings)
    best = logits.argmax(dim=-1)  # (,) or (B,)
    return words[int(best)] if hidden.dim() == 1 else [words[int(i)] for i in best]


def top_k_words(scores: torch.Tensor, words: Sequence[str], k: int = 5) -> list[tuple[str, float]]:
    """The ``k`` highest-scoring words as ``(word, score)`` pairs, best first.

    Shapes: ``scores`` (V,) with ``len(words) == V``.
    """
    scores = _need_float("scores", scores)
    if scores.dim() != 1 or scores.shape[0] != len(words):
        raise ValueError(f"scores must have shape (len(words),) = ({len(words)},), got "
                         f"{tuple(scores.shape)}")
    k = check_positive_int("k", k)
    values, indices = scores.topk(min(k, len(words)))
    return [(words[int(i)], float(v)) for v, i in zip(values, indices, strict=True)]


# Real vectors: GloVe 6B 50d


def pca_project(points: torch.Tensor, dims: int = 2) -> torch.Tensor:
    """Coordinates on the first ``dims`` principal axes: ``Z = (X − x̄) [u_1 … u_k]`` where
    ``u_1, …, u_k`` (``k = dims``) are the top right singular vectors of the centred ``X``. Each
    axis' sign is fixed so that its largest-magnitude loading is positive (the same picture on
    every run).

    Shapes: ``points`` (N, d) -> (N, dims).
    """
    points = _need_matrix("points", points, "(N, d)")
    if not isinstance(dims, int) or not 1 <= dims <= min(points.shape):
        raise ValueError(f"dims must be an int in [1, min(N, d)] = [1, {min(points.shape)}], got "
                         f"{dims!r}")
    centred = points - points.mean(dim=0, keepdim=True)  # (N, d)
    _, _, vh = torch.linalg.svd(centred, full_matrices=False)  # vh: (min(N, d), d)
    axes = vh[:dims]  # (dims, d)
    signs = torch.sign(axes.gather(1, axes.abs().argmax(dim=1, keepdim=True)))  # (dims, 1)
    return centred @ (axes * signs).T  # (N, d) @ (d, dims) -> (N, dims)


