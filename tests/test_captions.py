"""Generated captioning data (course_lib.data.captions): determinism, splits, captions, boxes."""

import hashlib

import numpy as np
import pytest
import torch

from course_lib.data.captions import (
    COLOURS,
    DIGIT_WORDS,
    RELATION_MARGIN,
    SHAPES,
    SIZES,
    CaptionBatches,
    CaptionSet,
    caption_batch,
    caption_set,
    caption_vocab,
    digit_pools,
    digit_strips,
    shape_scenes,
)
from course_lib.data.vocab import BOS_ID, EOS_ID, PAD_ID


def image_fingerprints(images: torch.Tensor) -> set[str]:
    return {hashlib.sha256(image.numpy().tobytes()).hexdigest() for image in images}


@pytest.fixture(scope="module")
def digits():
    return digit_strips(300, "train", seed=0)


@pytest.fixture(scope="module")
def shapes():
    return shape_scenes(300, "train", seed=0)


def test_same_seed_same_data_and_another_seed_other_data():
    for make in (digit_strips, shape_scenes):
        a, b, c = make(20, seed=3), make(20, seed=3), make(20, seed=4)
        assert torch.equal(a.images, b.images) and a.captions == b.captions
        assert a.word_boxes == b.word_boxes
        assert not torch.equal(a.images, c.images)


def test_images_are_float_cpu_tensors_in_the_unit_range(digits, shapes):
    assert digits.images.shape == (300, 1, 32, 128) and shapes.images.shape == (300, 3, 64, 64)
    for data in (digits, shapes):
        assert data.images.dtype == torch.float32 and data.images.device.type == "cpu"
        assert data.images.min() >= 0 and data.images.max() <= 1


def test_digit_captions_name_two_to_five_digits_each_with_its_box(digits):
    counts = {len(words) for words in digits.captions}
    assert counts == {2, 3, 4, 5}
    for words, boxes in zip(digits.captions, digits.word_boxes, strict=True):
        assert all(w in DIGIT_WORDS for w in words)
        assert all(b is not None for b in boxes)
        # Left to right, inside the canvas, not overlapping.
        for (x0, y0, x1, y1), following in zip(boxes, boxes[1:] + [None], strict=True):
            assert 0 <= x0 < x1 <= 128 and 0 <= y0 < y1 <= 32
            assert following is None or x1 < following[0]


def test_each_digit_box_holds_its_digit_ink(digits):
    # Almost all of the strip's bright pixels lie inside the boxes (the rest is noise).
    for image, boxes in zip(digits.images[:50], digits.word_boxes[:50], strict=True):
        inside = torch.zeros_like(image[0], dtype=torch.bool)
        for x0, y0, x1, y1 in boxes:
            assert image[0, y0:y1, x0:x1].max() > 0.6  # the digit is there
            inside[y0:y1, x0:x1] = True
        bright = image[0] > 0.5
        assert bright[~inside].sum() <= 0.02 * bright.sum()


def test_test_digits_come_from_images_held_out_of_training():
    pools = digit_pools(seed=0)
    assert sum(len(p) for p in pools.values()) == 1797
    assert not set(pools["train"]) & set(pools["test"])
    assert not set(pools["train"]) & set(pools["val"])
    assert not set(pools["val"]) & set(pools["test"])
    # A test strip's digit is a held-out image: it matches no training image pixel for pixel.
    from course_lib.data.captions import _bundled_digits
    pixels = _bundled_digits()[0]
    train = {pixels[i].tobytes() for i in pools["train"]}
    held_out = [i for i in pools["test"] if pixels[i].tobytes() not in train]
    assert len(held_out) >= 0.95 * len(pools["test"])  # the bundled set has a few duplicates


def test_shape_captions_follow_the_grammar_and_name_boxes(shapes):
    for words, boxes in zip(shapes.captions, shapes.word_boxes, strict=True):
        relation = "left" if "left" in words else "above"
        phrases = " ".join(words).replace(" left of ", " | ").replace(" above ", " | ").split(" | ")
        assert 2 <= len(phrases) <= 3
        for phrase in phrases:
            article, size, colour, shape = phrase.split()
            assert article == "a" and size in SIZES and colour in COLOURS and shape in SHAPES
        named = [(w, b) for w, b in zip(words, boxes, strict=True) if b is not None]
        assert all(w in SIZES or w in COLOURS or w in SHAPES for w, _ in named)
        assert len(named) == 3 * len(phrases)
        # The relation is true of the boxes: each object lies after the previous one.
        objects = [b for w, b in zip(words, boxes, strict=True) if w in SHAPES]
        axis = 0 if relation == "left" else 1
        for first, second in zip(objects, objects[1:], strict=False):
            assert first[axis + 2] <= second[axis]
            # ... and clearly so: the row runs further along than across, by a margin.
            along = abs(_centre(second)[axis] - _centre(first)[axis])
            across = abs(_centre(second)[1 - axis] - _centre(first)[1 - axis])
            assert across <= along - RELATION_MARGIN


