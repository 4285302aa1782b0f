"""Lesson 03's trial of the three designs on a problem small enough to train in the lesson:
reversing sequences of random symbols (``data.sequence_tasks``), whose first output word needs
the last input word. One context for all steps loses accuracy as the sequences get longer;
re-reading the source at every step, conditioned on the decoder's state, and attention keep it;
the price of each is its time per training step, measured side by side."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from course_lib.arguments import check_choice, check_int, check_positive_int
from course_lib.data.sequence_tasks import sequence_task
from course_lib.models import count_parameters
from course_lib.models.attention_seq2seq import AttentionSeq2Seq, AttentionSeq2SeqConfig
from course_lib.models.reencode import ReencodeConfig, ReencodingSeq2Seq
from course_lib.models.seq2seq import Seq2Seq, Seq2SeqConfig, translation_loss
from course_lib.seeding import fixed_threads, seed_everything
from course_lib.timing import paired_medians
from course_lib.tokens import PAD_ID

SYMBOLS = 10
VOCAB = SYMBOLS + 4  # the symbols and PAD, BOS, EOS, UNK
DESIGNS = ("one context", "re-read per step", "attention")


@dataclass
class LengthTrial:
    """Teacher-forced token accuracy on held-out sequences by length bucket, per design; and
    the parameters and median seconds of one training step of each."""

    steps: int
    buckets: list[str]
    accuracy: dict[str, list[float]] = field(default_factory=dict)
    parameters: dict[str, int] = field(default_factory=dict)
    step_seconds: dict[str, float] = field(default_factory=dict)


def trial_model(design: str, embed_dim: int, hidden_size: int) -> nn.Module:
    """One design at the given sizes (all three read the same (B, S) sources)."""
    check_choice("design", design, DESIGNS)
    if design == "one context":
        return Seq2Seq(Seq2SeqConfig(VOCAB, VOCAB, embed_dim, hidden_size, context="both"))
    if design == "re-read per step":
        return ReencodingSeq2Seq(ReencodeConfig(VOCAB, VOCAB, embed_dim, hidden_size))
    return AttentionSeq2Seq(AttentionSeq2SeqConfig(VOCAB, VOCAB, embed_dim, hidden_size))


def _logits(model: nn.Module, batch) -> torch.Tensor:
    output = model(batch.src, batch.src_lengths, batch.tgt_in)
    return output[0] if isinstance(output, tuple) else output  # (B, T, V)


def _train_step(model: nn.Module, optimiser: torch.optim.Optimizer, batch) -> float:
    loss = translation_loss(model, batch)
    optimiser.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimiser.step()
    return loss.item()


@torch.no_grad()
def accuracy_by_length(model: nn.Module, held_out, buckets: Sequence[tuple[int, int]]
                       ) -> list[float]:
    """Share of target tokens (EOS included) predicted right under teacher forcing, for the
    sequences whose length lies in each bucket (inclusive bounds)."""
    model.eval()
    logits = _logits(model, held_out)  # (B, T, V)
    real = held_out.tgt_out != PAD_ID  # (B, T): not padding
    right = (logits.argmax(-1) == held_out.tgt_out) & real
    lengths = held_out.src_lengths - 1  # symbols, without the EOS
    shares = []
    for low, high in buckets:
        chosen = (lengths >= low) & (lengths <= high)  # (B,)
        shares.append(right[chosen].sum().item() / max(1, real[chosen].sum().item()))
    return shares


def length_trial(steps: int = 300, *, hidden_size: int = 32, embed_dim: int = 16,
                 max_len: int = 12, batch: int = 64, seed: int = 0,
                 buckets: Sequence[tuple[int, int]] = ((2, 4), (5, 7), (8, 10), (11, 12)),
                 timing_repeats: int = 5) -> LengthTrial:
    """Train each design for ``steps`` Adam steps on the same batches of reversal sequences
    (2 to ``max_len`` symbols), one torch thread; evaluate on 1,000 held-out sequences."""
    steps = check_positive_int("steps", steps)
    max_len = check_int("max_len", max_len, minimum=2)
    trial = LengthTrial(steps, [f"{low}–{high}" for low, high in buckets])
    held_out = sequence_task("reverse", n=1000, n_symbols=SYMBOLS, min_len=2, max_len=max_len,
                             seed=seed + 10_000)
    batches = [sequence_task("reverse", n=batch, n_symbols=SYMBOLS, min_len=2,
                             max_len=max_len, seed=seed + s) for s in range(steps)]
    models, optimisers = {}, {}
    with fixed_threads(1):
        for design in DESIGNS:
            seed_everything(seed)
            model = trial_model(design, embed_dim, hidden_size).train()
            optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
            for one in batches:
                _train_step(model, optimiser, one)
            trial.accuracy[design] = accuracy_by_length(model, held_out, buckets)
            trial.parameters[design] = count_parameters(model)
            models[design], optimisers[design] = model.train(), optimiser
        timed = batches[0]
        trial.step_seconds = paired_medians(
            {design: lambda d=design: translation_loss(models[d], timed).backward()
             for design in DESIGNS}, repeats=timing_repeats)
    return trial
