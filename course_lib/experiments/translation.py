"""Translation models on the generated corpus (lessons 02-05, 10): the named translators and
their configs, the settings of one trained translator (:class:`BottleneckSettings`, which the
Transformer experiment reads too), training, greedy translation, evaluation and the JSON record
and table every translation experiment writes."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from torch import nn

from course_lib.arguments import check_positive_int
from course_lib.data.batching import BatchIterator
from course_lib.data.corpus import Corpus, CorpusConfig, load_corpus
from course_lib.data.sentences import word_count
from course_lib.data.vocab import Vocab
from course_lib.experiments.runs import DEFAULT_SEED, MODEL_CACHE, TrainSettings, cache_file
from course_lib.metrics import alignment_accuracy, bleu, bleu_by_length
from course_lib.models import count_parameters
from course_lib.models.attention_seq2seq import AttentionSeq2Seq, AttentionSeq2SeqConfig
from course_lib.models.seq2seq import Seq2Seq, Seq2SeqConfig, translation_loss
from course_lib.profile import by_profile
from course_lib.seeding import REPRODUCE_THREADS
from course_lib.tokens import PAD_ID
from course_lib.train.history import History
from course_lib.train.loop import fit

# Optimiser steps per translator in the full profile: 8 epochs of the 16,000 training pairs in
# batches of 128, the same for every model, so every model sees the same batches in the same order.
BOTTLENECK_STEPS = 1000


@dataclass
class Vocabs:
    src: Vocab
    tgt: Vocab


def build_vocabs(corpus: Corpus) -> Vocabs:
    """Source and target vocabularies from the training split only."""
    return Vocabs(Vocab.build(p["en"] for p in corpus.train),
                  Vocab.build(p["fr"] for p in corpus.train))


def bottleneck_training() -> TrainSettings:
    """The training settings every translator of the bottleneck experiment shares, in the
    active profile."""
    return TrainSettings(batch_size=by_profile(fast=32, full=128), lr=3e-3,
                         steps=by_profile(fast=20, full=BOTTLENECK_STEPS))


def corpus_size() -> int:
    """Sentence pairs of the corpus every translation experiment trains on, in the active
    profile."""
    return by_profile(fast=400, full=20000)


def train_translator(model: nn.Module, corpus: Corpus, vocabs: Vocabs, settings: TrainSettings,
                     device: torch.device | str, seed: int = 0, **fit_kwargs
                     ) -> tuple[History, float]:
    """Adam with gradient clipping for ``settings.steps`` optimiser steps, the learning rate
    following the settings' schedule: for the bottleneck experiment a cosine decay over those
    steps (:func:`~course_lib.train.schedules.cosine_decay`), so that the model the budget ends
    with has settled rather than sits on a late loss spike of a constant rate.

    ``seed`` orders the batches. Returns the history and the wall time of training in seconds.
    """
    batches = BatchIterator(corpus.train, vocabs.src, vocabs.tgt, settings.batch_size, seed=seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr)
    start = time.perf_counter()
    history = fit(model, optimizer, batches, translation_loss, max_steps=settings.steps,
                  device=device, clip_grad_norm=settings.clip_grad_norm,
                  scheduler=settings.scheduler(optimizer), max_time_s=settings.max_time_s,
                  **fit_kwargs)
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


def check_width(width: object) -> tuple[int, int]:
    """``width`` as (hidden size, embedding size): two positive ints, the hidden size even (the
    encoder runs half of it in each direction)."""
    if not isinstance(width, (tuple, list)) or len(width) != 2:
        raise ValueError(f"width must be (hidden size, embedding size), got {width!r}")
    hidden = check_positive_int("width[0] (the hidden size)", width[0])
    embed = check_positive_int("width[1] (the embedding size)", width[1])
    if hidden % 2:
        raise ValueError(f"width[0] (the hidden size) must be even (half of it runs in each "
                         f"direction of the encoder), got {hidden}")
    return hidden, embed


@dataclass(frozen=True)
class BottleneckSettings:
    """Everything that decides one translator of the bottleneck experiment (lessons 02-05, and
    the RNN models lesson 10 compares the Transformer with): the seed (the corpus, the
    initialisation and the batch order all come from it), the corpus size, the model's complete
    config (vocabulary sizes from the corpus), the training settings and the torch threads."""

    seed: int
    corpus_size: int
    model: TranslatorConfig
    train: TrainSettings
    threads: int = REPRODUCE_THREADS

    @property
    def corpus(self) -> CorpusConfig:
        return CorpusConfig(size=self.corpus_size, seed=self.seed)

    @classmethod
    def build(cls, name: str, seed: int = DEFAULT_SEED, vocabs: Vocabs | None = None, *,
              steps: int | None = None, max_minutes: float | None = None,
              threads: int = REPRODUCE_THREADS, width: tuple[int, int] | None = None,
              train: TrainSettings | None = None) -> BottleneckSettings:
        """The settings of model ``name`` with ``seed`` in the active profile; ``vocabs`` (from
        the corpus of that seed, built when not given) set the model's vocabulary sizes.
        ``steps`` and ``max_minutes`` replace the step budget and the safety valve of ``train``
        (default :func:`bottleneck_training`); ``width`` = (hidden size, embedding size)
        replaces the experiment's."""
        translator_class(name)  # an unknown name fails here, naming the choices
        size = corpus_size()
        vocabs = vocabs or build_vocabs(load_corpus(CorpusConfig(size=size, seed=seed)))
        hidden, embed = (by_profile(fast=32, full=256), by_profile(fast=16, full=128)) \
            if width is None else check_width(width)
        model = translator_config(name, vocabs, hidden_size=hidden, embed_dim=embed)
        budget = {key: value for key, value in (("steps", steps), ("max_minutes", max_minutes))
                  if value is not None}
        return cls(seed, size, model, replace(train or bottleneck_training(), **budget), threads)


