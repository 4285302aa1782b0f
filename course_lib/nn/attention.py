"""Attention building blocks: score functions, the masked softmax, context vectors, local windows.

Attention at one decoder step compares a query ``s`` (the decoder state) with every key ``h_j``
(the encoder's annotations), turns the scores into weights and returns their weighted average:

    e_j = score(s, h_j),    a = softmax(e) over the allowed positions,    c = Σ_j a_j h_j.

Score functions (Bahdanau et al., 2015; Luong et al., 2015), in the notation of
``docs/notation.md`` (sizes d_q, d_k of the query and key, d_a of the additive score's hidden
layer):

- additive   e_j = vᵀ tanh(W s + U h_j + b)
- dot        e_j = sᵀ h_j          (optionally divided by √d_k: ``scaled=True``)
- general    e_j = sᵀ W_g h_j      (optionally divided by √d_q)
- concat     e_j = vᵀ tanh(W_a [s; h_j] + b_a)  (the additive score with W_a = [W U]; Luong's
             form)

Every score module splits its work in two: ``prepare(keys)`` does the key-side part once per
source sentence, ``forward(query, prepared)`` the query-side part at every decoder step. Queries
may be one step (B, d_q) or all steps at once (B, T, d_q).

Masks are boolean with True = "may attend" (the convention of
``torch.nn.functional.scaled_dot_product_attention``), with the rank of the scores they mask:
size-1 dimensions broadcast, missing ones do not (a (B, S) padding mask on (B, T, S) scores is
``mask[:, None, :]``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from course_lib.arguments import (
    FLOATING,
    check_choice,
    check_int,
    check_lengths,
    check_mask,
    check_module_input,
    check_same_device,
    check_same_dtype,
    check_tensor,
    shape_of,
)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None,
                   dim: int = -1) -> torch.Tensor:
    """``a_j = exp(e_j) / Σ_{j': m_j'} exp(e_j')`` where ``m_j`` is True, ``a_j = 0`` otherwise.

    Masked scores are filled with ``torch.finfo(dtype).min`` (finite, so fp16/bf16 never
    overflow to NaN), and the weights of masked items are then set to exactly zero. A fully
    masked row therefore gives all-zero weights instead of NaN.

    Shapes: ``scores`` (..., S) floating point, ``mask`` of the same rank, each dimension equal
    to the scores' or 1 -> weights of ``scores``' shape.
    """
    check_tensor("scores", scores, dtype=FLOATING)
    if mask is None:
        return torch.softmax(scores, dim=dim)
    check_mask("mask", mask, shape_of(scores), device=scores.device)
    filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(filled, dim=dim).masked_fill(~mask, 0.0)


def attention_context(weights: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """The context vector, a weighted average of the values: ``c = Σ_j a_j v_j``.

    Shapes: ``weights`` (B, S) or (B, T, S), ``values`` (B, S, d_v) -> (B, d_v) or (B, T, d_v).
    """
    check_tensor("weights", weights, dtype=FLOATING)
    check_tensor("values", values, dtype=FLOATING)
    check_same_device(weights=weights, values=values)
    check_same_dtype(weights=weights, values=values)
    if values.dim() != 3 or weights.dim() not in (2, 3) or weights.shape[0] != values.shape[0] \
            or weights.shape[-1] != values.shape[1]:
        raise ValueError(f"expected weights (B, S) or (B, T, S) and values (B, S, d_v) with the "
                         f"same B and S, got {shape_of(weights)} and {shape_of(values)}")
    if weights.dim() == 2:
        return (weights.unsqueeze(1) @ values).squeeze(1)  # (B, 1, S) @ (B, S, d_v) -> (B, d_v)
    return weights @ values  # (B, T, S) @ (B, S, d_v) -> (B, T, d_v)


def _check_query(query: torch.Tensor, prepared: torch.Tensor, module: AttentionScore) -> None:
    check_tensor("query", query, dtype=FLOATING)
    # prepared comes from the module's parameters: matching it matches them
    check_same_device(prepared=prepared, query=query)
    check_same_dtype(prepared=prepared, query=query)
    query_size = module.query_size
    if query.dim() not in (2, 3) or query.shape[-1] != query_size \
            or query.shape[0] != prepared.shape[0]:
        raise ValueError(f"expected query (B, d_q) or (B, T, d_q) with B = {prepared.shape[0]} "
                         f"and d_q = {query_size}, got {shape_of(query)}")


def _check_keys(keys: torch.Tensor, module: AttentionScore) -> None:
    check_tensor("keys", keys, dtype=FLOATING)
    check_module_input("keys", keys, module)
    key_size = module.key_size
    if keys.dim() != 3 or keys.shape[-1] != key_size:
        raise ValueError(f"expected keys (B, S, {key_size}), got {shape_of(keys)}")


class AttentionScore(nn.Module):
    """Base class: ``score(query, keys)`` = ``forward(query, prepare(keys))``.

    Shapes: ``query`` (B, d_q) or (B, T, d_q), ``keys`` (B, S, d_k) -> scores (B, S) or (B, T, S).
    """

    query_size: int
    key_size: int

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        _check_keys(keys, self)
        return keys

    def score(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return self(query, self.prepare(keys))

    @staticmethod
    def _dot(query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        if query.dim() == 2:  # (B, S, d_q) @ (B, d_q, 1) -> (B, S)
            return (prepared @ query.unsqueeze(-1)).squeeze(-1)
        return query @ prepared.transpose(1, 2)  # (B, T, d_q) @ (B, d_q, S) -> (B, T, S)


class DotScore(AttentionScore):
    """Luong's dot score ``e_j = sᵀ h_j``; no parameters, so d_q must equal d_k.

    With ``scaled=True``, ``e_j = sᵀ h_j / √d_k`` (Vaswani et al., 2017): a sum of d_k products
    of unit-variance numbers has variance d_k, and the factor brings it back to one, so the
    softmax does not start out saturated.
    """

    def __init__(self, query_size: int, key_size: int | None = None,
                 scaled: bool = False) -> None:
        super().__init__()
        key_size = query_size if key_size is None else key_size
        if key_size != query_size:
            raise ValueError(f"the dot score needs equal query and key sizes, got {query_size} "
                             f"and {key_size}")
        self.query_size = self.key_size = query_size
        self.scaled = scaled

    def forward(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        _check_query(query, prepared, self)
        scores = self._dot(query, prepared)
        return scores / self.query_size ** 0.5 if self.scaled else scores


class GeneralScore(DotScore):
    """Luong's general (bilinear) score ``e_j = sᵀ W_g h_j``; ``prepare`` computes ``W_g h_j`` once.

    With ``scaled=True``, ``e_j = sᵀ W_g h_j / √d_q`` (see :class:`DotScore`; d_q = d_k in the
    course's models). Shapes: the layer ``W`` stores W_g, (d_q, d_k).
    """

    def __init__(self, query_size: int, key_size: int, scaled: bool = False) -> None:
        super().__init__(query_size, scaled=scaled)  # the dot score of s with W_g h_j (d_q)
        self.key_size = key_size
        self.W = nn.Linear(key_size, query_size, bias=False)

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        _check_keys(keys, self)
        return self.W(keys)  # W_g h_j, (B, S, d_q)


class AdditiveScore(AttentionScore):
    """Bahdanau's additive score ``e_j = vᵀ tanh(W s + U h_j + b)``; ``prepare`` computes
    ``U h_j + b`` (``b`` is the bias of the ``U`` layer).

    Shapes: ``W`` (d_a, d_q), ``U`` (d_a, d_k), ``v`` (d_a,) (a layer with weight (1, d_a)), with
    d_a = ``attention_size``.
    """

    def __init__(self, query_size: int, key_size: int, attention_size: int | None = None) -> None:
        super().__init__()
        self.query_size, self.key_size = query_size, key_size
        attention_size = attention_size or query_size
        self._projections(attention_size)
        self.v = nn.Linear(attention_size, 1, bias=False)

    def _projections(self, attention_size: int) -> None:
        """The layers inside the tanh: ``W`` (d_a, d_q), and ``U`` (d_a, d_k) with ``b``."""
        self.W = nn.Linear(self.query_size, attention_size, bias=False)
        self.U = nn.Linear(self.key_size, attention_size, bias=True)

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        _check_keys(keys, self)
        return self.U(keys)  # (B, S, d_a)

    def _query_part(self, query: torch.Tensor) -> torch.Tensor:
        return self.W(query)

    def forward(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        _check_query(query, prepared, self)
        projected = self._query_part(query)  # (B, d_a) or (B, T, d_a)
        if query.dim() == 2:
            hidden = torch.tanh(projected.unsqueeze(1) + prepared)  # (B, 1, d_a) + (B, S, d_a)
        else:
            hidden = torch.tanh(projected.unsqueeze(2) + prepared.unsqueeze(1))  # (B, T, S, d_a)
        return self.v(hidden).squeeze(-1)  # (B, S) or (B, T, S)


class ConcatScore(AdditiveScore):
    """Luong's concat score ``e_j = vᵀ tanh(W_a [s; h_j] + b_a)``.

    One matrix over the concatenation is the additive score in disguise: with
    ``W_a = [W U]`` (columns split at d_q), ``W_a [s; h] = W s + U h``. The module keeps the one
    matrix ``W_a`` (d_a, d_q + d_k), with its bias b_a, and splits it, so the query part still
    runs once per step.
    """

    def _projections(self, attention_size: int) -> None:
        """The layer inside the tanh: ``W_a`` (d_a, d_q + d_k) with ``b_a``."""
        self.W_a = nn.Linear(self.query_size + self.key_size, attention_size, bias=True)

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        _check_keys(keys, self)
        key_columns = self.W_a.weight[:, self.query_size:]  # (d_a, d_k)
        return keys @ key_columns.T + self.W_a.bias  # (B, S, d_a)

    def _query_part(self, query: torch.Tensor) -> torch.Tensor:
        return query @ self.W_a.weight[:, :self.query_size].T  # (B, d_a) or (B, T, d_a)


SCORES = {"additive": AdditiveScore, "dot": DotScore, "general": GeneralScore,
          "concat": ConcatScore}


SCALABLE_SCORES = ("dot", "general")


def make_score(name: str, query_size: int, key_size: int, scaled: bool = False
               ) -> AttentionScore:
    """A score module by name; ``scaled`` (divide by √d_q, which is √d_k for the dot score) exists
    for the dot and general scores."""
    check_choice("score", name, SCORES)
    if scaled and name not in SCALABLE_SCORES:
        raise ValueError(f"only the {' and '.join(SCALABLE_SCORES)} scores can be scaled, "
                         f"got score={name!r} with scaled=True")
    if name in SCALABLE_SCORES:
        return SCORES[name](query_size, key_size, scaled=scaled)
    return SCORES[name](query_size, key_size)


def padding_mask(lengths: torch.Tensor | Sequence[int], max_len: int) -> torch.Tensor:
    """True at the first ``lengths[b]`` positions of every row; ``lengths`` are integers in
    [0, ``max_len``] (0: an empty row, all False), a tensor or a list. Shapes: (B,) ->
    (B, max_len), on the device of ``lengths``."""
    max_len = check_int("max_len", max_len, minimum=0)
    lengths = check_lengths("lengths", lengths, max_len, minimum=0)
    positions = torch.arange(max_len, device=lengths.device)  # (S,)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)  # (B, S)


def local_attention(scores: torch.Tensor, center: torch.Tensor, half_width: int,
                    mask: torch.Tensor | None = None, gaussian: bool = False
                    ) -> torch.Tensor:
    """Luong's local attention: weights only inside the window ``[p − r, p + r]``.

    ``a_j = softmax_{j ∈ window}(e_j)``, zero outside the window (and at padding), with
    r = ``half_width`` and positions j counting from 0. With ``gaussian=True`` (local-p) the
    weights are further multiplied by the Gaussian ``exp(−(j − p)² / (2 (r/2)²))`` of standard
    deviation r / 2 (Luong et al., 2015, eq. 10; max(r, 1) / 2 here, so that r = 0 works); they
    then sum to at most one, and ``p`` (a real number) receives a gradient through the Gaussian.

    Shapes: ``scores`` (B, S), ``center`` p (B,), ``mask`` (B, S) bool -> weights (B, S).
    """
    check_tensor("scores", scores, dtype=FLOATING)
    check_tensor("center", center)
    if scores.dim() != 2 or center.shape != scores.shape[:1]:
        raise ValueError(f"expected scores (B, S) and center (B,), got {shape_of(scores)} and "
                         f"{shape_of(center)}")
    check_same_device(scores=scores, center=center)
    half_width = check_int("half_width", half_width, minimum=0)
    check_mask("mask", mask, shape_of(scores), what="(B, S)", device=scores.device)
    positions = torch.arange(scores.shape[1], device=scores.device, dtype=scores.dtype)  # (S,)
    distance = positions.unsqueeze(0) - center.unsqueeze(1).to(scores.dtype)  # (B, S)
    window = distance.abs() <= half_width  # (B, S)
    if mask is not None:
        window = window & mask
    weights = masked_softmax(scores, window)
    if gaussian:
        sigma = max(half_width, 1) / 2
        weights = weights * torch.exp(-distance.pow(2) / (2 * sigma**2))
    return weights

