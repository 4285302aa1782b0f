"""Captioned images with known object boxes, generated offline from a seed (lesson 07).

Two data sets, both drawn by code so that every named object's position is known exactly:

- **Digit strips.** 2 to 5 of scikit-learn's bundled 8×8 handwritten digits (Alpaydin & Kaynak,
  UCI), each scaled to a random size, jittered and placed left to right on a noisy canvas,
  captioned in words: "three one four". Each split draws its digits from its own share of the
  1,797 bundled images, so the test digits were never seen in training.
- **Shape scenes.** Two or three coloured shapes (circle, square, triangle; five colours; small or
  large) in a row, left to right or top to bottom, captioned with relations:
  "a small red circle left of a large blue square".

Every example records, for each word of its caption, the box of the object the word names
(None for words that name no object: "a", "left", "of", "above"). Boxes are
``(x0, y0, x1, y1)`` in pixels, ``x1`` and ``y1`` exclusive. Images are float32 CPU tensors in
[0, 1] of shape (C, H_img, W_img).
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from course_lib.arguments import check_choice, check_index
from course_lib.data.batching import pad
from course_lib.data.vocab import Vocab
from course_lib.tokens import BOS_ID, EOS_ID, PAD_ID

Box = tuple[int, int, int, int]
DATASETS = ("digits", "shapes")
# Raise it whenever a change to the generators changes the images or captions they give for a
# seed: saved captioners are keyed by it, so a model trained on the old data is never reused.
DATA_VERSION = 2  # 2: shape rows whose direction the image shows (RELATION_MARGIN)
SPLITS = ("train", "val", "test")
DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
SHAPES = ("circle", "square", "triangle")
COLOURS = {"red": (0.95, 0.15, 0.15), "green": (0.15, 0.85, 0.2), "blue": (0.2, 0.35, 1.0),
           "yellow": (0.95, 0.9, 0.1), "white": (0.95, 0.95, 0.95)}
SIZES = {"small": 5, "large": 9}  # half-widths in pixels
RELATION_MARGIN = 4  # pixels by which a row runs more along than across (see _shape_scene)
DIGIT_CANVAS = (32, 128)  # (H_img, W_img)
SHAPE_CANVAS = (64, 64)
# Shares of the bundled digit images that each split draws from (the rest is test).
DIGIT_POOL_SHARES = {"train": 0.7, "val": 0.15}
_SPLIT_OFFSET = {"train": 0, "val": 1, "test": 2}


@dataclass
class CaptionSet:
    """``n`` images with their captions and, for every caption word, the box it names.

    Shapes: ``images`` (n, C, H_img, W_img) float32 in [0, 1]; ``captions[i]`` a list of words;
    ``word_boxes[i][t]`` the box named by word t of caption i, or None.
    """

    name: str
    split: str
    images: torch.Tensor
    captions: list[list[str]]
    word_boxes: list[list[Box | None]]

    def __len__(self) -> int:
        return len(self.captions)

    def __post_init__(self) -> None:
        if not (self.images.dim() == 4 and self.images.shape[0] == len(self.captions)
                == len(self.word_boxes)):
            raise ValueError(f"expected images (n, C, H, W) for n = {len(self.captions)} "
                             f"captions, got {tuple(self.images.shape)}")
        for words, boxes in zip(self.captions, self.word_boxes, strict=True):
            if len(words) != len(boxes):
                raise ValueError(f"caption {' '.join(words)!r} has {len(words)} words but "
                                 f"{len(boxes)} boxes")


def _split_rng(seed: int, name: str, split: str) -> np.random.Generator:
    check_choice("split", split, SPLITS)
    return np.random.default_rng([seed, DATASETS.index(name), _SPLIT_OFFSET[split]])


# Digit strips


def digit_pools(seed: int = 0) -> dict[str, np.ndarray]:
    """Indices into ``sklearn.datasets.load_digits()`` for each split, disjoint, by seed."""
    n = len(_bundled_digits()[1])
    order = np.random.default_rng([seed, 99]).permutation(n)
    n_train = int(DIGIT_POOL_SHARES["train"] * n)
    n_val = int(DIGIT_POOL_SHARES["val"] * n)
    return {"train": order[:n_train], "val": order[n_train:n_train + n_val],
            "test": order[n_train + n_val:]}


@functools.cache
def _bundled_digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 1,797 digits as (images in [0, 1] of shape (1797, 8, 8), labels (1797,)).

    Read straight from the file ``sklearn.datasets.load_digits`` reads (importing scikit-learn
    itself takes seconds).
    """
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the digit strips need scikit-learn's bundled digits: "
                                  "pip install scikit-learn")
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    table = np.loadtxt(path, delimiter=",", dtype=np.float32)  # (1797, 65): 64 pixels, label
    return (table[:, :-1] / 16.0).reshape(-1, 8, 8), table[:, -1].astype(np.int64)


