"""Evaluation metrics. (BLEU arrives with the translation lessons.)"""

from __future__ import annotations

import torch


def accuracy(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """Share of rows whose arg-max class equals the target.

    Shapes: ``logits`` (N, C), ``targets`` (N,) -> a float in [0, 1].
    """
    if logits.dim() != 2 or targets.shape != logits.shape[:1]:
        raise ValueError(
            f"expected logits (N, C) and targets (N,), got {tuple(logits.shape)} and "
            f"{tuple(targets.shape)}"
        )
    if targets.numel() == 0:
        raise ValueError("accuracy of an empty batch is undefined")
    return (logits.argmax(dim=-1) == targets).float().mean().item()


LENGTH_BUCKETS = ((1, 10), (11, 20), (21, 30), (31, None))


def bucket_name(low: int, high: int | None) -> str:
    return f"{low}-{high}" if high is not None else f"{low}+"


def bleu(hypotheses: list[str], references: list[str]) -> float:
    """Corpus-level BLEU-4 on sacreBLEU's 0-100 scale (Papineni et al., 2002).

    Sentences are the course's space-separated tokens, so sacreBLEU's own tokeniser is off.
    """
    import sacrebleu

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:
        raise ValueError("BLEU of an empty corpus is undefined")
    return float(sacrebleu.corpus_bleu(hypotheses, [references], tokenize="none", force=True).score)


def bleu_by_length(hypotheses: list[str], references: list[str], source_lengths: list[int],
                   buckets=LENGTH_BUCKETS) -> dict[str, float | None]:
    """Corpus BLEU within each bucket of source length (words); None for an empty bucket."""
    if not len(hypotheses) == len(references) == len(source_lengths):
        raise ValueError("hypotheses, references and source_lengths must have the same length")
    scores = {}
    for low, high in buckets:
        chosen = [i for i, n in enumerate(source_lengths)
                  if n >= low and (high is None or n <= high)]
        scores[bucket_name(low, high)] = (
            bleu([hypotheses[i] for i in chosen], [references[i] for i in chosen])
            if chosen else None)
    return scores
