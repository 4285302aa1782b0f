"""``course reproduce``: retrain from scratch and write the measured results.

``course reproduce bottleneck`` trains every translator of lessons 02-05 (no attention,
Bahdanau, Luong dot/general/concat, Luong local-p) on the same generated corpus, each from
scratch with the same seed and the same time budget (5 minutes in the full profile), and writes
``results/bottleneck.json`` and ``results/bottleneck.png``: test-split BLEU overall and per
source-length bucket, alignment accuracy against the gold word alignments, parameters and wall
time. ``--model NAME`` trains one model and writes ``results/bottleneck-NAME.json`` in the same
shape. Lessons 03-05 call the same functions.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from course_lib.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from course_lib.data.corpus import Corpus, CorpusConfig, load_corpus
from course_lib.device import get_device
from course_lib.profile import by_profile, get_profile
from course_lib.seeding import seed_everything
from course_lib.syllabus import COURSE_ROOT
from course_lib.training import History
from course_lib.translation import (
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

BOTTLENECK_MODELS = HEADLINE_MODELS
DEFAULT_SEED = 0
MODEL_CACHE = COURSE_ROOT / ".cache" / "models"


@dataclass
class BottleneckSettings:
    corpus_size: int
    hidden_size: int
    embed_dim: int
    train: TrainSettings

    @classmethod
    def for_profile(cls, seed: int = DEFAULT_SEED) -> BottleneckSettings:
        return cls(
            corpus_size=by_profile(fast=400, full=20000),
            hidden_size=by_profile(fast=32, full=256),
            embed_dim=by_profile(fast=16, full=128),
            train=TrainSettings(batch_size=by_profile(fast=32, full=128), lr=3e-3,
                                budget_s=by_profile(fast=3.0, full=300.0), seed=seed),
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


def cache_file(stem: str, key: list, cache_dir: Path = MODEL_CACHE) -> Path:
    """``cache_dir/STEM-DIGEST.pt``, the digest covering ``key`` (JSON-able) and the torch
    version: a model trained under anything else gets another file."""
    text = json.dumps([*key, torch.__version__], sort_keys=True)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return Path(cache_dir) / f"{stem}-{digest}.pt"


def checkpoint_path(name: str, corpus: Corpus, settings: BottleneckSettings,
                    cache_dir: Path = MODEL_CACHE) -> Path:
    """Where the model trained with exactly these settings on exactly this corpus is kept."""
    return cache_file(f"bottleneck-{name}", [name, ATTENTION_MODELS.get(name),
                                             corpus.config.key(), asdict(settings)], cache_dir)


def translation_entry(scores: dict, model: torch.nn.Module, history, wall_s: float,
                      alignment: float | None = None) -> dict:
    """A translation model's JSON record (the same keys for every model of every command):
    test BLEU overall and by source length, alignment accuracy (None without attention), size,
    training time, epochs and final training loss."""
    return {
        "bleu": _rounded(scores["bleu"]),
        "bleu_by_length": {k: _rounded(v) for k, v in scores["bleu_by_length"].items()},
        "alignment_accuracy": _rounded(alignment, 4),
        "params": sum(p.numel() for p in model.parameters()),
        "wall_s": round(wall_s, 1),
        "epochs": len(history),
        "final_train_loss": round(history["train_loss"][-1], 4),
    }


def train_and_measure(name: str, corpus: Corpus, vocabs: Vocabs, settings: BottleneckSettings,
                      device: torch.device, progress: bool = True,
                      live_plot: bool | None = None, cache_dir: Path | None = None):
    """Train one model from scratch and measure it on the test split.

    With ``cache_dir``, the trained model, its measurements and its loss curve are saved there
    under :func:`checkpoint_path`. Returns ``(entry, model, history, hypotheses)``; ``entry``
    is the model's JSON record.
    """
    seed_everything(settings.train.seed)
    model = build_translator(name, vocabs, settings.hidden_size, settings.embed_dim)
    history, wall_s = train_translator(model, corpus, vocabs, settings.train, device,
                                       progress=progress, live_plot=live_plot)
    scores = evaluate_translator(model, corpus.test, vocabs)
    alignment = None if name == "none" else evaluate_alignment(model, corpus.test, vocabs)
    entry = translation_entry(scores, model, history, wall_s, alignment)
    if cache_dir is not None:
        save_checkpoint(checkpoint_path(name, corpus, settings, cache_dir), model, model.config,
                        extra={"entry": entry, "history": history.records,
                               "hypotheses": scores["hypotheses"]})
    return entry, model, history, scores["hypotheses"]


def load_measured(name: str, corpus: Corpus, settings: BottleneckSettings, device: torch.device,
                  cache_dir: Path = MODEL_CACHE):
    """The saved result of :func:`train_and_measure` with the same settings, or None."""
    path = checkpoint_path(name, corpus, settings, cache_dir)
    if not path.is_file():
        return None
    try:
        model, extra = load_checkpoint(path, translator_class(name))
    except CheckpointError as error:
        print(f"ignoring a stale checkpoint: {error}", file=sys.stderr)
        return None
    history = History(records=extra["history"])
    return extra["entry"], model.to(device), history, extra["hypotheses"]


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
        saved = load_measured(name, corpus, settings, device, cache_dir) \
            if reuse and cache_dir is not None else None
        if saved is not None:
            print(f"{name}: loaded the model trained with these settings from {cache_dir}")
        entry, model, history, hypotheses = saved or train_and_measure(
            name, corpus, vocabs, settings, device, progress=progress, live_plot=live_plot,
            cache_dir=cache_dir)
        entries[name] = entry
        run.models[name], run.histories[name], run.hypotheses[name] = model, history, hypotheses
    run.result.update({"models": entries, **run_metadata(seed, device, settings, corpus)})
    if out_dir is not None:
        stem = f"bottleneck-{models}" if isinstance(models, str) else "bottleneck"
        write_results(run.result, Path(out_dir), stem)
    return run


def run_metadata(seed: int, device: torch.device, settings, corpus: Corpus | None = None
                 ) -> dict:
    """What every ``course reproduce`` result records about its run: seed, profile, device,
    machine, the corpus size (for translation) and the settings (a dataclass)."""
    metadata = {
        "seed": seed,
        "profile": get_profile(),
        "device": str(device),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
    }
    if corpus is not None:
        metadata["corpus"] = {"size": corpus.config.size, "test_pairs": len(corpus.test)}
    metadata["settings"] = asdict(settings)
    return metadata


def write_json(result: dict, path: Path) -> Path:
    """Write ``result`` as indented JSON, atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(path)
    return path