def _centre(box):
    x0, y0, x1, y1 = box
    return (x0 + x1 - 1) / 2, (y0 + y1 - 1) / 2


def test_shape_boxes_hold_their_colour(shapes):
    for image, words, boxes in zip(shapes.images[:50], shapes.captions[:50],
                                   shapes.word_boxes[:50], strict=True):
        for t, word in enumerate(words):
            if word in COLOURS:
                x0, y0, x1, y1 = boxes[t]
                patch = image[:, y0:y1, x0:x1].reshape(3, -1)  # (3, pixels)
                colour = torch.tensor(COLOURS[word]).unsqueeze(1)
                close = ((patch - colour).abs().max(dim=0).values < 0.25).float().mean()
                assert close > 0.3, (word, boxes[t])


def test_every_word_of_the_vocabulary_occurs(shapes, digits):
    assert set(w for c in digits.captions for w in c) == set(DIGIT_WORDS)
    words = set(w for c in shapes.captions for w in c)
    assert words == {"a", "left", "of", "above", *SHAPES, *COLOURS, *SIZES}


def test_splits_share_no_image_and_no_layout():
    for name in ("digits", "shapes"):
        train, test = caption_set(name, 400, "train"), caption_set(name, 200, "test")
        assert not image_fingerprints(train.images) & image_fingerprints(test.images)
        layouts = {(tuple(c), tuple(b)) for c, b in zip(train.captions, train.word_boxes,
                                                        strict=True)}
        assert not any((tuple(c), tuple(b)) in layouts
                       for c, b in zip(test.captions, test.word_boxes, strict=True))


def test_batches_add_bos_and_eos_and_pad(digits):
    vocab = caption_vocab([digits])
    batch = caption_batch(digits, vocab, [0, 1, 2])
    assert batch.images.shape == (3, 1, 32, 128)
    for row, words in enumerate(digits.captions[:3]):
        ids = vocab.encode(words, eos=False)
        assert batch.tgt_in[row, :len(ids) + 1].tolist() == [BOS_ID, *ids]
        assert batch.tgt_out[row, :len(ids) + 1].tolist() == [*ids, EOS_ID]
        assert (batch.tgt_out[row, len(ids) + 1:] == PAD_ID).all()
    batches = CaptionBatches(digits, vocab, 64, seed=1)
    seen = sorted(i for b in batches for i in b.index)
    assert len(batches) == 5 and seen == list(range(300))
    assert [b.index for b in batches] != [b.index for b in batches]  # reshuffled every epoch


def test_bad_arguments_are_refused_with_clear_messages():
    with pytest.raises(ValueError, match="split must be one of"):
        digit_strips(2, split="dev")
    with pytest.raises(ValueError, match="min_digits <= max_digits <= 5, got 3, 2"):
        digit_strips(2, min_digits=3, max_digits=2)
    with pytest.raises(ValueError, match=r"name must be one of \('digits', .*\), got 'cifar'"):
        caption_set("cifar", 2)
    with pytest.raises(ValueError, match=r"has 2 words but 1 boxes"):
        CaptionSet("digits", "train", torch.zeros(1, 1, 4, 4), [["one", "two"]], [[None]])
    with pytest.raises(ValueError, match=r"expected images \(n, C, H, W\) for n = 2"):
        CaptionSet("digits", "train", torch.zeros(1, 1, 4, 4), [["one"], ["two"]],
                   [[None], [None]])


def test_bundled_digits_match_scikit_learns_loader():
    from sklearn.datasets import load_digits

    from course_lib.data.captions import _bundled_digits
    images, labels = _bundled_digits()
    bundled = load_digits()
    np.testing.assert_allclose(images, bundled.images / 16.0, rtol=0, atol=1e-7)
    assert (labels == bundled.target).all()
