"""experiments/translation.py: translators by name, and alignment accuracy with the attention maps
it is computed from (metrics.alignment_accuracy)."""

import random

import pytest
import torch

from course_lib.data.batching import BatchIterator
from course_lib.data.corpus import CorpusConfig, generate_pairs
from course_lib.experiments.translation import (
    ATTENTION_MODELS,
    NO_ATTENTION_MODELS,
    TRANSLATORS,
    build_translator,
    build_vocabs,
    evaluate_alignment,
    reference_attention,
    translator_class,
)
from course_lib.metrics import alignment_accuracy, gold_cells
from course_lib.models.seq2seq import Seq2Seq, translation_loss
from course_lib.seeding import seed_everything


def test_alignment_accuracy_counts_argmax_hits_on_the_first_french_token():
    eye = torch.eye(4)  # step t attends to source token t
    links = [[[0], [0]], [[1], [2]], [[2, 3], [3]]]  # hit, miss (step 2 looks at 2), hit (3)
    assert alignment_accuracy([eye], [links]) == pytest.approx(2 / 3)
    reversed_links = [[[3 - t], [t]] for t in range(4)]
    assert alignment_accuracy([eye.flip(1), eye], [reversed_links, reversed_links[1:2]]) \
        == pytest.approx(4 / 5)  # every link of the flipped map hits, (2 -> 1) of eye misses
    two_token_word = [[[1], [1, 2]]]  # only the step of the first French token counts
    assert alignment_accuracy([eye], [two_token_word]) == 1.0


def test_gold_cells_are_the_map_cells_of_every_link():
    links = [[[0], [1]], [[2], [0, 2]], [[3, 4], [3]]]  # "pomme de terre" style: 1 -> 2 tokens
    assert gold_cells(links) == [(1, 0), (0, 2), (2, 2), (3, 3), (3, 4)]
    assert gold_cells([]) == []


def test_shifted_control_scores_zero_on_a_perfect_map():
    eye = torch.eye(5)
    links = [[[t], [t]] for t in range(4)]
    assert alignment_accuracy([eye], [links]) == 1.0
    assert alignment_accuracy([eye], [links], shift=1) == 0.0


def test_alignment_accuracy_rejects_bad_input():
    with pytest.raises(ValueError, match="1 attention maps but 2 alignments"):
        alignment_accuracy([torch.eye(2)], [[], []])
    with pytest.raises(ValueError, match=r"lies outside an attention map of shape \(2, 2\)"):
        alignment_accuracy([torch.eye(2)], [[[[5], [0]]]])
    with pytest.raises(ValueError, match="no gold links"):
        alignment_accuracy([torch.eye(2)], [[]])
    with pytest.raises(ValueError, match=r"one \(T, S\) matrix"):
        alignment_accuracy([torch.ones(2, 2, 2)], [[[[0], [0]]]])


@pytest.fixture(scope="module")
def pairs():
    return generate_pairs(CorpusConfig(size=60, seed=5))


@pytest.mark.parametrize("name", list(ATTENTION_MODELS))
def test_reference_attention_is_one_map_per_pair_independent_of_batching(name, pairs):
    vocabs = build_vocabs_from(pairs)
    seed_everything(0)
    model = build_translator(name, vocabs, hidden_size=16, embed_dim=8)
    maps = reference_attention(model, pairs, vocabs, batch_size=16)
    alone = reference_attention(model, pairs[7:8], vocabs, batch_size=1)[0]
    for pair, matrix in zip(pairs, maps, strict=True):
        assert matrix.shape == (len(pair["fr"].split()) + 1, len(pair["en"].split()) + 1)
        assert torch.isfinite(matrix).all() and (matrix >= 0).all()
        assert (matrix.sum(-1) <= 1 + 1e-5).all()
    torch.testing.assert_close(maps[7], alone, atol=1e-5, rtol=1e-5)  # padding changes nothing


def test_reference_attention_needs_a_model_with_attention(pairs):
    vocabs = build_vocabs_from(pairs)
    model = build_translator("none", vocabs, hidden_size=8, embed_dim=4)
    with pytest.raises(TypeError, match="returns no attention weights"):
        reference_attention(model, pairs[:2], vocabs)


def test_no_attention_variants_change_one_setting_each(pairs):
    vocabs = build_vocabs_from(pairs)
    base = build_translator("none", vocabs, hidden_size=8, embed_dim=4).config
    assert base.context == "both"
    for name, changes in NO_ATTENTION_MODELS.items():
        model = build_translator(name, vocabs, hidden_size=8, embed_dim=4)
        assert translator_class(name) is Seq2Seq and isinstance(model, Seq2Seq)
        changed = {k for k, v in vars(model.config).items() if vars(base)[k] != v}
        assert changed == set(changes), name
    assert set(TRANSLATORS) == set(NO_ATTENTION_MODELS) | set(ATTENTION_MODELS)


def build_vocabs_from(pairs):
    class Split:  # build_vocabs reads only .train
        train = pairs

    return build_vocabs(Split)


def reversed_pairs(n, seed):
    """Word-for-word "translations" that reverse the sentence, with the gold link of every
    word. Words are distinct within a sentence, so each gold link names one source position."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        words = rng.sample("abcdefghijklmnopqrst", rng.randint(3, 8))
        pairs.append({"en": " ".join(words), "fr": " ".join(w.upper() for w in words[::-1]),
                      "align": [[[len(words) - 1 - i], [i]] for i in range(len(words))]})
    return pairs


def test_bahdanau_attention_learns_the_gold_alignment():
    """A learning test of the metric end to end: a model trained to reverse attends to the
    aligned source word, and the shifted control stays near zero."""
    train, held_out = reversed_pairs(1500, seed=0), reversed_pairs(200, seed=1)
    vocabs = build_vocabs_from(train)
    seed_everything(0)
    model = build_translator("bahdanau", vocabs, hidden_size=32, embed_dim=16)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    batches = BatchIterator(train, vocabs.src, vocabs.tgt, batch_size=32, seed=0)
    for _ in range(10):
        for batch in batches:
            model.train()
            loss = translation_loss(model, batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    accuracy = evaluate_alignment(model, held_out, vocabs)
    control = alignment_accuracy(reference_attention(model, held_out, vocabs),
                                 [p["align"] for p in held_out], shift=1)
    assert accuracy >= 0.95 and control <= 0.2, (accuracy, control)
