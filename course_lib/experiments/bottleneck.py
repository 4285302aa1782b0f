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

from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from course_lib.arguments import check_positive_int
from course_lib.data.corpus import Corpus, CorpusConfig, load_corpus
from course_lib.device import get_device
from course_lib.experiments.registry import Experiment
from course_lib.experiments.runs import (
    DEFAULT_SEED,
    MODEL_CACHE,
    cache_file,
    load_saved,
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
    TrainSettings,
    TranslatorConfig,
    Vocabs,
    build_vocabs,
    evaluate_alignment,
    evaluate_translator,
    train_translator,
    translation_metrics,
    translator_class,
    translator_config,
    translator_from_config,
)
from course_lib.models import count_parameters
from course_lib.models.seq2seq import Seq2Seq
from course_lib.profile import by_profile
from course_lib.seeding import REPRODUCE_THREADS, fixed_threads, seed_everything
from course_lib.train.history import History
from course_lib.viz import plot_bleu_by_length

BOTTLENECK_MODELS = HEADLINE_MODELS
# Optimiser steps per translator in the full profile: 8 epochs of the 16,000 training pairs in
# batches of 128, the same for every model, so every model sees the same batches in the same order.
BOTTLENECK_STEPS = 1000


def bottleneck_training() -> TrainSettings:
    """The training settings every translator of the experiment shares, in the active profile."""
    return TrainSettings(batch_size=by_profile(fast=32, full=128), lr=3e-3,
                         steps=by_profile(fast=20, full=BOTTLENECK_STEPS))


def corpus_size() -> int:
    """Sentence pairs of the experiment's corpus in the active profile."""
    return by_profile(fast=400, full=20000)


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
    """Everything that decides one translator of the experiment: the seed (the corpus, the
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
    def build(cls, name: str, seed: int = DEFAULT_SEED, vocabs: Vocabs | None = None,
              train: TrainSettings | None = None, threads: int = REPRODUCE_THREADS,
              width: tuple[int, int] | None = None) -> BottleneckSettings:
        """The settings of model ``name`` with ``seed`` in the active profile; ``vocabs`` (from
        the corpus of that seed, built when not given) set the model's vocabulary sizes.
        ``width`` = (hidden size, embedding size) replaces the experiment's."""
        translator_class(name)  # an unknown name fails here, naming the choices
        size = corpus_size()
        vocabs = vocabs or build_vocabs(load_corpus(CorpusConfig(size=size, seed=seed)))
        hidden, embed = (by_profile(fast=32, full=256), by_profile(fast=16, full=128)) \
            if width is None else check_width(width)
        model = translator_config(name, vocabs, hidden_size=hidden, embed_dim=embed)
        return cls(seed, size, model, train or bottleneck_training(), threads)


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


def _rounded(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def checkpoint_path(name: str, settings: BottleneckSettings, cache_dir: Path = MODEL_CACHE
                    ) -> Path:
    """Where the model trained with exactly these settings is kept."""
    return cache_file(f"bottleneck-{name}", [name, settings.corpus.key(), asdict(settings)],
                      cache_dir)


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
                       live_plot: bool | None, resume_path: Path | None = None
                       ) -> tuple[torch.nn.Module, dict]:
    """Train one model from scratch on ``settings.threads`` threads and measure it on the test
    split. Returns the model and its record: ``entry`` (the JSON record), ``history`` and
    ``hypotheses``."""
    with fixed_threads(settings.threads):
        seed_everything(settings.seed)
        model = translator_from_config(settings.model)
        history, wall_s = train_translator(model, corpus, vocabs, settings.train, device,
                                           seed=settings.seed, progress=progress,
                                           live_plot=live_plot, resume_path=resume_path)
        scores = evaluate_translator(model, corpus.test, vocabs)
        alignment = None if translator_class(name) is Seq2Seq else \
            evaluate_alignment(model, corpus.test, vocabs)
    entry = translation_entry(scores, model, history, wall_s, alignment)
    return model, {"entry": entry, "history": history.records,
                   "hypotheses": scores["hypotheses"]}


