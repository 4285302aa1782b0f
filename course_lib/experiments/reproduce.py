"""``course reproduce``: every experiment by name, ``course reproduce all``, and the command line.

Each experiment trains for a fixed number of optimiser steps, so its numbers depend on the seed,
the torch build and the thread count, never on how fast the machine is. The time a run takes is
estimated up front from its steps and :data:`STEP_SECONDS`, the cost of one step on one thread
of a 2-core laptop CPU (the course's reference machine); the estimate only informs, it decides
nothing.

``course reproduce all`` runs every experiment for every documented seed (``--seeds`` for
others), ``--jobs N`` models at a time, loads models already saved in ``.cache/models/`` with
the same settings, writes ``results/seed-N/*.json`` and regenerates ``docs/results.md``
(:mod:`course_lib.experiments.results_page`).
"""

from __future__ import annotations

import re
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path

from tqdm.auto import tqdm

from course_lib.data.captions import DATASETS
from course_lib.experiments.bottleneck import (
    BOTTLENECK_MODELS,
    BottleneckSettings,
    reproduce_bottleneck,
    results_table,
)
from course_lib.experiments.captioning import (
    CaptioningSettings,
    captioning_table,
    reproduce_captioning,
)
from course_lib.experiments.results_page import EXPERIMENTS, write_results_page
from course_lib.experiments.runs import DEFAULT_SEED, RESULTS_DIR, seed_dir
from course_lib.experiments.transformer import (
    TransformerSettings,
    reproduce_transformer,
    transformer_table,
)
from course_lib.experiments.translation import TRANSLATORS
from course_lib.paths import COURSE_ROOT
from course_lib.profile import get_profile

RESULTS_PAGE = COURSE_ROOT / "docs" / "results.md"
README = COURSE_ROOT / "README.md"  # its headline table is updated with the page
# The seeds docs/results.md reports: what `course reproduce all` runs unless told otherwise.
DOCUMENTED_SEEDS = range(5)
# Seconds of one training step on one torch thread of a 2-core laptop CPU (two runs side by side,
# as `course reproduce all --jobs 2`), and the seconds of evaluation after training, per model:
# used only to estimate how long a run will take.
STEP_SECONDS = {"none": 0.36, "none-init": 0.32, "none-every-step": 0.3,
                "none-first-step": 0.3, "none-128": 0.1, "none-512": 0.8, "none-1024": 2.7,
                "bahdanau": 0.65,
                "luong-dot": 0.45, "luong-general": 0.55, "luong-concat": 0.65,
                "luong-local": 0.5, "luong-local-m": 0.5, "luong-general-no-feeding": 0.5,
                "transformer": 0.28, "digits": 0.17, "shapes": 0.2}
EVALUATION_SECONDS = {"bottleneck": 30.0, "captioning": 15.0, "transformer": 150.0}


def planned_runs(experiment: str, only: str | None = None, seed: int = 0
                 ) -> list[tuple[str, int]]:
    """``(model, steps)`` for every model the experiment trains (``only``: just that one),
    with the step budgets of the active profile."""
    if experiment == "bottleneck":
        steps = BottleneckSettings.for_profile(seed).train.steps
        return [(name, steps) for name in ((only,) if only else BOTTLENECK_MODELS)]
    if experiment == "captioning":
        settings = CaptioningSettings.for_profile(seed)
        names = (only,) if only else DATASETS
        return [(name, settings.for_dataset(name).steps) for name in names]
    if experiment == "transformer":
        return [("transformer", TransformerSettings.for_profile(seed).steps)]
    raise ValueError(f"unknown experiment {experiment!r}; available: {', '.join(EXPERIMENTS)}")


def estimate_seconds(experiment: str, only: str | None = None, seed: int = 0) -> float:
    """About how long ``course reproduce EXPERIMENT`` takes on a 2-core laptop CPU: steps
    times :data:`STEP_SECONDS`, plus evaluation (the fast profile's tiny models: a guess of
    a few seconds each)."""
    if get_profile() != "full":
        return sum(0.02 * steps + 3.0 for _, steps in planned_runs(experiment, only, seed))
    return sum(steps * STEP_SECONDS[model] + EVALUATION_SECONDS[experiment]
               for model, steps in planned_runs(experiment, only, seed))


def budget_text(experiment: str, only: str | None = None) -> str:
    """"N optimiser steps, about M minutes on a 2-core laptop CPU" for lessons and messages."""
    runs = planned_runs(experiment, only)
    steps = sorted({s for _, s in runs})
    if get_profile() != "full":
        return f"{' / '.join(map(str, steps))} optimiser steps, a few seconds in the fast profile"
    minutes = max(1, round(estimate_seconds(experiment, only) / 60))
    each = " each" if len(runs) > 1 and len(steps) == 1 else ""
    return (f"{' / '.join(f'{s:,}' for s in steps)} optimiser steps{each}, about {minutes} "
            f"minute{'s' if minutes != 1 else ''} on a 2-core laptop CPU")


