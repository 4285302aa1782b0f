"""The generated translation corpus: deterministic, sensible, aligned, length-controlled."""

import random

import pytest

from course_lib.data import corpus as corpus_module
from course_lib.data import lexicon as lex
from course_lib.data.corpus import (
    CorpusConfig,
    corpus_bytes,
    corpus_statistics,
    generate_pairs,
    load_corpus,
)
from course_lib.data.sentences import Sampler, _concepts, _realise, align, tokenize, word_count

SMALL = CorpusConfig(size=600, seed=3)


@pytest.fixture(scope="module")
def pairs():
    return generate_pairs(SMALL)


@pytest.fixture(scope="module")
def small_cache(tmp_path_factory):
    """A cache folder in which load_corpus generated SMALL once, for the tests that load it."""
    folder = tmp_path_factory.mktemp("corpus-cache")
    load_corpus(SMALL, cache_dir=folder)
    return folder


def test_same_seed_same_bytes_other_seed_other_corpus(pairs, small_cache):
    # two generations of SMALL: the fixture's, and the one load_corpus cached (its splits are
    # the generated list, cut in order)
    again = load_corpus(SMALL, cache_dir=small_cache)
    assert corpus_bytes(again.train + again.valid + again.test) == corpus_bytes(pairs)
    assert corpus_bytes(generate_pairs(CorpusConfig(size=600, seed=4))) != corpus_bytes(pairs)


def test_parallel_generation_gives_the_same_corpus():
    config = CorpusConfig(size=1000, seed=2)
    assert corpus_bytes(generate_pairs(config, workers=1)) == \
        corpus_bytes(generate_pairs(config, workers=2))


@pytest.mark.parametrize(("share", "cores", "workers"),
                         [("1", 8, 1), ("2", 8, 2), ("16", 8, 4), (None, 2, 2), (None, 8, 4),
                          ("", 3, 3), ("0", 3, 3), ("two", 3, 3), ("-1", 1, 1)])
def test_generation_uses_the_cores_this_process_is_given(monkeypatch, share, cores, workers):
    if share is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", share)
    monkeypatch.setattr(corpus_module.os, "cpu_count", lambda: cores)
    assert corpus_module.default_workers() == workers


def test_every_pair_is_realised_in_both_languages(pairs):
    for pair in pairs:
        for language in ("en", "fr"):
            text = pair[language]
            assert text.endswith(" .") and word_count(text.split()) >= 3, text
            assert "[" not in text and "]" not in text, text  # pyrealb's mark of a failure
    french_words = {t for p in pairs for t in p["fr"].split()}
    assert {"le", "la", "les"} <= french_words and "the" not in french_words


def test_meanings_are_sensible():
    rng = random.Random(0)
    sampler = Sampler(rng)
    for _ in range(300):
        clause = sampler.clause()
        assert clause.subject.noun.kind in clause.verb.subjects
        if clause.obj is not None:
            assert clause.obj.noun.kind in clause.verb.objects
    eaters = {v.en: v for v in lex.VERBS}["eat"]
    assert eaters.objects == {lex.FOOD} and lex.PLACE not in eaters.subjects


def lexical_forms():
    """Every form a content word can take: English form -> set of French forms."""
    import pyrealb as p

    table = {}
    numbers = ("s", "p")
    for noun in lex.NOUNS:
        for n in numbers:
            p.loadEn()
            en = tuple(tokenize(p.N(noun.en).n(n).realize()))
            p.loadFr()
            fr = tuple(tokenize(p.N(noun.fr).n(n).realize())) + tuple(noun.fr_tail.split())
            table.setdefault(en, set()).add(fr)
    return table


def verb_forms():
    """Every lexical verb form per verb: English and French, all tenses, numbers, negation."""
    from course_lib.data.sentences import _form

    forms = []
    for verb in lex.VERBS:
        english, french = set(), set()
        for en_tense, fr_tense in lex.TENSES.values():
            for number in ("s", "p"):
                for negated in (False, True):
                    english.update(_form("en", "verb", verb.en, (en_tense, number, negated)))
                french.update(_form("fr", "verb", verb.fr, (fr_tense, number, False)))
        forms.append((english, french))
    return forms