@functools.cache
def _resized_digits(size: int) -> np.ndarray:
    """Every bundled digit resized (bilinear) to (size, size). Shape: (1797, size, size)."""
    images = torch.from_numpy(_bundled_digits()[0]).unsqueeze(1)  # (1797, 1, 8, 8)
    resized = torch.nn.functional.interpolate(images, size=(size, size), mode="bilinear",
                                              align_corners=False)
    return resized.squeeze(1).numpy()  # (1797, size, size)


def digit_strips(n: int, split: str = "train", seed: int = 0, min_digits: int = 2,
                 max_digits: int = 5, noise: float = 0.05) -> CaptionSet:
    """``n`` strips of ``min_digits`` to ``max_digits`` digits, captioned in words.

    Each digit is scaled to 13-19 pixels, placed 1-5 pixels after the previous one with a random
    vertical offset. Shape of ``images``: (n, 1, 32, 128).
    """
    if not 1 <= min_digits <= max_digits <= 5:
        raise ValueError(f"need 1 <= min_digits <= max_digits <= 5, got {min_digits}, "
                         f"{max_digits}")
    rng = _split_rng(seed, "digits", split)
    labels = _bundled_digits()[1]
    pool = digit_pools(seed)[split]
    height, width = DIGIT_CANVAS
    images = np.zeros((n, 1, height, width), dtype=np.float32)
    captions, word_boxes = [], []
    for i in range(n):
        count = int(rng.integers(min_digits, max_digits + 1))
        sizes = rng.integers(13, 20, size=count)
        gaps = rng.integers(1, 6, size=count)
        used = int(sizes.sum() + gaps[1:].sum())
        x = int(rng.integers(0, width - used + 1))
        words, boxes = [], []
        for size, gap, index in zip(sizes, gaps, rng.choice(pool, size=count), strict=True):
            if boxes:
                x += int(gap)
            size = int(size)
            y = int(rng.integers(0, height - size + 1))
            glyph = _resized_digits(size)[index]
            region = images[i, 0, y:y + size, x:x + size]
            np.maximum(region, glyph, out=region)
            words.append(DIGIT_WORDS[labels[index]])
            boxes.append((x, y, x + size, y + size))
            x += size
        captions.append(words)
        word_boxes.append(boxes)
    images += rng.normal(0.0, noise, size=images.shape).astype(np.float32)
    return CaptionSet("digits", split, torch.from_numpy(images.clip(0.0, 1.0)), captions,
                      word_boxes)


# Shape scenes


def _shape_mask(kind: str, cx: int, cy: int, half: int, height: int, width: int) -> np.ndarray:
    """Boolean (height, width) mask of one shape centred on (cx, cy) with half-width ``half``."""
    dx = np.arange(width)[None, :] - cx  # (1, width)
    dy = np.arange(height)[:, None] - cy  # (height, 1)
    if kind == "circle":
        return dx ** 2 + dy ** 2 <= half ** 2
    if kind == "square":
        return (np.abs(dx) <= half) & (np.abs(dy) <= half)
    # An upright triangle: apex at (cx, cy - half), base on the row cy + half.
    rows_down = dy + half  # 0 at the apex, 2·half at the base
    return (rows_down >= 0) & (rows_down <= 2 * half) & (2 * np.abs(dx) <= rows_down)


def shape_scenes(n: int, split: str = "train", seed: int = 0, min_objects: int = 2,
                 max_objects: int = 3, noise: float = 0.05) -> CaptionSet:
    """``n`` scenes of ``min_objects`` to ``max_objects`` shapes in a row, with relation captions.

    The row runs left to right ("left of") or top to bottom ("above"); objects are named in that
    order, each as "a SIZE COLOUR SHAPE". SIZE, COLOUR and SHAPE words name the object's box.
    Each split has its own random stream; with about 10⁹ layouts per two-object row, splits
    practically never share one (the tests check). Shape of ``images``: (n, 3, 64, 64).
    """
    if not 1 <= min_objects <= max_objects <= 3:
        raise ValueError(f"need 1 <= min_objects <= max_objects <= 3, got {min_objects}, "
                         f"{max_objects}")
    rng = _split_rng(seed, "shapes", split)
    height, width = SHAPE_CANVAS
    images = np.zeros((n, 3, height, width), dtype=np.float32)
    captions, word_boxes = [], []
    for i in range(n):
        words, boxes = _shape_scene(images[i], rng, min_objects, max_objects)
        captions.append(words)
        word_boxes.append(boxes)
    images += rng.normal(0.0, noise, size=images.shape).astype(np.float32)
    return CaptionSet("shapes", split, torch.from_numpy(images.clip(0.0, 1.0)), captions,
                      word_boxes)