def write_results(result: dict, out_dir: Path, stem: str) -> list[Path]:
    """``STEM.json`` (written atomically) and, for several models, ``STEM.png``."""
    written = [write_json(result, out_dir / f"{stem}.json")]
    if len(result["models"]) > 1:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        from course_lib.viz import plot_bleu_by_length

        ax = plot_bleu_by_length({n: e["bleu_by_length"] for n, e in result["models"].items()},
                                 title=f"Test BLEU by source length (seed {result['seed']})")
        ax.figure.tight_layout()
        ax.figure.savefig(out_dir / f"{stem}.png", dpi=120)
        plt.close(ax.figure)
        written.append(out_dir / f"{stem}.png")
    return written


def results_table(result: dict) -> str:
    """A Markdown table of a result dict: BLEU by length, overall, alignment, size, time."""
    buckets = list(next(iter(result["models"].values()))["bleu_by_length"])
    header = ["model", *buckets, "overall", "alignment", "params", "train s", "epochs"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]

    def number(value, fmt="{:.1f}"):
        return "-" if value is None else fmt.format(value)

    for name, e in result["models"].items():
        cells = [name, *(number(e["bleu_by_length"][b]) for b in buckets), number(e["bleu"]),
                 number(e["alignment_accuracy"], "{:.1%}"), f"{e['params']:,}",
                 f"{e['wall_s']:.0f}", str(e["epochs"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def reproduce_cli(args) -> int:
    if args.experiment == "transformer":
        from course_lib.transformer_experiment import transformer_cli

        if args.model is not None or args.dataset is not None:
            print("course reproduce transformer takes neither --model nor --dataset",
                  file=sys.stderr)
            return 2
        return transformer_cli(args)
    if args.experiment == "captioning":
        from course_lib.caption_experiment import captioning_cli

        if args.model is not None:
            print("course reproduce captioning: --model is for bottleneck; use --dataset",
                  file=sys.stderr)
            return 2
        return captioning_cli(args)
    if args.dataset is not None:
        print("course reproduce bottleneck: --dataset is for captioning; use --model",
              file=sys.stderr)
        return 2
    if args.model is not None and args.model not in TRANSLATORS:
        print(f"course reproduce: unknown model {args.model!r}; available: "
              f"{', '.join(TRANSLATORS)}", file=sys.stderr)
        return 2
    out_dir = Path(args.out_dir) if args.out_dir else COURSE_ROOT / "results"
    models = args.model if args.model else BOTTLENECK_MODELS
    run = reproduce_bottleneck(models, seed=args.seed, out_dir=out_dir)
    print(run.table())
    stem = f"bottleneck-{args.model}" if args.model else "bottleneck"
    print(f"wrote {out_dir / (stem + '.json')}")
    return 0
