"""Training and evaluating translation models on the generated corpus (lessons 02-05, 10)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch
from torch import nn

from course_lib.data.batching import BatchIterator
from course_lib.data.corpus import Corpus
from course_lib.data.sentences import word_count
from course_lib.data.vocab import Vocab
from course_lib.metrics import alignment_accuracy, bleu, bleu_by_length
from course_lib.models.attention_seq2seq import AttentionSeq2Seq, AttentionSeq2SeqConfig
from course_lib.models.seq2seq import Seq2Seq, Seq2SeqConfig, translation_loss
from course_lib.train.history import History
from course_lib.train.loop import fit
from course_lib.train.schedules import cosine_decay


@dataclass
class Vocabs:
    src: Vocab
    tgt: Vocab


def build_vocabs(corpus: Corpus) -> Vocabs:
    """Source and target vocabularies from the training split only."""
    return Vocabs(Vocab.build(p["en"] for p in corpus.train),
                  Vocab.build(p["fr"] for p in corpus.train))


@dataclass(frozen=True)
class TrainSettings:
    """Adam at ``lr`` on batches of ``batch_size`` pairs for ``steps`` optimiser steps, the rate
    falling along a cosine to ``final_lr_fraction`` of ``lr`` by the last step (None: constant).
    ``max_minutes`` is an optional safety valve on training time (see :func:`max_time_s`). The
    seed is not here: it belongs to the run (the corpus, the initialisation and the batch order
    all come from it)."""

    batch_size: int = 128
    lr: float = 3e-3
    clip_grad_norm: float = 1.0
    steps: int = 1000
    final_lr_fraction: float | None = 0.05
    max_minutes: float | None = None


def max_time_s(max_minutes: float | None) -> float | None:
    """``fit``'s ``max_time_s`` for a safety valve given in minutes (None: no limit)."""
    return None if max_minutes is None else 60.0 * max_minutes


def train_translator(model: nn.Module, corpus: Corpus, vocabs: Vocabs, settings: TrainSettings,
                     device: torch.device | str, seed: int = 0, **fit_kwargs
                     ) -> tuple[History, float]:
    """Adam with gradient clipping for ``settings.steps`` optimiser steps, the learning rate
    decaying along a cosine over those steps (:func:`~course_lib.train.schedules.cosine_decay`), so
    that the model the budget ends with has settled rather than sits on a late loss spike of a
    constant rate.

    ``seed`` orders the batches. Returns the history and the wall time of training in seconds.
    """
    batches = BatchIterator(corpus.train, vocabs.src, vocabs.tgt, settings.batch_size, seed=seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr)
    schedule = None if settings.final_lr_fraction is None else \
        cosine_decay(optimizer, settings.steps, settings.final_lr_fraction)
    start = time.perf_counter()
    history = fit(model, optimizer, batches, translation_loss, max_steps=settings.steps,
                  device=device, clip_grad_norm=settings.clip_grad_norm, scheduler=schedule,
                  max_time_s=max_time_s(settings.max_minutes), **fit_kwargs)
    return history, time.perf_counter() - start


@torch.no_grad()
def translate(model: nn.Module, pairs: list[dict], vocabs: Vocabs, batch_size: int = 256,
              max_len: int = 100) -> list[str]:
    """Greedy translations of every pair's English sentence, in order."""
    model.eval()
    device = next(model.parameters()).device
    hypotheses: list[str] = [""] * len(pairs)
    for batch in BatchIterator(pairs, vocabs.src, vocabs.tgt, batch_size, shuffle=False):
        generated = model.greedy_decode(batch.src.to(device), batch.src_lengths.to(device),
                                        max_len=max_len)
        for row, index in zip(generated.tolist(), batch.index, strict=True):
            hypotheses[index] = " ".join(vocabs.tgt.decode(row))
    return hypotheses


def evaluate_translator(model: nn.Module, pairs: list[dict], vocabs: Vocabs) -> dict:
    """Corpus BLEU and BLEU per source-length bucket (sacreBLEU's 0-100 scale)."""
    hypotheses = translate(model, pairs, vocabs)
    references = [p["fr"] for p in pairs]
    lengths = [word_count(p["en"].split()) for p in pairs]
    return {"bleu": bleu(hypotheses, references),
            "bleu_by_length": bleu_by_length(hypotheses, references, lengths),
            "hypotheses": hypotheses}


def no_attention_model(vocabs: Vocabs, hidden_size: int = 256, embed_dim: int = 128,
                       changes: dict | None = None) -> Seq2Seq:
    """The GRU encoder–decoder without attention (context handed over as the initial state and
    at every step), with ``changes`` to its :class:`Seq2SeqConfig` applied."""
    config = translator_config("none", vocabs, hidden_size, embed_dim)
    return Seq2Seq(replace(config, **(changes or {})))


# The no-attention model and its variants by name: lesson 02 compares the four ways of handing
# the context over, lesson 03 makes the context vector (the state) narrower and wider.
NO_ATTENTION_MODELS = {
    "none": {},
    "none-init": {"context": "init"},
    "none-every-step": {"context": "every_step"},
    "none-first-step": {"context": "first_step"},
    "none-128": {"hidden_size": 128},
    "none-512": {"hidden_size": 512},
    "none-1024": {"hidden_size": 1024},
}