def parse_seeds(text: str) -> list[int]:
    """``"0-4"`` → [0, 1, 2, 3, 4]; ``"0,2,5"`` → [0, 2, 5]."""
    seeds: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not match:
            raise ValueError(f"seeds must look like 0-4 or 0,2,5; got {text!r}")
        low, high = int(match.group(1)), int(match.group(2) or match.group(1))
        if high < low:
            raise ValueError(f"empty seed range {part.strip()!r}")
        seeds += [s for s in range(low, high + 1) if s not in seeds]
    return seeds


def run_experiment(experiment: str, seed: int, out_dir: Path, only: str | None = None,
                   max_minutes: float | None = None, threads: int | None = None,
                   reuse: bool = False, progress: bool = True) -> tuple[dict, str]:
    """Run one experiment for one seed into ``out_dir``; returns its result and table."""
    if experiment == "bottleneck":
        settings = BottleneckSettings.for_profile(seed)
        settings = replace(settings, train=replace(settings.train, max_minutes=max_minutes),
                           threads=threads or settings.threads)
        run = reproduce_bottleneck(only or BOTTLENECK_MODELS, seed=seed, out_dir=out_dir,
                                   settings=settings, reuse=reuse, progress=progress)
        return run.result, results_table(run.result)
    if experiment == "captioning":
        settings = CaptioningSettings.for_profile(seed)
        settings = replace(settings, max_minutes=max_minutes, threads=threads or settings.threads)
        run = reproduce_captioning(only or DATASETS, seed=seed, out_dir=out_dir,
                                   settings=settings, reuse=reuse, progress=progress)
        return run.result, captioning_table(run.result)
    settings = TransformerSettings.for_profile(seed)
    settings = replace(settings, max_minutes=max_minutes, threads=threads or settings.threads)
    run = reproduce_transformer(seed=seed, out_dir=out_dir, settings=settings, reuse=reuse,
                                progress=progress)
    return run.result, transformer_table(run.result)


def cut_short(result: dict) -> list[str]:
    """Names of the models in ``result`` whose training a ``max_minutes`` limit ended early."""
    entries = result.get("models", result)
    return [name for name, entry in entries.items()
            if isinstance(entry, dict) and entry.get("cut_short")]


def warn_if_cut_short(result: dict, max_minutes: float | None) -> None:
    names = cut_short(result)
    if names:
        print(f"NOTE: --max-minutes {max_minutes:g} stopped the training of {', '.join(names)} "
              "before its step budget. These models are not the documented ones: their numbers "
              "will differ from docs/results.md.", file=sys.stderr)


def _train_one(experiment: str, name: str, seed: int, out_dir: Path,
               max_minutes: float | None, threads: int | None) -> tuple[str, str, int, list[str]]:
    """One model of one seed (loaded instead when saved with the same settings): a job of
    :func:`reproduce_all`, run in the calling process or in a worker process."""
    result, _ = run_experiment(experiment, seed, out_dir, only=name, max_minutes=max_minutes,
                               threads=threads, reuse=True, progress=False)
    return experiment, name, seed, cut_short(result)


