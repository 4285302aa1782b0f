"""The linear probe of lessons 02 and 03: which word sits at a distance from the end, and a
probe that reads it back only where it is stored."""

import pytest
import torch

from course_lib.lessons.probe import probe_positions, word_at


def test_word_at_counts_from_the_last_word_before_the_stop():
    pair = {"en": "the black cat sleeps ."}
    assert word_at(pair, 0) == "sleeps" and word_at(pair, 3) == "the"
    assert word_at(pair, 4) is None


def test_probe_reads_a_linearly_stored_word_and_not_a_missing_one():
    g = torch.Generator().manual_seed(1)
    words = ["cat", "dog", "bird"]
    pairs, rows = [], []
    for i in range(300):
        last, first = words[i % 3], words[(i * 7 // 3) % 3]
        pairs.append({"en": f"{first} x {last} ."})
        vector = torch.randn(8, generator=g) * 0.1
        vector[words.index(last)] += 3.0  # only the last word is in the vector
        rows.append(vector)
    results = probe_positions(torch.stack(rows), pairs, distances=[0, 2, 5])
    assert results[0]["accuracy"] > 0.95
    assert results[2]["accuracy"] < 0.6
    assert 5 not in results  # no sentence is that long
    with pytest.raises(ValueError, match="context vectors"):
        probe_positions(torch.zeros(3, 8), pairs, [0])
