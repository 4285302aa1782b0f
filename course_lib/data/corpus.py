"""The English→French translation corpus, generated offline with pyrealb.

A sampler builds one abstract sentence (clauses with subjects, verbs, objects, adjectives, places,
relative clauses, tenses, negation and coordination, drawn so that meanings are sensible) and
pyrealb realises it in English and in French, with French agreement and adjective order. Every
content word (noun, adjective, verb) is located in both token sequences, which gives gold word
alignments for scoring attention maps. Same seed, same corpus, byte for byte.

A pair looks like::

    {"en": "the black cat ate the fresh bread .",
     "fr": "le chat noir a mangé le pain frais .",
     "align": [[[1], [2]], [[2], [1]], [[3], [4]], [[5], [6]], [[6], [7]]],
     "meta": {"tense": "past", "negated": false, "plural_subject": false, "clauses": 1}}

where ``align`` lists, per content word, its English token positions and French token positions,
and ``meta`` holds properties of the first clause (tense, negation, plural subject) and the
number of clauses, for colouring pictures and probing models.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path

from course_lib import paths
from course_lib.data import lexicon as lex
from course_lib.data.sentences import (
    Sampler,
    _realise,
    align,
    estimated_words,
    tokenize,
    word_count,
)

DEFAULT_BUCKETS = ((3, 10, 0.35), (11, 20, 0.25), (21, 30, 0.2), (31, 50, 0.2))


# The corpus


@dataclass(frozen=True)
class CorpusConfig:
    """What determines a corpus. ``buckets``: (min words, max words, share) of English lengths."""

    size: int = 20000
    seed: int = 0
    buckets: tuple[tuple[int, int, float], ...] = DEFAULT_BUCKETS
    split: tuple[float, float, float] = (0.8, 0.1, 0.1)

    def __post_init__(self) -> None:
        if self.size < 10:
            raise ValueError(f"size must be at least 10, got {self.size}")
        shares = [share for _, _, share in self.buckets]
        if any(s < 0 for s in shares) or abs(sum(shares) - 1) > 1e-6:
            raise ValueError(f"bucket shares must be >= 0 and sum to 1, got {shares}")
        if any(lo < 3 or hi > 60 or lo > hi for lo, hi, _ in self.buckets):
            raise ValueError(f"bucket bounds must satisfy 3 <= min <= max <= 60: {self.buckets}")
        if len(self.split) != 3 or abs(sum(self.split) - 1) > 1e-6:
            raise ValueError(f"split must be three shares summing to 1, got {self.split}")

    def key(self) -> str:
        """Changes with the settings, the pyrealb version and the generator's own code."""
        code = [Path(__file__).read_bytes(), Path(lex.__file__).read_bytes()]
        code_hash = hashlib.sha256(b"".join(code)).hexdigest()
        text = json.dumps([asdict(self), version("pyrealb"), code_hash], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def sample_pair(rng: random.Random, target_words: int,
                length_range: tuple[int, int] | None = None) -> dict | None:
    """One realised pair grown towards ``target_words`` English words; None (before the costly
    realisation) when its length falls outside ``length_range``."""
    sentence = Sampler(rng).sentence(target_words)
    if length_range is not None and not (
            length_range[0] <= estimated_words(sentence) <= length_range[1]):
        return None
    english, french = _realise(sentence, "en"), _realise(sentence, "fr")
    en_tokens, fr_tokens = tokenize(english), tokenize(french)
    first = sentence.clauses[0]
    meta = {"tense": first.tense, "negated": first.negated,
            "plural_subject": first.subject.plural, "clauses": len(sentence.clauses)}
    return {"en": " ".join(en_tokens), "fr": " ".join(fr_tokens),
            "align": align(sentence, en_tokens, fr_tokens), "meta": meta}


CHUNK = 250  # sentences drawn per work unit; a unit's draws depend only on its own seed


def _draw_chunk(seed: int, bucket: int, chunk: int, low: int, high: int) -> list[dict | None]:
    """``CHUNK`` draws for one bucket, from a generator seeded by (seed, bucket, chunk) alone, so
    the result is the same whichever process computes it."""
    rng = random.Random(f"{seed}/{bucket}/{chunk}")
    return [sample_pair(rng, rng.randint(low, high), (low, high)) for _ in range(CHUNK)]


def default_workers() -> int:
    """How many processes :func:`generate_pairs` draws with by default: the cores this process
    may use, at most 4. That is ``OMP_NUM_THREADS`` where it is set (a runner that shares the
    cores out, such as the test suite's workers, sets it), else every core: extra processes on
    cores that are already busy only add their start-up and their surplus draws."""
    share = os.environ.get("OMP_NUM_THREADS", "")
    cores = int(share) if share.isdigit() and int(share) > 0 else (os.cpu_count() or 1)
    return min(cores, 4)


def generate_pairs(config: CorpusConfig, workers: int | None = None) -> list[dict]:
    """``config.size`` distinct pairs whose English lengths follow ``config.buckets``.

    Draws are made in chunks with their own seeds and, with ``workers`` > 1 (default:
    :func:`default_workers`), in parallel processes; the chunks are then read in order, so the
    corpus is the same for any number of workers.
    """
    counts = [round(share * config.size) for _, _, share in config.buckets]
    counts[-1] += config.size - sum(counts)
    workers = workers or default_workers()
    pool = ProcessPoolExecutor(workers) if workers > 1 and config.size >= 4 * CHUNK else None
    pairs, seen = [], set()
    try:
        for bucket, ((low, high, _), count) in enumerate(zip(config.buckets, counts,
                                                              strict=True)):
            made, chunk = 0, 0
            while made < count:
                batch = max(1, workers) if pool else 1
                if chunk + batch > 50 * (count // CHUNK + 1) + 20:
                    raise RuntimeError(f"could not draw {count} distinct sentences of "
                                       f"{low}-{high} words; widen the bucket or lower the size")
                jobs = [(config.seed, bucket, chunk + k, low, high) for k in range(batch)]
                results = (pool.map(_draw_chunk, *zip(*jobs, strict=True)) if pool
                           else [_draw_chunk(*job) for job in jobs])
                chunk += batch
                for draws in results:
                    for pair in draws:
                        if made == count:
                            break
                        if pair is None or pair["en"] in seen:
                            continue
                        if low <= word_count(pair["en"].split()) <= high:
                            seen.add(pair["en"])
                            pairs.append(pair)
                            made += 1
    finally:
        if pool is not None:
            pool.shutdown()
    random.Random(config.seed).shuffle(pairs)
    return pairs


@dataclass
class Corpus:
    config: CorpusConfig
    train: list[dict]
    valid: list[dict]
    test: list[dict]

    @property
    def splits(self) -> dict[str, list[dict]]:
        return {"train": self.train, "valid": self.valid, "test": self.test}


DEFAULT_CACHE = paths.cache_dir("corpus")  # .cache/corpus in the checkout


def load_corpus(config: CorpusConfig | None = None, cache_dir: Path | None = DEFAULT_CACHE,
                ) -> Corpus:
    """The corpus for ``config``: read from the cache, or generated and cached (gzip JSON).

    Sources are distinct, so no test sentence appears in train; the splits are fixed by the seed.
    """
    config = config or CorpusConfig()
    path = Path(cache_dir) / f"corpus-{config.key()}.json.gz" if cache_dir else None
    if path is not None and path.exists():
        pairs = json.loads(gzip.decompress(path.read_bytes()))
    else:
        pairs = generate_pairs(config)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")  # two processes never share one
            tmp.write_bytes(gzip.compress(corpus_bytes(pairs), mtime=0))
            tmp.replace(path)
    n_train = int(config.split[0] * len(pairs))
    n_valid = int(config.split[1] * len(pairs))
    return Corpus(config, pairs[:n_train], pairs[n_train:n_train + n_valid],
                  pairs[n_train + n_valid:])


def corpus_bytes(pairs: list[dict]) -> bytes:
    return json.dumps(pairs, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def corpus_statistics(corpus: Corpus) -> dict:
    """Sizes, length histograms (English words) and vocabulary sizes, for lesson 02's plots."""
    stats = {"pairs": {name: len(pairs) for name, pairs in corpus.splits.items()}}
    lengths = {name: [word_count(p["en"].split()) for p in pairs]
               for name, pairs in corpus.splits.items()}
    stats["en_lengths"] = lengths
    stats["fr_lengths"] = {name: [word_count(p["fr"].split()) for p in pairs]
                           for name, pairs in corpus.splits.items()}
    stats["vocab_size"] = {
        language: len(Counter(t for p in corpus.train for t in p[language].split()))
        for language in ("en", "fr")}
    stats["share_over_30"] = {name: sum(n > 30 for n in values) / max(len(values), 1)
                              for name, values in lengths.items()}
    return stats
