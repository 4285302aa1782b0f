"""Vocabularies: tokens <-> ids, with the special tokens every model uses."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from course_lib.tokens import BOS_ID, EOS_ID, PAD_ID, SPECIALS, UNK_ID

# The special token ids are defined in course_lib.tokens and importable from here too.
__all__ = ["BOS_ID", "EOS_ID", "PAD_ID", "UNK_ID", "Vocab"]


class Vocab:
    """Ids 0-3 are the specials (pad, bos, eos, unk); the rest by falling frequency, then
    alphabetically, so the same sentences always give the same ids."""

    def __init__(self, tokens: Sequence[str]) -> None:
        if tuple(tokens[:4]) != SPECIALS:
            raise ValueError(f"a vocabulary starts with {SPECIALS}, got {tuple(tokens[:4])}")
        if len(set(tokens)) != len(tokens):
            raise ValueError("vocabulary tokens must be unique")
        self.itos = list(tokens)
        self.stoi = {token: index for index, token in enumerate(self.itos)}

    @classmethod
    def build(cls, sentences: Iterable[str | Sequence[str]], min_freq: int = 1) -> Vocab:
        """The vocabulary of ``sentences`` (each a str of space-separated tokens or a list of
        tokens; never one bare str), keeping tokens seen at least ``min_freq`` times."""
        if isinstance(sentences, str):
            raise TypeError("sentences must be a list (or other iterable) of sentences, got one "
                            "str; pass a single sentence as [sentences]")
        counts = Counter(token for sentence in sentences
                         for token in (sentence.split() if isinstance(sentence, str) else sentence))
        kept = sorted((t for t, c in counts.items() if c >= min_freq and t not in SPECIALS),
                      key=lambda t: (-counts[t], t))
        return cls(list(SPECIALS) + kept)

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, sentence: str | Sequence[str], *, bos: bool = False, eos: bool = True
               ) -> list[int]:
        tokens = sentence.split() if isinstance(sentence, str) else sentence
        ids = [self.stoi.get(token, UNK_ID) for token in tokens]
        return ([BOS_ID] if bos else []) + ids + ([EOS_ID] if eos else [])

    def decode(self, ids: Iterable[int], *, strip: bool = True) -> list[str]:
        """Tokens for ``ids``; with ``strip``, stop at the first EOS and drop PAD and BOS."""
        tokens = []
        for index in ids:
            index = int(index)
            if strip and index == EOS_ID:
                break
            if strip and index in (PAD_ID, BOS_ID):
                continue
            if not 0 <= index < len(self.itos):
                raise ValueError(f"id {index} is outside the vocabulary of {len(self.itos)}")
            tokens.append(self.itos[index])
        return tokens