def reproduce_all(seeds: list[int], results_dir: Path = RESULTS_DIR,
                  page: Path | None = RESULTS_PAGE, max_minutes: float | None = None,
                  threads: int | None = None, jobs: int = 1) -> Path | None:
    """Every experiment for every seed, then the results page.

    Each model of each seed is one job; ``jobs`` of them train side by side in worker
    processes, each on its own thread count, so the numbers are the same as one after the other.
    Models saved with the same settings are loaded, not trained. The Transformer jobs come
    after the translators (lesson 10 compares it with the seed's Bahdanau model), and last each
    experiment's files for the seed are written from the saved models. A bar over all jobs
    shows the estimated time left."""
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    phases = [[(experiment, name, seed, steps) for seed in seeds
               for experiment in ("bottleneck", "captioning")
               for name, steps in planned_runs(experiment, seed=seed)],
              [("transformer", None, seed, planned_runs("transformer", seed=seed)[0][1])
               for seed in seeds]]
    estimate = {(e, n, s): estimate_seconds(e, n, s) for phase in phases for e, n, s, _ in phase}
    total = sum(estimate.values())
    print(f"course reproduce all: {sum(map(len, phases))} models ({len(seeds)} seeds × "
          f"{len(EXPERIMENTS)} experiments), about {total / 3600:.1f} hours of one core of a "
          f"laptop CPU{f', {jobs} at a time' if jobs > 1 else ''}; models already saved are "
          "loaded instead.", flush=True)
    bar = tqdm(total=round(total), unit="s", desc="all experiments",
               bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} estimated s [{elapsed}<{remaining}]")
    noted = []

    def done(experiment: str, name: str | None, seed: int, stopped: list[str]) -> None:
        bar.update(round(estimate[experiment, name, seed]))
        bar.set_postfix_str(f"{experiment} {name or ''} seed {seed} done")
        noted.extend(stopped)

    pool = None if jobs == 1 else ProcessPoolExecutor(jobs, mp_context=get_context("spawn"))
    try:
        for phase in phases:
            arguments = [(e, n, s, seed_dir(s, results_dir), max_minutes, threads)
                         for e, n, s, _ in phase]
            if pool is None:
                for args in arguments:
                    done(*_train_one(*args))
            else:
                for future in as_completed([pool.submit(_train_one, *a) for a in arguments]):
                    done(*future.result())
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        bar.close()
    for seed in seeds:  # every model is saved by now: this only measures and writes
        for experiment in ("bottleneck", "captioning"):
            run_experiment(experiment, seed, seed_dir(seed, results_dir), max_minutes=max_minutes,
                           threads=threads, reuse=True, progress=False)
    if noted:
        warn_if_cut_short({name: {"cut_short": True} for name in noted}, max_minutes)
    if page is None:
        return None
    return write_results_page(results_dir, page, get_profile(),
                              readme=README if page == RESULTS_PAGE else None)


def reproduce_cli(args) -> int:
    """``course reproduce EXPERIMENT [--model|--dataset] [--seed N | --seeds A-B] ...``."""
    if args.model is not None and args.experiment != "bottleneck":
        print(f"course reproduce {args.experiment}: --model is for bottleneck"
              + ("; use --dataset" if args.experiment == "captioning" else ""), file=sys.stderr)
        return 2
    if args.dataset is not None and args.experiment != "captioning":
        print(f"course reproduce {args.experiment}: --dataset is for captioning"
              + ("; use --model" if args.experiment == "bottleneck" else ""), file=sys.stderr)
        return 2
    if args.model is not None and args.model not in TRANSLATORS:
        print(f"course reproduce: unknown model {args.model!r}; available: "
              f"{', '.join(TRANSLATORS)}", file=sys.stderr)
        return 2
    if args.dataset is not None and args.dataset not in DATASETS:
        print(f"course reproduce: unknown data set {args.dataset!r}; available: "
              f"{', '.join(DATASETS)}", file=sys.stderr)
        return 2
    if args.jobs < 1 or (args.jobs > 1 and args.experiment != "all"):
        print(f"course reproduce: --jobs is for all and must be at least 1, got {args.jobs}",
              file=sys.stderr)
        return 2
    if args.max_minutes is not None and args.max_minutes <= 0:
        print(f"course reproduce: --max-minutes must be positive, got {args.max_minutes}",
              file=sys.stderr)
        return 2
    try:
        if args.seeds and args.seed is not None:
            raise ValueError("give --seed or --seeds, not both")
        if args.seeds:
            seeds = parse_seeds(args.seeds)
        elif args.seed is not None:
            seeds = [args.seed]
        else:
            seeds = list(DOCUMENTED_SEEDS) if args.experiment == "all" else [DEFAULT_SEED]
    except ValueError as error:
        print(f"course reproduce: {error}", file=sys.stderr)
        return 2
    results_dir = Path(args.out_dir) if args.out_dir else RESULTS_DIR
    if args.experiment == "all":
        page = None if args.no_page else (Path(args.page) if args.page else RESULTS_PAGE)
        written = reproduce_all(seeds, results_dir, page, args.max_minutes, args.threads,
                                args.jobs)
        if written is not None:
            print(f"wrote {written}")
        return 0
    only = args.model or args.dataset
    for seed in seeds:
        print(f"course reproduce {args.experiment}, seed {seed}: "
              f"{budget_text(args.experiment, only)}.", file=sys.stderr)
        out_dir = seed_dir(seed, results_dir)
        result, table = run_experiment(args.experiment, seed, out_dir, only, args.max_minutes,
                                       args.threads)
        print(table)
        warn_if_cut_short(result, args.max_minutes)
        print(f"wrote results to {out_dir}")
    return 0


def results_cli(args) -> int:
    """``course results``: regenerate the results page from the JSON already written."""
    results_dir = Path(args.results_dir) if args.results_dir else RESULTS_DIR
    page = Path(args.page) if args.page else RESULTS_PAGE
    readme = README if page == RESULTS_PAGE else None
    print(f"wrote {write_results_page(results_dir, page, readme=readme)}")
    return 0