def checkpoint_path(name: str, settings: BottleneckSettings, cache_dir: Path = MODEL_CACHE
                    ) -> Path:
    """Where the translator ``name`` trained with exactly these settings is kept."""
    return cache_file(f"bottleneck-{name}", [name, settings.corpus.key(), asdict(settings)],
                      cache_dir)


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
        target_lengths = (batch.tgt_out != PAD_ID).sum(dim=1)  # (B,)
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


def _rounded(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def translation_entry(scores: dict, model: nn.Module, history: History, wall_s: float,
                      alignment: float | None = None) -> dict:
    """A translation model's JSON record (the same keys for every model of every command):
    test BLEU overall and by source length, alignment accuracy (None without attention), size,
    optimiser steps, epochs, training time, final training loss, and ``cut_short`` (True when a
    ``max_minutes`` safety valve ended training before its step budget)."""
    return {
        "bleu": _rounded(scores["bleu"]),
        "bleu_by_length": {k: _rounded(v) for k, v in scores["bleu_by_length"].items()},
        "alignment_accuracy": _rounded(alignment, 4),
        "params": count_parameters(model),
        "steps": int(history["steps"][-1]),
        "epochs": len(history),
        "wall_s": round(wall_s, 1),
        "final_train_loss": round(history["train_loss"][-1], 6),
        "cut_short": bool(history.stopped_by_time),
    }


def results_table(result: dict) -> str:
    """A Markdown table of the translation records of a result (``result["models"]``): BLEU by
    length, overall, alignment, size, optimiser steps, epochs and training time."""
    buckets = list(next(iter(result["models"].values()))["bleu_by_length"])
    header = ["model", *buckets, "overall", "alignment", "params", "steps", "epochs",
              "train s"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]

    def number(value, fmt="{:.1f}"):
        return "-" if value is None else fmt.format(value)

    for name, e in result["models"].items():
        cells = [name, *(number(e["bleu_by_length"][b]) for b in buckets), number(e["bleu"]),
                 number(e["alignment_accuracy"], "{:.1%}"), f"{e['params']:,}",
                 f"{e['steps']:,}", str(e["epochs"]), f"{e['wall_s']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
