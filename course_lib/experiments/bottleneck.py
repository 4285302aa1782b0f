"""``course reproduce bottleneck``: retrain the translators of lessons 02-05 and write the
measured results.

It trains every translator of lessons 02-05 (no attention, Bahdanau, Luong
dot/general/concat, Luong local-p) on the same generated corpus, each from scratch with the
same seed for the same number of optimiser steps
(:data:`~course_lib.experiments.translation.BOTTLENECK_STEPS`), and writes
``results/seed-N/bottleneck.json`` and ``bottleneck.png``: test-split BLEU overall and per
source-length bucket, alignment accuracy against the gold word alignments, parameters, steps
and training time. ``--model NAME`` trains one model and writes ``bottleneck-NAME.json`` in the
same shape. Lessons 03-05 call the same functions. Each translator's settings
(:class:`~course_lib.experiments.translation.BottleneckSettings`) are in
:mod:`course_lib.experiments.translation`, where the Transformer experiment reads them too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from course_lib.data.corpus import Corpus, CorpusConfig, load_corpus
from course_lib.device import get_device
from course_lib.experiments.registry import Experiment
from course_lib.experiments.runs import (
    DEFAULT_SEED,
    RunOptions,
    run_metadata,
    save_figure,
    train_or_load,
    write_json,
)
from course_lib.experiments.shipped import reference_loader
from course_lib.experiments.targets import Target, bleu_of, constant, record_value, times
from course_lib.experiments.translation import (
    HEADLINE_MODELS,
    TRANSLATORS,
    BottleneckSettings,
    TranslatorConfig,
    Vocabs,
    bottleneck_training,
    build_vocabs,
    checkpoint_path,
    corpus_size,
    evaluate_alignment,
    evaluate_translator,
    results_table,
    train_translator,
    translation_entry,
    translation_metrics,
    translator_class,
    translator_from_config,
)
from course_lib.models.seq2seq import Seq2Seq
from course_lib.seeding import fixed_threads, seed_everything
from course_lib.train.history import History
from course_lib.viz import plot_bleu_by_length

BOTTLENECK_MODELS = HEADLINE_MODELS


@dataclass
class BottleneckRun:
    """``result`` is what the JSON file holds; the rest is for lessons to look into.

    ``models``, ``settings``, ``histories`` and ``hypotheses`` are keyed by model name.
    """

    result: dict
    models: dict[str, torch.nn.Module]
    settings: dict[str, BottleneckSettings]
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


def _train_and_measure(name: str, corpus: Corpus, vocabs: Vocabs,
                       settings: BottleneckSettings, device: torch.device, options: RunOptions,
                       resume_path: Path | None = None) -> tuple[torch.nn.Module, dict]:
    """Train one model from scratch on ``settings.threads`` threads and measure it on the test
    split. Returns the model and its record: ``entry`` (the JSON record), ``history`` and
    ``hypotheses``."""
    with fixed_threads(settings.threads):
        seed_everything(settings.seed)
        model = translator_from_config(settings.model)
        history, wall_s = train_translator(model, corpus, vocabs, settings.train, device,
                                           seed=settings.seed, progress=options.progress,
                                           live_plot=options.live_plot, resume_path=resume_path)
        scores = evaluate_translator(model, corpus.test, vocabs)
        alignment = None if translator_class(name) is Seq2Seq else \
            evaluate_alignment(model, corpus.test, vocabs)
    entry = translation_entry(scores, model, history, wall_s, alignment)
    return model, {"entry": entry, "history": history.records,
                   "hypotheses": scores["hypotheses"]}


def bottleneck_config(name: str, seed: int = DEFAULT_SEED) -> TranslatorConfig:
    """The config of the model ``name`` that :func:`reproduce_bottleneck` trains with ``seed``
    (vocabulary sizes from its corpus), without training it: what a lesson draws first."""
    return BottleneckSettings.build(name, seed).model


def reproduce_bottleneck(models: str | tuple[str, ...] | list[str] = BOTTLENECK_MODELS,
                         seed: int = DEFAULT_SEED, out_dir: Path | None = None, *,
                         options: RunOptions | None = None,
                         width: tuple[int, int] | None = None, **switches) -> BottleneckRun:
    """Train each of ``models`` from scratch with ``seed`` (corpus, initialisation and batch
    order) on the same corpus and budget, and evaluate them on the test split.

    ``options`` are the run's switches (:class:`~course_lib.experiments.runs.RunOptions`: step
    budget, safety valve, threads, progress, live plot, model cache, reuse, shipped models), and
    each of them may be given as a keyword instead (``reuse=True``, ``steps=200``); ``width`` =
    (hidden size, embedding size) replaces the models' widths (a lesson trains small models live
    this way). Every other setting is the experiment's (:class:`BottleneckSettings`). With
    ``out_dir``, writes ``bottleneck.json`` and ``bottleneck.png`` for several models, or
    ``bottleneck-NAME.json`` for one (:meth:`Experiment.result_stem`). Each model's record
    holds its settings.
    """
    options = RunOptions.of(options, **switches)
    names = (models,) if isinstance(models, str) else tuple(models)
    unknown = [n for n in names if n not in TRANSLATORS]
    if unknown or not names:
        raise ValueError(f"unknown model {unknown[0] if unknown else None!r}; available: "
                         f"{', '.join(TRANSLATORS)}")
    corpus = load_corpus(CorpusConfig(size=corpus_size(), seed=seed))
    vocabs = build_vocabs(corpus)
    device = get_device()
    run = BottleneckRun({}, {}, {}, {}, {}, corpus, vocabs)
    entries = {}
    for name in names:
        settings = BottleneckSettings.build(name, seed, vocabs, steps=options.steps,
                                            max_minutes=options.max_minutes,
                                            threads=options.torch_threads, width=width)
        path = None if options.cache_dir is None else \
            checkpoint_path(name, settings, options.cache_dir)
        model, extra = train_or_load(
            path, translator_class(name), device, reuse=options.reuse, label=name,
            train=lambda resume, name=name, settings=settings: _train_and_measure(
                name, corpus, vocabs, settings, device, options, resume),
            reference=reference_loader("bottleneck", name, settings, translator_class(name),
                                       device) if options.use_shipped else None)
        entries[name] = {**extra["entry"], "settings": asdict(settings)}
        run.models[name], run.settings[name] = model, settings
        run.hypotheses[name] = extra["hypotheses"]
        run.histories[name] = History(records=extra["history"])
    run.result.update({"models": entries,
                       **run_metadata(seed, device, options.torch_threads, corpus)})
    if out_dir is not None:
        write_results(run.result, Path(out_dir), EXPERIMENT.result_stem(names))
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


EXPERIMENT = Experiment(
    name="bottleneck",
    summary="retrain the translators of lessons 02-05, write results/seed-N/bottleneck.json",
    models=TRANSLATORS,
    default_models=BOTTLENECK_MODELS,
    settings=lambda name, seed: BottleneckSettings.build(name, seed),
    steps=lambda name: bottleneck_training().steps,
    reproduce=reproduce_bottleneck,
    # Seconds of one training step on one torch thread of the reference machine (two runs side
    # by side, as `course reproduce all --jobs 2`), and of the evaluation after training.
    step_seconds={"none": 0.36, "none-init": 0.32, "none-every-step": 0.3,
                  "none-first-step": 0.3, "none-128": 0.1, "none-512": 0.8, "none-1024": 2.7,
                  "bahdanau": 0.65, "luong-dot": 0.45, "luong-general": 0.55,
                  "luong-concat": 0.65, "luong-local": 0.5, "luong-local-m": 0.5,
                  "luong-general-no-feeding": 0.5},
    evaluation_seconds=30.0,
    metrics=translation_metrics,
    targets=(
        Target("no attention: BLEU on 1-10 words", bleu_of("bottleneck", "none", "1-10"),
               constant(85.0), "≥ 85"),
        Target("no attention: BLEU on 31+ words", bleu_of("bottleneck", "none", "31+"),
               times(0.5, bleu_of("bottleneck", "none", "1-10")), "≤ 0.5 × its 1-10",
               at_most=True),
        Target("Bahdanau: BLEU overall", bleu_of("bottleneck", "bahdanau"), constant(95.0),
               "≥ 95"),
        Target("Bahdanau: BLEU on 31+ words", bleu_of("bottleneck", "bahdanau", "31+"),
               times(0.95, bleu_of("bottleneck", "bahdanau", "1-10")), "≥ 0.95 × its 1-10"),
        Target("Bahdanau: BLEU on 31+ words vs no attention",
               bleu_of("bottleneck", "bahdanau", "31+"),
               times(2.5, bleu_of("bottleneck", "none", "31+")), "≥ 2.5 × no attention's 31+"),
        Target("Bahdanau: alignment accuracy",
               record_value("bottleneck", "bahdanau", "alignment_accuracy"), constant(0.9),
               "≥ 0.9"),
        Target("Luong general: alignment accuracy",
               record_value("bottleneck", "luong-general", "alignment_accuracy"),
               constant(0.9), "≥ 0.9"),
    ),
    family="translation",
    headline={"none": "GRU encoder–decoder, no attention",
              "bahdanau": "Bahdanau (additive) attention",
              "luong-general": "Luong (general) attention"},
    checkpoint=checkpoint_path,
)
