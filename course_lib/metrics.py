"""Evaluation metrics: accuracy, BLEU (overall and by source length), alignment accuracy."""

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


def gold_cells(links: list) -> list[tuple[int, int]]:
    """Every (French position t, English position s) of every gold link ``[english, french]``:
    the cells of a (T, S) attention map that the gold alignment marks (for ``viz.plot_attention``'s
    ``gold``)."""
    return [(t, s) for english, french in links for t in french for s in english]


def alignment_accuracy(weights: list[torch.Tensor], alignments: list[list],
                       shift: int = 0) -> float:
    """Share of gold-aligned content words whose attention lands on their source word.

    For every gold link ``[english positions, french positions]`` of every pair, take the
    decoder step that emits the word's first French token, t = french[0], and count a hit when
    ``argmax_j weights[t, j]`` is one of the English positions. ``shift`` moves every gold
    English position by that many tokens: a control that should score near zero.

    Shapes: one (T, S) matrix per pair (rows: target steps, columns: source tokens).
    """
    if len(weights) != len(alignments):
        raise ValueError(f"{len(weights)} attention maps but {len(alignments)} alignments")
    hits = total = 0
    for matrix, links in zip(weights, alignments, strict=True):
        if matrix.dim() != 2:
            raise ValueError(f"expected one (T, S) matrix per pair, got {tuple(matrix.shape)}")
        for english, french in links:
            if french[0] >= matrix.shape[0] or max(english) >= matrix.shape[1]:
                raise ValueError(f"gold link {english} -> {french} lies outside an attention "
                                 f"map of shape {tuple(matrix.shape)}")
            total += 1
            hits += int(matrix[french[0]].argmax()) - shift in english
    if total == 0:
        raise ValueError("no gold links to score")
    return hits / total
