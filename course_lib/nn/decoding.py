"""Greedy decoding and beam search, shared by every model that generates: the translators
(lessons 02-05), the captioner (lesson 07) and the Transformer (lessons 10-11).

Both call a model's *step* (:data:`StepFn`): the previous word of each hypothesis and the
decoder's state in, the next word's log-probabilities ``log p(w | y_<t, x)`` and the new state
out. :func:`greedy_search` keeps one hypothesis per input and extends it by its most probable
word, ``y_t = argmax_w log p(w | y_<t, x)``. :func:`beam_search` keeps the n_beam most
probable partial outputs of every input; at each step it extends each by every word, scores
``log p(y_1 … y_t | x) = Σ_{t' ≤ t} log p(y_t' | y_<t', x)``, and keeps the n_beam best of the
n_beam·V extensions: with n_beam = 1 that is greedy decoding again.
A finished hypothesis (it produced EOS) continues only with PAD, at no cost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from course_lib.arguments import check_positive_int
from course_lib.tokens import BOS_ID, EOS_ID, PAD_ID

# step(previous words (B·n_beam,), state) -> (log-probabilities (B·n_beam, V), new state,
#                                             something to keep per word (B·n_beam, ...) or None)
# For greedy_search the step may return logits instead (see there); n_beam = 1.
StepFn = Callable[[torch.Tensor, Any], tuple[torch.Tensor, Any, torch.Tensor | None]]
# reorder(state, rows (B·n_beam,)) -> the state of the surviving hypotheses, in that order
ReorderFn = Callable[[Any, torch.Tensor], Any]


class BeamResult(NamedTuple):
    """The best hypothesis of every input (greedy's only one). Shapes: ``tokens`` (B, T') with
    PAD after EOS, ``scores`` (B,) summed log-probabilities, ``extras`` (B, T', ...) (zero after
    EOS) or None."""

    tokens: torch.Tensor
    scores: torch.Tensor
    extras: torch.Tensor | None


def log_softmax_step(step: StepFn) -> StepFn:
    """``step`` with its logits z (N, V) turned into log-probabilities (float32),
    ``log p(w) = z_w − log Σ_v exp z_v``, as :func:`beam_search` needs them."""

    def normalised(previous: torch.Tensor, state: Any):
        logits, state, extra = step(previous, state)
        return torch.log_softmax(logits.float(), dim=-1), state, extra

    return normalised


def greedy_search(step: StepFn, state: Any, batch: int, max_len: int,
                  device: torch.device | str, stop_at_eos: bool = True) -> BeamResult:
    """Greedy decoding, ``y_t = argmax_w log p(w | y_<t, x)``, from BOS until every input has
    produced EOS or ``max_len`` words; ``state`` holds the B = ``batch`` rows of the decoder.

    This is :func:`beam_search` with ``beam_size=1``, on the same ``step``: one hypothesis per
    input, extended by its best word, so the states never need reordering (beam search also
    never extends a live hypothesis by PAD, which greedy takes if the step ranks it first: the
    captioner's step rules PAD out, a trained translator never prefers it). Only the argmax
    matters, so the step may return logits z instead of log-probabilities: ``log p(w) = z_w −
    log Σ_v exp z_v`` subtracts the same number from every z_w and keeps the argmax (and the
    logits' argmax is exact, where rounding the subtraction could tie two nearly equal words).
    ``stop_at_eos=False`` runs exactly ``max_len`` steps, EOS chosen like any other word and
    no PAD after it (lesson 11 times the steps that way).

    Returns tokens (B, T') with PAD after each row's EOS, scores (B,): the sum of the
    chosen words' step outputs (``log p(y | x)`` when the step returns log-probabilities),
    and extras (B, T', ...), zero after EOS, or None when the step keeps nothing.
    """
    if not callable(step):
        raise TypeError(f"step must be a function (previous, state) -> (log-probabilities, "
                        f"state, extra), got {type(step).__name__}")
    batch = check_positive_int("batch", batch)
    max_len = check_positive_int("max_len", max_len)
    if not isinstance(stop_at_eos, bool):
        raise TypeError(f"stop_at_eos must be a bool, got {type(stop_at_eos).__name__}")
    previous = torch.full((batch,), BOS_ID, dtype=torch.long, device=device)
    finished = torch.zeros(batch, dtype=torch.bool, device=device)
    scores = torch.zeros(batch, dtype=torch.float32, device=device)
    tokens: list[torch.Tensor] = []
    extras: list[torch.Tensor] = []
    for _ in range(max_len):
        log_probs, state, extra = step(previous, state)
        if log_probs.dim() != 2 or log_probs.shape[0] != batch:
            raise ValueError(f"step must return log-probabilities of shape (batch, V) = "
                             f"({batch}, V), got {tuple(log_probs.shape)}")
        best, word = log_probs.max(dim=-1)  # (B,) each
        scores = scores + best.masked_fill(finished, 0.0)
        word = word.masked_fill(finished, PAD_ID)  # (B,)
        tokens.append(word)
        if extra is not None:
            pad = finished.view(batch, *([1] * (extra.dim() - 1)))  # (B, 1, ...)
            extras.append(extra.masked_fill(pad, 0.0))
        previous = word
        if stop_at_eos:
            finished = finished | (word == EOS_ID)
            if finished.all():
                break
    return BeamResult(torch.stack(tokens, dim=1),  # (B, T')
                      scores, torch.stack(extras, dim=1) if extras else None)  # (B, T', ...)


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