# The attention models of lessons 04-05 by name. "luong-local" is Luong et al.'s best
# single model: the general score with a predictive (local-p) window of half-width D = 10.
# The last two are lesson 05's ablations: a monotonic window (local-m) and no input feeding.
#
# One departure from Luong et al. (2015): the dot and general scores are divided by √H
# (``scaled=True``), as Vaswani et al. (2017) do. A dot product of H-number vectors spreads in
# proportion to √H (for random vectors), so at H = 256 the softmax can saturate early.
_SCALED = dict(scaled=True)
ATTENTION_MODELS = {
    "bahdanau": dict(attention="bahdanau", score="additive"),
    "luong-dot": dict(attention="luong", score="dot", **_SCALED),
    "luong-general": dict(attention="luong", score="general", **_SCALED),
    "luong-concat": dict(attention="luong", score="concat"),
    "luong-local": dict(attention="luong", score="general", local="p", window=10, **_SCALED),
    "luong-local-m": dict(attention="luong", score="general", local="m", window=10, **_SCALED),
    "luong-general-no-feeding": dict(attention="luong", score="general", input_feeding=False,
                                     **_SCALED),
}
TRANSLATORS = (*NO_ATTENTION_MODELS, *ATTENTION_MODELS)
# What `course reproduce bottleneck` trains by default: the models of the headline figure.
HEADLINE_MODELS = ("none", "bahdanau", "luong-dot", "luong-general", "luong-concat",
                   "luong-local")


def translator_class(name: str) -> type[nn.Module]:
    if name not in TRANSLATORS:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(TRANSLATORS)}")
    return Seq2Seq if name in NO_ATTENTION_MODELS else AttentionSeq2Seq


TranslatorConfig = Seq2SeqConfig | AttentionSeq2SeqConfig


def translator_config(name: str, vocabs: Vocabs, hidden_size: int = 256, embed_dim: int = 128
                      ) -> TranslatorConfig:
    """The complete config of the model ``name`` (one of :data:`NO_ATTENTION_MODELS` or
    :data:`ATTENTION_MODELS`) for these vocabularies: ``hidden_size`` and ``embed_dim`` are the
    defaults a variant may change (``none-512`` sets its own width).

    Attention models get a bidirectional encoder with ``hidden_size / 2`` units per direction,
    so that annotations and decoder states both have ``hidden_size`` numbers.
    """
    if translator_class(name) is Seq2Seq:
        config = Seq2SeqConfig(len(vocabs.src), len(vocabs.tgt), embed_dim=embed_dim,
                               hidden_size=hidden_size, context="both")
        return replace(config, **NO_ATTENTION_MODELS[name])
    return AttentionSeq2SeqConfig(len(vocabs.src), len(vocabs.tgt), embed_dim=embed_dim,
                                  hidden_size=hidden_size, **ATTENTION_MODELS[name])


def translator_from_config(config: TranslatorConfig) -> nn.Module:
    """A fresh model of the class ``config`` belongs to."""
    return Seq2Seq(config) if isinstance(config, Seq2SeqConfig) else AttentionSeq2Seq(config)


def build_translator(name: str, vocabs: Vocabs, hidden_size: int = 256,
                     embed_dim: int = 128) -> nn.Module:
    """A fresh model by name, built from :func:`translator_config`."""
    return translator_from_config(translator_config(name, vocabs, hidden_size, embed_dim))


@torch.no_grad()
def reference_attention(model: nn.Module, pairs: list[dict], vocabs: Vocabs,
                        batch_size: int = 256) -> list[torch.Tensor]:
    """Attention weights while the model reads each reference translation (teacher forcing).

    Row t of a pair's matrix is the attention used to emit French token t (the last row is for
    EOS); column j is English token j (the last column is the source EOS). Forced decoding
    scores alignments on the gold target, so a wrong word early on does not shift the rest.

    Returns one CPU tensor per pair, in order, of shape (len(fr) + 1, len(en) + 1).
    """
    model.eval()
    device = next(model.parameters()).device
    maps: list[torch.Tensor] = [torch.empty(0)] * len(pairs)
    for batch in BatchIterator(pairs, vocabs.src, vocabs.tgt, batch_size, shuffle=False):
        output = model(batch.src.to(device), batch.src_lengths.to(device),
                       batch.tgt_in.to(device))
        if not isinstance(output, tuple):
            raise TypeError(f"{type(model).__name__} returns no attention weights")
        weights = output[1].float().cpu()  # (B, T, S)
        target_lengths = (batch.tgt_out != 0).sum(dim=1)  # (B,)
        for row, index in enumerate(batch.index):
            maps[index] = weights[row, :target_lengths[row], :batch.src_lengths[row]]
    return maps


def evaluate_alignment(model: nn.Module, pairs: list[dict], vocabs: Vocabs) -> float:
    """Share of gold-aligned content words whose attention argmax is on their English word."""
    return alignment_accuracy(reference_attention(model, pairs, vocabs),
                              [p["align"] for p in pairs])


def translation_metrics(name: str, record: dict) -> list[tuple[str, float | None]]:
    """The rows a translation model's record gives the results page: BLEU on each source-length
    bucket, overall, and alignment accuracy (None without attention)."""
    return [*((f"{name}: BLEU {bucket}", value)
              for bucket, value in record["bleu_by_length"].items()),
            (f"{name}: BLEU overall", record["bleu"]),
            (f"{name}: alignment accuracy", record["alignment_accuracy"])]
