"""Looking inside the context vector: what does c = h_S still know about the source?

A linear probe (logistic regression) is trained to read the word at a given position back out of
c; its test accuracy, position by position, shows how much of the early input the final state
keeps (Adi et al., 2017; Conneau et al., 2018).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import nn

from course_lib.arguments import check_int, check_pair
from course_lib.data.batching import BatchIterator


@torch.no_grad()
def context_vectors(model: nn.Module, pairs: list[dict], vocabs, batch_size: int = 256
                    ) -> torch.Tensor:
    """c for every pair's source, in order. Shape: (N, H), on the CPU."""
    model.eval()
    device = next(model.parameters()).device
    rows: list[torch.Tensor] = [torch.empty(0)] * len(pairs)
    for batch in BatchIterator(pairs, vocabs.src, vocabs.tgt, batch_size, shuffle=False):
        contexts = model.encode(batch.src.to(device), batch.src_lengths.to(device)).cpu()
        for row, index in zip(contexts, batch.index, strict=True):
            rows[index] = row
    return torch.stack(rows)


def word_at(pair: dict, distance_from_end: int) -> str | None:
    """The English word ``distance_from_end`` (an int >= 0) words before the final full stop
    (0 = the last)."""
    check_pair("pair", pair, ("en",))
    distance_from_end = check_int("distance_from_end", distance_from_end, minimum=0)
    words = [t for t in pair["en"].split() if t[0].isalnum()]
    return words[-1 - distance_from_end] if distance_from_end < len(words) else None


def probe_positions(contexts: torch.Tensor, pairs: list[dict], distances: list[int],
                    seed: int = 0, min_examples: int = 40) -> dict[int, dict[str, float]]:
    """Test accuracy of a linear probe that reads the word at each distance from the end out
    of the context vector, and the majority-class baseline, from a seeded 75/25 split.

    The probe is a multinomial logistic regression on the context's coordinates standardised
    with the training split's mean and deviation (which lets it converge in a few dozen
    iterations). Distances with fewer than ``min_examples`` sentences long enough are left out.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if contexts.shape[0] != len(pairs):
        raise ValueError(f"{contexts.shape[0]} context vectors for {len(pairs)} pairs")
    features = contexts.numpy()
    results = {}
    for distance in distances:
        chosen = [i for i, p in enumerate(pairs) if word_at(p, distance) is not None]
        if len(chosen) < min_examples:
            continue
        labels = np.array([word_at(pairs[i], distance) for i in chosen])
        x_train, x_test, y_train, y_test = train_test_split(
            features[chosen], labels, test_size=0.25, random_state=seed)
        probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=200))
        with warnings.catch_warnings():
            # small runs have many distinct words for few sentences; the baseline below is
            # what tells whether the probe learned anything
            warnings.filterwarnings("ignore", "The number of unique classes", UserWarning)
            probe.fit(x_train, y_train)
        values, counts = np.unique(y_train, return_counts=True)
        majority = values[counts.argmax()]
        results[distance] = {"accuracy": float(probe.score(x_test, y_test)),
                             "baseline": float(np.mean(y_test == majority)),
                             "examples": len(chosen)}
    return results
