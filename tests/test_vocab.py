"""data/vocab.py and data/batching.py: vocabularies, padding and batches: the vocabulary's order
and round trip, padded batches' shapes, and an iterator that covers every pair once with little
padding."""

import pytest
import torch

from course_lib.data.batching import BatchIterator, make_batch, pad
from course_lib.data.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocab

PAIRS = [{"en": " ".join(["w"] * n) + " .", "fr": " ".join(["m"] * (n + 1)) + " ."}
         for n in range(1, 40)]


def test_vocab_orders_by_frequency_then_alphabet_and_round_trips():
    vocab = Vocab.build(["b a a", "c a b"])
    assert vocab.itos == ["<pad>", "<bos>", "<eos>", "<unk>", "a", "b", "c"]
    ids = vocab.encode("a c zebra", bos=True)
    assert ids == [BOS_ID, 4, 6, UNK_ID, EOS_ID]
    assert vocab.decode(ids) == ["a", "c", "<unk>"]
    assert vocab.decode([4, EOS_ID, 5]) == ["a"]  # stops at EOS
    assert vocab.decode([4, PAD_ID, 5], strip=False) == ["a", "<pad>", "b"]


def test_vocab_errors():
    with pytest.raises(ValueError, match="starts with"):
        Vocab(["a", "b"])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        Vocab.build(["a"]).decode([99])
    assert len(Vocab.build(["a a b"], min_freq=2)) == 5


def test_pad_and_batch_shapes():
    assert pad([[1, 2, 3], [4]]).tolist() == [[1, 2, 3], [4, PAD_ID, PAD_ID]]
    with pytest.raises(ValueError):
        pad([])
    src, tgt = Vocab.build(p["en"] for p in PAIRS), Vocab.build(p["fr"] for p in PAIRS)
    batch = make_batch(PAIRS, [0, 3], src, tgt)
    assert batch.src.shape == (2, 6) and batch.src_lengths.tolist() == [3, 6]
    assert batch.src_mask.sum(dim=1).tolist() == [3, 6]
    assert batch.tgt_in[:, 0].tolist() == [BOS_ID, BOS_ID]
    assert batch.tgt_in[:, 1:].tolist()[1] == batch.tgt_out[:, :-1].tolist()[1]  # shifted by one
    assert batch.tgt_out[0].tolist().index(EOS_ID) == 3


def test_iterator_covers_every_pair_once_with_little_padding_and_new_orders():
    src, tgt = Vocab.build(p["en"] for p in PAIRS), Vocab.build(p["fr"] for p in PAIRS)
    iterator = BatchIterator(PAIRS, src, tgt, batch_size=4, seed=1, pool=100)
    first = [b.index for b in iterator]
    assert sorted(i for index in first for i in index) == list(range(len(PAIRS)))
    assert len(first) == len(iterator) == 10
    for batch in iterator:
        assert int(batch.src_lengths.max() - batch.src_lengths.min()) <= 4
    second = [b.index for b in iterator]
    assert second != first  # a new order each epoch
    again = [b.index for b in BatchIterator(PAIRS, src, tgt, batch_size=4, seed=1, pool=100)]
    assert again == first  # but the same sequence of orders for the same seed
    ordered = BatchIterator(PAIRS, src, tgt, batch_size=8, shuffle=False)
    assert [i for b in ordered for i in b.index] == list(range(len(PAIRS)))
    with pytest.raises(ValueError):
        BatchIterator(PAIRS, src, tgt, batch_size=0)
    assert isinstance(first[0][0], int) and torch.is_tensor(batch.src)