def _shape_scene(image: np.ndarray, rng: np.random.Generator, min_objects: int,
                 max_objects: int) -> tuple[list[str], list[Box | None]]:
    """Draw one scene into ``image`` (3, H_img, W_img); return its caption and word boxes."""
    _, height, width = image.shape
    count = int(rng.integers(min_objects, max_objects + 1))
    horizontal = bool(rng.integers(0, 2))
    cell = (width if horizontal else height) // count
    span = height if horizontal else width  # the canvas across the row
    words: list[str] = []
    boxes: list[Box | None] = []
    previous: tuple[int, int] | None = None  # (along, across) of the previous object's centre
    for k in range(count):
        kind = SHAPES[int(rng.integers(len(SHAPES)))]
        colour = list(COLOURS)[int(rng.integers(len(COLOURS)))]
        size = list(SIZES)[int(rng.integers(len(SIZES)))]
        half = SIZES[size]
        # Along the row: anywhere inside the object's own cell. Across it: anywhere on the
        # canvas for the first object; each next one stays close enough to the previous one that
        # the row's direction is visible, |Δacross| <= |Δalong| - RELATION_MARGIN. Without this
        # rule 45% of scenes had a pair about as far apart across as along, which fits "left of"
        # and "above" alike; a trained model got the relation wrong in 142 of 1000 test
        # captions, 128 of them such scenes.
        along = k * cell + int(rng.integers(half, cell - half))
        low, high = half, span - half - 1
        if previous is not None:
            slack = along - previous[0] - RELATION_MARGIN  # >= 2·min half - margin > 0
            low, high = max(low, previous[1] - slack), min(high, previous[1] + slack)
        across = int(rng.integers(low, high + 1))
        previous = (along, across)
        cx, cy = (along, across) if horizontal else (across, along)
        mask = _shape_mask(kind, cx, cy, half, height, width)
        image[:, mask] = np.asarray(COLOURS[colour], dtype=np.float32)[:, None]
        box = (cx - half, cy - half, cx + half + 1, cy + half + 1)
        if k:
            relation = ["left", "of"] if horizontal else ["above"]
            words += relation
            boxes += [None] * len(relation)
        words += ["a", size, colour, kind]
        boxes += [None, box, box, box]
    return words, boxes


def caption_set(name: str, n: int, split: str = "train", seed: int = 0) -> CaptionSet:
    """``digit_strips`` or ``shape_scenes`` by name."""
    check_choice("name", name, DATASETS)
    return (digit_strips if name == "digits" else shape_scenes)(n, split=split, seed=seed)


# Captions as token ids


def caption_vocab(sets: Sequence[CaptionSet]) -> Vocab:
    """The words of the captions of ``sets`` (build it from the training split)."""
    return Vocab.build(words for s in sets for words in s.captions)


@dataclass
class CaptionBatch:
    """Shapes: ``images`` (B, C, H_img, W_img); ``tgt_in`` = BOS + caption, ``tgt_out`` =
    caption + EOS, both (B, T) padded with PAD; ``index`` the rows of the :class:`CaptionSet`."""

    images: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    index: list[int]


def caption_batch(data: CaptionSet, vocab: Vocab, index: Sequence[int]) -> CaptionBatch:
    """The captions and images at the positions ``index`` (a non-empty list of positions into
    ``data``) as one padded batch."""
    index = check_index("index", index, len(data))
    index = [index] if isinstance(index, int) else index
    ids = [vocab.encode(data.captions[i], eos=False) for i in index]
    return CaptionBatch(images=data.images[list(index)],
                        tgt_in=pad([[BOS_ID] + x for x in ids], PAD_ID),
                        tgt_out=pad([x + [EOS_ID] for x in ids], PAD_ID),
                        index=list(index))


class CaptionBatches:
    """Shuffled batches of a :class:`CaptionSet`, a new order every epoch (seeded)."""

    def __init__(self, data: CaptionSet, vocab: Vocab, batch_size: int, shuffle: bool = True,
                 seed: int = 0) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.data, self.vocab, self.batch_size, self.shuffle = data, vocab, batch_size, shuffle
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return -(-len(self.data) // self.batch_size)

    def __iter__(self):
        order = torch.randperm(len(self.data), generator=self.generator).tolist() \
            if self.shuffle else list(range(len(self.data)))
        for start in range(0, len(order), self.batch_size):
            yield caption_batch(self.data, self.vocab, order[start:start + self.batch_size])
