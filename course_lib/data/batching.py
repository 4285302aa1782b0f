"""Padding, lengths and batches of similar length for the translation models."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from course_lib.arguments import check_index, check_pair, check_positive_int
from course_lib.data.vocab import Vocab
from course_lib.seeding import make_generator
from course_lib.tokens import PAD_ID


@dataclass
class TranslationBatch:
    """One batch, batch first, padded with PAD_ID.

    Shapes: ``src`` (B, S), ``src_lengths`` (B,), ``tgt_in`` (B, T) = BOS y_1 ... y_n,
    ``tgt_out`` (B, T) = y_1 ... y_n EOS, ``index``: the pairs' positions in their split.
    """

    src: torch.Tensor
    src_lengths: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    index: list[int]

    @property
    def src_mask(self) -> torch.Tensor:
        """(B, S) boolean, True at real tokens (may attend), False at padding."""
        return self.src != PAD_ID


def pad(sequences: Sequence[Sequence[int]], value: int = PAD_ID) -> torch.Tensor:
    """Right-pad id lists into a (B, L) long tensor, L the longest length."""
    if isinstance(sequences, (str, bytes)) or not isinstance(sequences, Sequence):
        raise TypeError(f"sequences must be a list of id lists, got {type(sequences).__name__}")
    if not sequences:
        raise ValueError("sequences is empty: cannot pad an empty list of sequences")
    longest = max(len(s) for s in sequences)
    out = torch.full((len(sequences), longest), value, dtype=torch.long)
    for row, sequence in enumerate(sequences):
        out[row, :len(sequence)] = torch.as_tensor(sequence, dtype=torch.long)
    return out


def make_batch(pairs: Sequence[dict], index: Sequence[int], src_vocab: Vocab, tgt_vocab: Vocab,
               ) -> TranslationBatch:
    """The pairs at the positions ``index`` (a non-empty list of positions into ``pairs``), each
    a dict with an ``"en"`` and an ``"fr"`` sentence, as one padded batch."""
    index = check_index("index", index, len(pairs))
    index = [index] if isinstance(index, int) else index
    for i in index:
        check_pair(f"pairs[{i}]", pairs[i])
    src = [src_vocab.encode(pairs[i]["en"]) for i in index]
    tgt = [tgt_vocab.encode(pairs[i]["fr"], bos=True) for i in index]
    return TranslationBatch(
        src=pad(src), src_lengths=torch.tensor([len(s) for s in src]),
        tgt_in=pad([t[:-1] for t in tgt]), tgt_out=pad([t[1:] for t in tgt]), index=list(index))


class BatchIterator:
    """Batches of pairs of similar source length (little padding), in a new order every epoch.

    Pairs are sorted by length inside pools of ``pool`` batches, cut into batches, and the batches
    shuffled, all with a seeded generator. ``shuffle=False`` keeps the split's order (for
    evaluation).
    """

    def __init__(self, pairs: Sequence[dict], src_vocab: Vocab, tgt_vocab: Vocab,
                 batch_size: int = 64, shuffle: bool = True, seed: int = 0, pool: int = 50):
        batch_size = check_positive_int("batch_size", batch_size)
        if not pairs:
            raise ValueError("pairs is empty: no pairs to batch")
        for i, pair in enumerate(pairs):
            check_pair(f"pairs[{i}]", pair)
        self.pairs, self.src_vocab, self.tgt_vocab = pairs, src_vocab, tgt_vocab
        self.batch_size, self.shuffle, self.pool = batch_size, shuffle, pool
        self.generator = make_generator(seed)

    def __len__(self) -> int:
        return -(-len(self.pairs) // self.batch_size)

    def order(self) -> list[list[int]]:
        if not self.shuffle:
            positions = list(range(len(self.pairs)))
            return [positions[i:i + self.batch_size]
                    for i in range(0, len(positions), self.batch_size)]
        positions = torch.randperm(len(self.pairs), generator=self.generator).tolist()
        size = self.batch_size * self.pool
        batches = []
        for start in range(0, len(positions), size):
            pool = sorted(positions[start:start + size],
                          key=lambda i: len(self.pairs[i]["en"].split()))
            batches += [pool[i:i + self.batch_size] for i in range(0, len(pool), self.batch_size)]
        shuffled = torch.randperm(len(batches), generator=self.generator).tolist()
        return [batches[i] for i in shuffled]

    def __iter__(self) -> Iterator[TranslationBatch]:
        for index in self.order():
            yield make_batch(self.pairs, index, self.src_vocab, self.tgt_vocab)
