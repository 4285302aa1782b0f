"""Beam search shared by the captioner (lesson 07) and the Transformer (lessons 10-11).

Keep the n_beam most probable partial outputs of every input; at each step extend each by every
word, score ``log p(y_1 … y_t | x) = Σ_{t' ≤ t} log p(y_t' | y_<t', x)``, and keep the n_beam
best of the n_beam·V extensions.
A finished hypothesis (it produced EOS) continues only with PAD, at no cost. Beam size 1 is
greedy decoding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from course_lib.arguments import check_positive_int
from course_lib.tokens import BOS_ID, EOS_ID, PAD_ID

# step(previous words (B·n_beam,), state) -> (log-probabilities (B·n_beam, V), new state,
#                                             something to keep per word (B·n_beam, ...) or None)
StepFn = Callable[[torch.Tensor, Any], tuple[torch.Tensor, Any, torch.Tensor | None]]
# reorder(state, rows (B·n_beam,)) -> the state of the surviving hypotheses, in that order
ReorderFn = Callable[[Any, torch.Tensor], Any]


class BeamResult(NamedTuple):
    """The best hypothesis of every input. Shapes: ``tokens`` (B, T') with PAD after EOS,
    ``scores`` (B,) summed log-probabilities, ``extras`` (B, T', ...) or None."""

    tokens: torch.Tensor
    scores: torch.Tensor
    extras: torch.Tensor | None


def length_normalised(scores: torch.Tensor, lengths: torch.Tensor, alpha: float) -> torch.Tensor:
    """GNMT's ranking score ``log p(y | x) / lp(y)``, ``lp(y) = ((5 + |y|) / 6)^α`` (Wu et al.,
    2016); α = 0 ranks by log p(y | x) alone (which favours short outputs)."""
    return scores / ((5.0 + lengths.to(scores.dtype)) / 6.0) ** alpha


def _settled(scores: torch.Tensor, finished: torch.Tensor) -> bool:
    """True when every input's best finished hypothesis scores at least as high as its best
    live one: extending a live hypothesis only adds log-probabilities ≤ 0, so (ranking by
    log p(y | x) alone) none can overtake it any more. Shapes: (B, n_beam) each."""
    best_finished = scores.masked_fill(~finished, float("-inf")).max(dim=-1).values  # (B,)
    best_live = scores.masked_fill(finished, float("-inf")).max(dim=-1).values  # (B,)
    return bool((best_finished >= best_live).all())


def beam_search(step: StepFn, state: Any, reorder: ReorderFn, batch: int, beam_size: int,
                max_len: int, device: torch.device | str, alpha: float = 0.0) -> BeamResult:
    """Beam search over ``batch`` inputs; ``state`` already holds B·n_beam rows (each input's row
    repeated n_beam = ``beam_size`` times, input-major). Returns the best finished hypothesis of
    every input (the best unfinished one where none finished within ``max_len``), ranked by
    :func:`length_normalised` with ``alpha``. With ``alpha`` = 0 the search stops as soon as no
    live hypothesis can overtake the best finished one (same result, fewer steps)."""
    batch = check_positive_int("batch", batch)
    beam_size = check_positive_int("beam_size", beam_size)
    max_len = check_positive_int("max_len", max_len)
    K = beam_size  # n_beam
    scores = torch.full((batch, K), float("-inf"), device=device)
    scores[:, 0] = 0.0  # one live hypothesis per input to start with
    previous = torch.full((batch * K,), BOS_ID, dtype=torch.long, device=device)
    finished = torch.zeros(batch, K, dtype=torch.bool, device=device)
    tokens = torch.zeros(batch, K, 0, dtype=torch.long, device=device)
    extras: torch.Tensor | None = None
    rows = torch.arange(batch, device=device).unsqueeze(1)  # (B, 1)
    for _ in range(max_len):
        log_probs, state, extra = step(previous, state)
        log_probs = log_probs.view(batch, K, -1)  # (B, n_beam, V)
        vocab = log_probs.shape[-1]
        log_probs = log_probs.masked_fill(finished.unsqueeze(-1), float("-inf"))
        log_probs[..., PAD_ID] = torch.where(finished, 0.0, float("-inf"))
        total = (scores.unsqueeze(-1) + log_probs).view(batch, K * vocab)  # (B, n_beam·V)
        scores, best = total.topk(K, dim=-1)  # (B, n_beam)
        beam, word = best // vocab, best % vocab  # (B, n_beam) each
        was_finished = finished[rows, beam]  # (B, n_beam)
        tokens = torch.cat([tokens[rows, beam], word.unsqueeze(-1)], dim=-1)  # (B, n_beam, t + 1)
        if extra is not None:
            extra = extra.view(batch, K, *extra.shape[1:])[rows, beam]  # (B, n_beam, ...)
            pad = was_finished.view(batch, K, *([1] * (extra.dim() - 2)))
            extra = extra.masked_fill(pad, 0.0).unsqueeze(2)  # (B, n_beam, 1, ...)
            extras = extra if extras is None else torch.cat([extras[rows, beam], extra], dim=2)
        finished = was_finished | (word == EOS_ID)
        flat = (rows * K + beam).view(-1)  # (B·n_beam,) the surviving hypotheses' rows
        state = reorder(state, flat)
        previous = word.view(-1)
        if finished.all() or (alpha == 0 and _settled(scores, finished)):
            break
    lengths = (tokens != PAD_ID).sum(dim=-1)  # (B, n_beam), EOS included
    ranking = length_normalised(scores, lengths, alpha)
    ranked = torch.where(finished, ranking, ranking - 1e9).argmax(dim=-1)  # (B,)
    index = torch.arange(batch, device=device)
    return BeamResult(tokens[index, ranked], scores[index, ranked],
                      None if extras is None else extras[index, ranked])