def test_alignments_point_at_the_right_words(pairs):
    """Each aligned span is one lexicon entry in both languages: the noun in the right number,
    the adjective (any agreement), or the verb (any tense, number, negation)."""
    nouns = lexical_forms()
    adjectives = {a.en: a.fr for a in lex.ADJECTIVES}
    verbs = verb_forms()
    counts = {"noun": 0, "adjective": 0, "verb": 0}
    for pair in pairs:
        en, fr = pair["en"].split(), pair["fr"].split()
        for en_span, fr_span in pair["align"]:
            en_words = tuple(en[i] for i in en_span)
            fr_words = tuple(fr[j] for j in fr_span)
            assert fr_span == list(range(fr_span[0], fr_span[0] + len(fr_span)))  # contiguous
            if fr_words in nouns.get(en_words, ()):
                counts["noun"] += 1
            elif len(en_words) == 1 and en_words[0] in adjectives:
                french = adjectives[en_words[0]]
                assert len(fr_words) == 1 and fr_words[0][:2] == french[:2], (en_words, fr_words)
                counts["adjective"] += 1
            else:
                assert len(en_words) == len(fr_words) == 1, (pair["en"], en_words, fr_words)
                assert any(en_words[0] in english and (fr_words[0] in french or any(
                    fr_words[0][:len(f) - 2] == f[:-2] for f in french if len(f) > 3))
                    for english, french in verbs), (pair["en"], en_words, fr_words)
                counts["verb"] += 1
    assert counts["noun"] > 500 and counts["adjective"] > 100 and counts["verb"] > 300, counts


def test_almost_every_content_word_is_aligned():
    rng = random.Random(7)
    concepts = aligned = 0
    for _ in range(200):
        sentence = Sampler(rng).sentence(rng.randint(3, 50))
        en, fr = tokenize(_realise(sentence, "en")), tokenize(_realise(sentence, "fr"))
        concepts += len(_concepts(sentence))
        aligned += len(align(sentence, en, fr))
    assert aligned / concepts >= 0.97


def test_multi_word_french_forms_are_aligned(pairs):
    spans = [(pair["fr"].split(), fr_span) for pair in pairs for _, fr_span in pair["align"]
             if len(fr_span) == 3]
    assert any(fr[s[0]] in ("pomme", "pommes") and fr[s[2]] == "terre" for fr, s in spans)


def test_length_distribution_as_asked(small_cache):
    config = SMALL
    corpus = load_corpus(config, cache_dir=small_cache)
    lengths = [word_count(p["en"].split()) for p in corpus.train + corpus.valid + corpus.test]
    assert min(lengths) >= 3 and max(lengths) <= 50
    for low, high, share in config.buckets:
        inside = sum(low <= n <= high for n in lengths) / len(lengths)
        assert inside == pytest.approx(share, abs=0.002)
    assert corpus_statistics(corpus)["share_over_30"]["test"] >= 0.15
    custom = CorpusConfig(size=200, seed=1, buckets=((3, 6, 1.0),))
    assert all(3 <= word_count(p["en"].split()) <= 6 for p in generate_pairs(custom))


def test_splits_are_fixed_and_disjoint(small_cache):
    corpus = load_corpus(SMALL, cache_dir=small_cache)
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (480, 60, 60)
    train = {p["en"] for p in corpus.train}
    assert not train & {p["en"] for p in corpus.test}
    assert not train & {p["en"] for p in corpus.valid}


def test_cache_is_used(small_cache, pairs, monkeypatch):
    # the fixture's load_corpus generated SMALL and wrote it: one file, read back from now on
    assert len(list(small_cache.glob("corpus-*.json.gz"))) == 1
    monkeypatch.setattr("course_lib.data.corpus.generate_pairs",
                        lambda config: pytest.fail("regenerated despite the cache"))
    assert load_corpus(SMALL, cache_dir=small_cache).test == pairs[-60:]


def test_statistics_for_lesson_02(small_cache):
    corpus = load_corpus(SMALL, cache_dir=small_cache)
    stats = corpus_statistics(corpus)
    assert stats["pairs"] == {"train": 480, "valid": 60, "test": 60}
    assert len(stats["en_lengths"]["train"]) == 480
    assert 50 < stats["vocab_size"]["en"] < stats["vocab_size"]["fr"]


@pytest.mark.parametrize("kwargs", [{"size": 5}, {"buckets": ((3, 10, 0.5),)},
                                    {"buckets": ((1, 10, 1.0),)}, {"split": (0.5, 0.5, 0.5)}])
def test_bad_config_is_refused(kwargs):
    with pytest.raises(ValueError):
        CorpusConfig(**kwargs)


def test_tokenizer_splits_punctuation_and_keeps_elisions():
    assert tokenize("L'homme n'a pas mangé, hier.") == ["l'", "homme", "n'", "a", "pas", "mangé",
                                                        ",", "hier", "."]


def test_length_estimate_equals_the_realised_length():
    """The sampler grows sentences by estimate and rejects them before realising: both rely on
    the estimate being exact."""
    from course_lib.data.sentences import estimated_words

    rng = random.Random(11)
    for _ in range(200):
        sentence = Sampler(rng).sentence(rng.randint(3, 50))
        assert estimated_words(sentence) == word_count(tokenize(_realise(sentence, "en")))
