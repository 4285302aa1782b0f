"""metrics.py's BLEU as the course computes it: sacreBLEU's score on the course's own tokens,
overall and by source-length bucket."""

import pytest
import sacrebleu

from course_lib.metrics import bleu, bleu_by_length


def test_bleu_is_sacrebleu_on_our_tokens():
    hyps = ["le chat noir dort .", "un chien court vite ."]
    refs = ["le chat noir dort .", "le chien court ."]
    expected = sacrebleu.corpus_bleu(hyps, [refs], tokenize="none", force=True).score
    assert bleu(hyps, refs) == pytest.approx(expected)
    assert bleu(refs, refs) == pytest.approx(100.0)
    with pytest.raises(ValueError):
        bleu(hyps, refs[:1])


def test_bleu_by_length_buckets():
    hyps = ["a b c d .", "x y z w", "a b c d e f ."]
    refs = ["a b c d .", "p q r .", "a b c d e f ."]
    scores = bleu_by_length(hyps, refs, [5, 12, 40])
    assert scores["1-10"] == pytest.approx(100.0)
    assert scores["11-20"] == pytest.approx(0.0)
    assert scores["21-30"] is None and scores["31+"] == pytest.approx(100.0)
