"""``course reproduce``: retrain from scratch and write the measured results.

``course reproduce bottleneck --model none`` trains the encoder-decoder without attention on the
generated corpus for a fixed time budget (5 minutes in the full profile) and writes
``results/bottleneck-none.json``: BLEU overall and per source-length bucket on the test split,
parameters and wall time. Lesson 03 calls the same function.
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from course_lib.data.corpus import Corpus, CorpusConfig, load_corpus
from course_lib.device import get_device
from course_lib.profile import by_profile, get_profile
from course_lib.seeding import seed_everything
from course_lib.syllabus import COURSE_ROOT
from course_lib.training import History
from course_lib.translation import (
    TrainSettings,
    Vocabs,
    build_vocabs,
    evaluate_translator,
    no_attention_model,
    train_translator,
)

BOTTLENECK_MODELS = ("none",)  # attention models arrive with lessons 04-05
DEFAULT_SEED = 0


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
    """``result`` is what the JSON file holds; the rest is for lessons to look into."""

    result: dict
    model: torch.nn.Module
    vocabs: Vocabs
    history: History
    corpus: Corpus
    hypotheses: list[str]


def reproduce_bottleneck(model: str = "none", seed: int = DEFAULT_SEED,
                         out_dir: Path | None = None, settings: BottleneckSettings | None = None,
                         progress: bool = True, live_plot: bool | None = None) -> BottleneckRun:
    """Train ``model`` from scratch with ``seed`` (data and initialisation) and evaluate it on
    the test split; with ``out_dir``, also write ``bottleneck-<model>.json`` there."""
    if model not in BOTTLENECK_MODELS:
        raise ValueError(f"unknown model {model!r}; available: {', '.join(BOTTLENECK_MODELS)}")
    settings = settings or BottleneckSettings.for_profile(seed)
    corpus = load_corpus(CorpusConfig(size=settings.corpus_size, seed=seed))
    vocabs = build_vocabs(corpus)
    seed_everything(seed)
    translator = no_attention_model(vocabs, settings.hidden_size, settings.embed_dim)
    device = get_device()
    history, wall_s = train_translator(translator, corpus, vocabs, settings.train, device,
                                       progress=progress, live_plot=live_plot)
    scores = evaluate_translator(translator, corpus.test, vocabs)
    entry = {
        "bleu": round(scores["bleu"], 2),
        "bleu_by_length": {k: (round(v, 2) if v is not None else None)
                           for k, v in scores["bleu_by_length"].items()},
        "alignment_accuracy": None,  # no attention, nothing to align
        "params": sum(p.numel() for p in translator.parameters()),
        "wall_s": round(wall_s, 1),
        "epochs": len(history),
        "final_train_loss": round(history["train_loss"][-1], 4),
    }
    result = {
        "models": {model: entry},
        "seed": seed,
        "profile": get_profile(),
        "device": str(device),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
        "corpus": {"size": settings.corpus_size, "test_pairs": len(corpus.test)},
        "settings": asdict(settings),
    }
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"bottleneck-{model}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=2) + "\n")
        tmp.replace(path)
    return BottleneckRun(result, translator, vocabs, history, corpus, scores["hypotheses"])


def reproduce_cli(args) -> int:
    out_dir = Path(args.out_dir) if args.out_dir else COURSE_ROOT / "results"
    run = reproduce_bottleneck(args.model, seed=args.seed, out_dir=out_dir)
    entry = run.result["models"][args.model]
    print(f"{args.model}: BLEU {entry['bleu']:.1f}; by source length "
          + ", ".join(f"{k}: {v:.1f}" if v is not None else f"{k}: -"
                      for k, v in entry["bleu_by_length"].items())
          + f"; {entry['params']:,} parameters; {entry['wall_s']:.0f} s of training "
          f"({entry['epochs']} epochs)")
    print(f"wrote {out_dir / f'bottleneck-{args.model}.json'}")
    return 0