def load_measured(name: str, settings: BottleneckSettings, device: torch.device,
                  cache_dir: Path = MODEL_CACHE):
    """The saved model of :func:`reproduce_bottleneck` with these settings, as
    ``(entry, model, history, hypotheses)``, or None."""
    saved = load_saved(checkpoint_path(name, settings, cache_dir), translator_class(name),
                       device)
    if saved is None:
        return None
    model, extra = saved
    return extra["entry"], model, History(records=extra["history"]), extra["hypotheses"]


def bottleneck_config(name: str, seed: int = DEFAULT_SEED) -> TranslatorConfig:
    """The config of the model ``name`` that :func:`reproduce_bottleneck` trains with ``seed``
    (vocabulary sizes from its corpus), without training it: what a lesson draws first."""
    return BottleneckSettings.build(name, seed).model


def reproduce_bottleneck(models: str | tuple[str, ...] | list[str] = BOTTLENECK_MODELS,
                         seed: int = DEFAULT_SEED, out_dir: Path | None = None, *,
                         steps: int | None = None, max_minutes: float | None = None,
                         threads: int | None = None, progress: bool = True,
                         live_plot: bool | None = None, reuse: bool = False,
                         use_shipped: bool = False, cache_dir: Path | None = MODEL_CACHE,
                         width: tuple[int, int] | None = None) -> BottleneckRun:
    """Train each of ``models`` from scratch with ``seed`` (corpus, initialisation and batch
    order) on the same corpus and budget, and evaluate them on the test split.

    ``steps`` replaces the profile's step budget, ``width`` = (hidden size, embedding size) the
    models' widths (a lesson trains small models live this way), ``max_minutes`` adds a safety
    valve on training time and ``threads`` sets the torch threads (default 1); every other
    setting is the experiment's (:class:`BottleneckSettings`). Every trained model is saved in
    ``cache_dir`` (None: not saved). With ``reuse=True`` a model already saved there with
    exactly these settings is loaded instead of retrained (lessons do this; ``course reproduce``
    never does). With ``use_shipped``, a model the course ships for these settings
    (:mod:`course_lib.experiments.shipped`) is loaded rather than trained.
    With ``out_dir``, write ``bottleneck-NAME.json`` for a single model given by name, or
    ``bottleneck.json`` and ``bottleneck.png`` for several. Each model's record holds its
    settings.
    """
    names = (models,) if isinstance(models, str) else tuple(models)
    unknown = [n for n in names if n not in TRANSLATORS]
    if unknown or not names:
        raise ValueError(f"unknown model {unknown[0] if unknown else None!r}; available: "
                         f"{', '.join(TRANSLATORS)}")
    train = bottleneck_training()
    train = replace(train, steps=steps or train.steps, max_minutes=max_minutes)
    corpus = load_corpus(CorpusConfig(size=corpus_size(), seed=seed))
    vocabs = build_vocabs(corpus)
    device = get_device()
    run = BottleneckRun({}, {}, {}, {}, {}, corpus, vocabs)
    entries = {}
    for name in names:
        settings = BottleneckSettings.build(name, seed, vocabs, train,
                                            threads or REPRODUCE_THREADS, width)
        path = None if cache_dir is None else checkpoint_path(name, settings, cache_dir)
        model, extra = train_or_load(
            path, translator_class(name), device, reuse=reuse and cache_dir is not None,
            label=name, train=lambda resume, name=name, settings=settings: _train_and_measure(
                name, corpus, vocabs, settings, device, progress, live_plot, resume),
            reference=reference_loader("bottleneck", name, settings, translator_class(name),
                                       device) if use_shipped else None)
        entries[name] = {**extra["entry"], "settings": asdict(settings)}
        run.models[name], run.settings[name] = model, settings
        run.hypotheses[name] = extra["hypotheses"]
        run.histories[name] = History(records=extra["history"])
    run.result.update({"models": entries,
                       **run_metadata(seed, device, threads or REPRODUCE_THREADS, corpus)})
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
