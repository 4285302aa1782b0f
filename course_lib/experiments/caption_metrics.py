"""Captioning a set of images and measuring the captions (lesson 07, ``course reproduce
captioning``): exact match, BLEU-4, and localisation (the share of content words whose attention
peak falls inside the box of the object they name)."""

from __future__ import annotations

import torch

from course_lib.data.captions import COLOURS, DIGIT_WORDS, SHAPES, SIZES, CaptionSet
from course_lib.data.vocab import Vocab
from course_lib.metrics import bleu, localization_accuracy
from course_lib.models.captioner import ShowAttendTell

CONTENT_WORDS = {"digits": frozenset(DIGIT_WORDS),
                 "shapes": frozenset((*SHAPES, *COLOURS, *SIZES))}

@torch.no_grad()
def caption_images(model: ShowAttendTell, images: torch.Tensor, vocab: Vocab,
                   beam_size: int = 1, batch_size: int = 256, max_len: int = 30,
                   attention: str = "soft", seed: int = 0
                   ) -> tuple[list[list[str]], list[torch.Tensor]]:
    """Generated captions (lists of words) and, for each, its attention (T', L) on the CPU, one
    row per generated word (EOS excluded). ``attention`` ("soft", "argmax" or "sample", greedy
    decoding only) picks what the decoder reads; ``seed`` seeds the sampling."""
    if beam_size != 1 and attention != "soft":
        raise ValueError(f"beam search reads soft attention; got attention={attention!r} with "
                         f"beam_size={beam_size}")
    model.eval()
    generator = torch.Generator(next(model.parameters()).device).manual_seed(seed)
    device = next(model.parameters()).device
    captions, weights = [], []
    for start in range(0, len(images), batch_size):
        batch = images[start:start + batch_size].to(device)
        out = model.greedy_decode(batch, max_len, attention, generator) if beam_size == 1 \
            else model.beam_search(batch, beam_size, max_len)
        for tokens, maps in zip(out.tokens.cpu(), out.weights.cpu(), strict=True):
            words = vocab.decode(tokens)
            captions.append(words)
            weights.append(maps[:len(words)])  # (T', L)
    return captions, weights


def evaluate_captioner(model: ShowAttendTell, name: str, data: CaptionSet, vocab: Vocab,
                       beam_size: int = 1, attention: str = "soft") -> dict:
    """Exact match, BLEU-4 and localisation on ``data``, plus the captions and attention maps."""
    captions, weights = caption_images(model, data.images, vocab, beam_size,
                                       attention=attention)
    grid = model.encoder.grid_shape(*data.images.shape[2:])
    exact = sum(c == r for c, r in zip(captions, data.captions, strict=True)) / len(data)
    return {
        "exact_match": exact,
        "bleu4": bleu([" ".join(c) for c in captions], [" ".join(r) for r in data.captions]),
        "localization": _localization(weights, captions, data, grid, name),
        "captions": captions,
        "weights": weights,
        "grid": grid,
    }


def _localization(weights, captions, data: CaptionSet, grid, name: str) -> float:
    """Localisation accuracy; 0.0 when no content word was generated at all (nothing was
    localised), where the share itself is undefined."""
    if not any(w in CONTENT_WORDS[name] for caption in captions for w in caption):
        return 0.0
    return localization_accuracy(weights, captions, data.captions, data.word_boxes, grid,
                                 tuple(data.images.shape[2:]), CONTENT_WORDS[name])
