"""``course reproduce``: retrain from scratch and write the measured results.

``course reproduce bottleneck`` trains every translator of lessons 02-05 (no attention,
Bahdanau, Luong dot/general/concat, Luong local-p) on the same generated corpus, each from
scratch with the same seed for the same number of optimiser steps (:data:`BOTTLENECK_STEPS`),
and writes ``results/seed-N/bottleneck.json`` and ``bottleneck.png``: test-split BLEU overall
and per source-length bucket, alignment accuracy against the gold word alignments, parameters,
steps and training time. ``--model NAME`` trains one model and writes ``bottleneck-NAME.json``
in the same shape. Lessons 03-05 call the same functions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from course_lib.data.corpus import Corpus, CorpusConfig, load_corpus
from course_lib.device import get_device
from course_lib.experiments.results_page import load_seeds
from course_lib.experiments.runs import (
    DEFAULT_SEED,
    MODEL_CACHE,
    RESULTS_DIR,
    cache_file,
    load_saved,
    run_metadata,
    save_figure,
    train_or_load,
    write_json,
)
from course_lib.experiments.translation import (
    ATTENTION_MODELS,
    HEADLINE_MODELS,
    TRANSLATORS,
    TrainSettings,
    Vocabs,
    build_translator,
    build_vocabs,
    evaluate_alignment,
    evaluate_translator,
    train_translator,
    translator_class,
)
from course_lib.models import count_parameters
from course_lib.models.seq2seq import Seq2Seq
from course_lib.profile import by_profile
from course_lib.seeding import REPRODUCE_THREADS, fixed_threads, seed_everything
from course_lib.train.loop import History
from course_lib.viz import plot_bleu_by_length

BOTTLENECK_MODELS = HEADLINE_MODELS
# Optimiser steps per translator in the full profile: 8 epochs of the 16,000 training pairs in
# batches of 128, the same for every model, so every model sees the same batches in the same order.
BOTTLENECK_STEPS = 1000


@dataclass
class BottleneckSettings:
    """Corpus size, model sizes, training settings and the torch threads of the bottleneck
    experiment."""

    corpus_size: int
    hidden_size: int
    embed_dim: int
    train: TrainSettings
    threads: int = REPRODUCE_THREADS

    @classmethod
    def for_profile(cls, seed: int = DEFAULT_SEED) -> BottleneckSettings:
        return cls(
            corpus_size=by_profile(fast=400, full=20000),
            hidden_size=by_profile(fast=32, full=256),
            embed_dim=by_profile(fast=16, full=128),
            train=TrainSettings(batch_size=by_profile(fast=32, full=128), lr=3e-3,
                                steps=by_profile(fast=20, full=BOTTLENECK_STEPS), seed=seed),
        )


@dataclass
class BottleneckRun:
    """``result`` is what the JSON file holds; the rest is for lessons to look into.

    ``models``, ``histories`` and ``hypotheses`` are keyed by model name.
    """

    result: dict
    models: dict[str, torch.nn.Module]
    histories: dict[str, History]
    hypotheses: dict[str, list[str]]
    corpus: Corpus
    vocabs: Vocabs

    def _only(self) -> str:
        if len(self.models) != 1:
            raise AttributeError(f"this run trained {len(self.models)} models; index by name")
        return next(iter(self.models))

    @property
    def model(self) -> torch.nn.Module:
        """The model, when the run trained exactly one (likewise ``history``)."""
        return self.models[self._only()]

    @property
    def history(self) -> History:
        return self.histories[self._only()]

    def table(self) -> str:
        """The measured results as a Markdown table, one row per model."""
        return results_table(self.result)


def _rounded(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def checkpoint_path(name: str, corpus: Corpus, settings: BottleneckSettings,
                    cache_dir: Path = MODEL_CACHE) -> Path:
    """Where the model trained with exactly these settings on exactly this corpus is kept."""
    return cache_file(f"bottleneck-{name}", [name, ATTENTION_MODELS.get(name),
                                             corpus.config.key(), asdict(settings)], cache_dir)


def translation_entry(scores: dict, model: torch.nn.Module, history, wall_s: float,
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


def _train_and_measure(name: str, corpus: Corpus, vocabs: Vocabs,
                       settings: BottleneckSettings, device: torch.device, progress: bool,
                       live_plot: bool | None) -> tuple[torch.nn.Module, dict]:
    """Train one model from scratch on ``settings.threads`` threads and measure it on the test
    split. Returns the model and its record: ``entry`` (the JSON record), ``history`` and
    ``hypotheses``."""
    with fixed_threads(settings.threads):
        seed_everything(settings.train.seed)
        model = build_translator(name, vocabs, settings.hidden_size, settings.embed_dim)
        history, wall_s = train_translator(model, corpus, vocabs, settings.train, device,
                                           progress=progress, live_plot=live_plot)
        scores = evaluate_translator(model, corpus.test, vocabs)
        alignment = None if translator_class(name) is Seq2Seq else \
            evaluate_alignment(model, corpus.test, vocabs)
    entry = translation_entry(scores, model, history, wall_s, alignment)
    return model, {"entry": entry, "history": history.records,
                   "hypotheses": scores["hypotheses"]}


def load_measured(name: str, corpus: Corpus, settings: BottleneckSettings, device: torch.device,
                  cache_dir: Path = MODEL_CACHE):
    """The saved model of :func:`reproduce_bottleneck` with the same settings, as
    ``(entry, model, history, hypotheses)``, or None."""
    saved = load_saved(checkpoint_path(name, corpus, settings, cache_dir),
                       translator_class(name), device)
    if saved is None:
        return None
    model, extra = saved
    return extra["entry"], model, History(records=extra["history"]), extra["hypotheses"]


def measured_translators(seed: int = DEFAULT_SEED, results_dir: Path = RESULTS_DIR
                         ) -> dict[str, dict]:
    """The committed full-profile records of every translator measured with ``seed``
    (``results/seed-N/bottleneck*.json``), keyed by model name: what a lesson can show without
    training. Empty when nothing was measured with that seed."""
    return load_seeds(results_dir).get(seed, {}).get("bottleneck", {}).get("models", {})


def translator_config(name: str, seed: int = DEFAULT_SEED,
                      settings: BottleneckSettings | None = None):
    """The config of the model ``name`` that :func:`reproduce_bottleneck` trains with these
    settings (vocabulary sizes from the corpus of ``seed``), without training it: what a lesson
    draws before it trains."""
    settings = settings or BottleneckSettings.for_profile(seed)
    vocabs = build_vocabs(load_corpus(CorpusConfig(size=settings.corpus_size, seed=seed)))
    return build_translator(name, vocabs, settings.hidden_size, settings.embed_dim).config


def reproduce_bottleneck(models: str | tuple[str, ...] | list[str] = BOTTLENECK_MODELS,
                         seed: int = DEFAULT_SEED, out_dir: Path | None = None,
                         settings: BottleneckSettings | None = None, progress: bool = True,
                         live_plot: bool | None = None, reuse: bool = False,
                         cache_dir: Path | None = MODEL_CACHE) -> BottleneckRun:
    """Train each of ``models`` from scratch with ``seed`` (data and initialisation) on the same
    corpus and budget, and evaluate them on the test split.

    Every trained model is saved in ``cache_dir`` (None: not saved). With ``reuse=True`` a model
    already saved there with exactly these settings is loaded instead of retrained (lessons do
    this; ``course reproduce`` never does). With ``out_dir``, write ``bottleneck-NAME.json`` for
    a single model given by name, or ``bottleneck.json`` and ``bottleneck.png`` for several.
    """
    names = (models,) if isinstance(models, str) else tuple(models)
    unknown = [n for n in names if n not in TRANSLATORS]
    if unknown or not names:
        raise ValueError(f"unknown model {unknown[0] if unknown else None!r}; available: "
                         f"{', '.join(TRANSLATORS)}")
    settings = settings or BottleneckSettings.for_profile(seed)
    corpus = load_corpus(CorpusConfig(size=settings.corpus_size, seed=seed))
    vocabs = build_vocabs(corpus)
    device = get_device()
    run = BottleneckRun({}, {}, {}, {}, corpus, vocabs)
    entries = {}
    for name in names:
        path = None if cache_dir is None else checkpoint_path(name, corpus, settings, cache_dir)
        model, extra = train_or_load(
            path, translator_class(name), device, reuse=reuse and cache_dir is not None,
            label=name, train=lambda name=name: _train_and_measure(
                name, corpus, vocabs, settings, device, progress, live_plot))
        entries[name] = extra["entry"]
        run.models[name], run.hypotheses[name] = model, extra["hypotheses"]
        run.histories[name] = History(records=extra["history"])
    run.result.update({"models": entries, **run_metadata(seed, device, settings, corpus)})
    if out_dir is not None:
        stem = f"bottleneck-{models}" if isinstance(models, str) else "bottleneck"
        write_results(run.result, Path(out_dir), stem)
    return run


def write_results(result: dict, out_dir: Path, stem: str) -> list[Path]:
    """``STEM.json`` (written atomically) and, for several models, ``STEM.png``."""
    written = [write_json(result, out_dir / f"{stem}.json")]
    if len(result["models"]) > 1:
        written.append(save_figure(lambda: plot_bleu_by_length(
            {n: e["bleu_by_length"] for n, e in result["models"].items()},
            title=f"Test BLEU by source length (seed {result['seed']})").figure,
            out_dir / f"{stem}.png", dpi=120))
    return written


def results_table(result: dict) -> str:
    """A Markdown table of a result dict: BLEU by length, overall, alignment, size, optimiser
    steps, epochs and training time."""
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
