"""Evaluation metrics: accuracy, BLEU (overall, by length), alignment and localisation accuracy."""

from __future__ import annotations

import torch

from course_lib.arguments import (
    FLOATING,
    INTEGER,
    check_lengths,
    check_same_device,
    check_sentences,
    check_tensor,
    check_token_lists,
)


def accuracy(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """Share of rows whose arg-max class equals the target.

    Shapes: ``logits`` (N, C), ``targets`` (N,) -> a float in [0, 1].
    """
    check_tensor("logits", logits, dtype=FLOATING)
    check_tensor("targets", targets, dtype=INTEGER)
    check_same_device(logits=logits, targets=targets)
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

    Sentences are the course's space-separated tokens (a str each, or a list of tokens), so
    sacreBLEU's own tokeniser is off. One sentence is a list of one: ``bleu([hyp], [ref])``.
    """
    import sacrebleu

    hypotheses = check_sentences("hypotheses", hypotheses)
    references = check_sentences("references", references)
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:
        raise ValueError("BLEU of an empty corpus is undefined")
    return float(sacrebleu.corpus_bleu(hypotheses, [references], tokenize="none", force=True).score)


def bleu_by_length(hypotheses: list[str], references: list[str], source_lengths: list[int],
                   buckets=LENGTH_BUCKETS) -> dict[str, float | None]:
    """Corpus BLEU within each bucket of source length (words); None for an empty bucket."""
    hypotheses = check_sentences("hypotheses", hypotheses)
    references = check_sentences("references", references)
    source_lengths = check_lengths("source_lengths", source_lengths, None).tolist()
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
    """Every (French position t, English position j) of every gold link ``[english, french]``:
    the cells of a (T, S) attention map that the gold alignment marks (for ``viz.plot_attention``'s
    ``gold``)."""
    return [(t, j) for english, french in links for t in french for j in english]


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
    for position, (matrix, links) in enumerate(zip(weights, alignments, strict=True)):
        check_tensor(f"weights[{position}]", matrix, dtype=FLOATING)
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


def localization_accuracy(weights: list[torch.Tensor], generated: list[list[str]],
                          references: list[list[str]], word_boxes: list[list],
                          grid: tuple[int, int], image_size: tuple[int, int],
                          content_words: set[str]) -> float:
    """Share of generated content words whose attention peak falls inside the box of the object
    they name.

    Generated word t names the object that reference word t names, if the two words are equal
    (the captions follow a fixed grammar, so position t means the same slot in both); a content
    word that differs from the reference, or lies beyond its end, names no object in the image
    and counts as a miss. The peak is the grid cell with the largest weight; it is inside a box
    ``(x0, y0, x1, y1)`` (pixels, ends exclusive) when the cell's centre is.

    Shapes: one (T', L) matrix per caption with L = grid[0] · grid[1]; ``image_size`` (H, W).
    """
    generated = check_token_lists("generated", generated)
    references = check_token_lists("references", references)
    if not len(weights) == len(generated) == len(references) == len(word_boxes):
        raise ValueError(f"expected one entry per caption, got {len(weights)} attention maps, "
                         f"{len(generated)} generated, {len(references)} references and "
                         f"{len(word_boxes)} box lists")
    rows, cols = grid
    cell_h, cell_w = image_size[0] / rows, image_size[1] / cols
    hits = total = 0
    for matrix, words, reference, boxes in zip(weights, generated, references, word_boxes,
                                               strict=True):
        if matrix.dim() != 2 or matrix.shape[1] != rows * cols or matrix.shape[0] < len(words):
            raise ValueError(f"expected a ({len(words)}+, {rows * cols}) attention matrix for "
                             f"{len(words)} generated words on a {rows}x{cols} grid, got "
                             f"{tuple(matrix.shape)}")
        for t, word in enumerate(words):
            if word not in content_words:
                continue
            total += 1
            if t >= len(reference) or reference[t] != word or boxes[t] is None:
                continue
            row, col = divmod(int(matrix[t].argmax()), cols)
            x, y = (col + 0.5) * cell_w, (row + 0.5) * cell_h
            x0, y0, x1, y1 = boxes[t]
            hits += int(x0 <= x < x1 and y0 <= y < y1)
    if total == 0:
        raise ValueError("no generated content words to score")
    return hits / total
