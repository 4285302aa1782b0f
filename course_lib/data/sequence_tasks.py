"""Toy sequence-to-sequence tasks (copy, reverse) for checking that a model can learn at all.

Tokens are random symbols ``4 .. 4 + n_symbols − 1`` (ids 0–3 are PAD, BOS, EOS, UNK); the
target is the source itself (copy) or the source backwards (reverse). Reversal is the classic
test of an encoder–decoder's memory: the first output word depends on the last input word.
"""

from __future__ import annotations

import torch

from course_lib.arguments import check_choice
from course_lib.data.batching import TranslationBatch, pad
from course_lib.seeding import make_generator
from course_lib.tokens import BOS_ID, EOS_ID, SPECIALS

TASKS = ("copy", "reverse")


def sequence_task(kind: str = "reverse", n: int = 64, n_symbols: int = 10, min_len: int = 3,
                  max_len: int = 8, seed: int = 0) -> TranslationBatch:
    """``n`` random source sequences and their copies or reversals, as one padded batch.

    Shapes: ``src`` (n, max_len + 1) (EOS appended), ``tgt_in``/``tgt_out`` (n, max_len + 1);
    CPU tensors.
    """
    check_choice("kind", kind, TASKS)
    if not 1 <= min_len <= max_len or n < 1 or n_symbols < 1:
        raise ValueError(f"need n >= 1, n_symbols >= 1 and 1 <= min_len <= max_len, got n={n}, "
                         f"n_symbols={n_symbols}, min_len={min_len}, max_len={max_len}")
    generator = make_generator(seed)
    lengths = torch.randint(min_len, max_len + 1, (n,), generator=generator).tolist()
    first = len(SPECIALS)
    sources = [torch.randint(first, first + n_symbols, (length,), generator=generator).tolist()
               for length in lengths]
    targets = [s if kind == "copy" else s[::-1] for s in sources]
    return TranslationBatch(
        src=pad([s + [EOS_ID] for s in sources]),
        src_lengths=torch.tensor([length + 1 for length in lengths]),
        tgt_in=pad([[BOS_ID] + t for t in targets]),
        tgt_out=pad([t + [EOS_ID] for t in targets]),
        index=list(range(n)))


def exact_match(generated: torch.Tensor, targets: torch.Tensor) -> float:
    """Share of rows whose generated ids equal the target ids up to and including EOS.

    Shapes: ``generated`` (B, T'), ``targets`` (B, T) padded with PAD -> a float in [0, 1].
    """
    if generated.shape[0] != targets.shape[0]:
        raise ValueError(f"expected the same number of rows, got {tuple(generated.shape)} and "
                         f"{tuple(targets.shape)}")
    width = max(generated.shape[1], targets.shape[1])
    padded = [torch.nn.functional.pad(x, (0, width - x.shape[1])) for x in (generated, targets)]
    return (padded[0] == padded[1]).all(dim=1).float().mean().item()
