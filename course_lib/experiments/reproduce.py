"""``course reproduce``: every experiment of the registry by name, ``course reproduce all``, and
the command line.

Each experiment trains for a fixed number of optimiser steps, so its numbers depend on the seed,
the torch build and the thread count, never on how fast the machine is. The time a run takes is
estimated up front from its steps and each experiment's ``step_seconds``, the cost of one step on
one thread of the machine ``docs/results.md`` names; the estimate only informs, it decides
nothing.

``course reproduce all`` runs every experiment of the registry
(:mod:`course_lib.experiments.catalogue`) for every documented seed (``--seeds`` for others),
``--jobs N`` models at a time, loads models already saved in ``.cache/models/`` with the same
settings, writes ``results/seed-N/*.json`` and regenerates ``docs/results.md``
(:mod:`course_lib.experiments.results_page`).
"""

from __future__ import annotations

import re
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

from tqdm.auto import tqdm

from course_lib.experiments.catalogue import REGISTRY, measured_training
from course_lib.experiments.registry import Experiment, Registry
from course_lib.experiments.results_page import write_results_page
from course_lib.experiments.runs import DEFAULT_SEED, RESULTS_DIR, RunOptions, seed_dir
from course_lib.experiments.shipped import (
    ShippedModelError,
    check_shipped,
    outputs_on_test_split,
    ship,
)
from course_lib.paths import COURSE_ROOT
from course_lib.profile import get_profile

RESULTS_PAGE = COURSE_ROOT / "docs" / "results.md"
README = COURSE_ROOT / "README.md"  # its headline table is updated with the page
# The seeds docs/results.md reports: what `course reproduce all` runs unless told otherwise.
DOCUMENTED_SEEDS = range(5)
REFERENCE_MACHINE = "a 2-core x86_64 CPU"  # the machine step_seconds were measured on


def planned_runs(experiment: str, only: str | None = None, registry: Registry = REGISTRY
                 ) -> list[tuple[str, int]]:
    """``(model, steps)`` for every model ``course reproduce EXPERIMENT`` trains (``only``:
    just that one), with the step budgets of the active profile."""
    declared = registry[experiment]
    names = (declared.check_model(only),) if only else declared.default_models
    return [(name, declared.steps(name)) for name in names]


def estimate_seconds(experiment: str, only: str | None = None, registry: Registry = REGISTRY
                     ) -> float:
    """About how long ``course reproduce EXPERIMENT`` takes on the reference machine: steps
    times the experiment's ``step_seconds``, plus evaluation (the fast profile's tiny models: a
    guess of a few seconds each)."""
    declared = registry[experiment]
    runs = planned_runs(experiment, only, registry)
    if get_profile() != "full":
        return sum(0.02 * steps + 3.0 for _, steps in runs)
    return sum(steps * declared.step_seconds[model] + declared.evaluation_seconds
               for model, steps in runs)


def _measured_text(experiment: str, models: list[str], registry: Registry) -> str | None:
    """What the committed runs of ``models`` took to train, or None where one has no run."""
    measured = {m: measured_training(experiment, m) for m in models} \
        if registry is REGISTRY else {}
    if not measured or any(v is None for v in measured.values()):
        return None
    first = next(iter(measured.values()))
    where = (f"measured on {first['machine']}, {first['threads']} torch "
             f"thread{'s' if first['threads'] != 1 else ''}")
    parts = [(f"{name}: " if len(measured) > 1 else "")
             + f"{m['mean']:.1f} minutes" + (f" on average over {m['seeds']} seeds "
                                               f"({m['min']:.1f} to {m['max']:.1f})"
                                               if m["seeds"] > 1 else "")
             for name, m in measured.items()]
    return f"training took {'; '.join(parts)} in the full profile, {where}"


def budget_text(experiment: str, only: str | None = None, registry: Registry = REGISTRY) -> str:
    """"N optimiser steps; training took M minutes ..." for lessons and messages: the
    committed measurements where there are some (docs/results.md), else an estimate from the
    experiment's step cost."""
    runs = planned_runs(experiment, only, registry)
    steps = sorted({s for _, s in runs})
    each = " each" if len(runs) > 1 and len(steps) == 1 else ""
    planned = f"{' / '.join(f'{s:,}' for s in steps)} optimiser steps{each}"
    measured = _measured_text(experiment, [m for m, _ in runs], registry)
    if get_profile() != "full":
        return f"{planned} in the fast profile, a few seconds" + (
            f"; with the full profile's budget, {measured}" if measured else "")
    if measured:
        return f"{planned}; {measured}"
    minutes = max(1, round(estimate_seconds(experiment, only, registry) / 60))
    return (f"{planned}, about {minutes} minute{'s' if minutes != 1 else ''} on "
            f"{REFERENCE_MACHINE} (an estimate from the cost of a step: no run is committed)")


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
                   reuse: bool = False, progress: bool = True, registry: Registry = REGISTRY,
                   use_shipped: bool = False):
    """Run one experiment for one seed into ``out_dir`` (``only``: just that model); returns
    the run (its ``result``, its ``table()``, its models' outputs)."""
    declared = registry[experiment]
    models = (declared.check_model(only),) if only else declared.default_models
    options = RunOptions(max_minutes=max_minutes, threads=threads, reuse=reuse,
                         progress=progress, use_shipped=use_shipped)
    return declared.reproduce(models, seed, out_dir, options=options)


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
    run = run_experiment(experiment, seed, out_dir, only=name, max_minutes=max_minutes,
                         threads=threads, reuse=True, progress=False)
    return experiment, name, seed, cut_short(run.result)


def _jobs(phase: list[Experiment], seeds: list[int]) -> list[tuple[str, str, int]]:
    """``(experiment, model, seed)`` for every model of every seed of one phase."""
    return [(experiment.name, name, seed) for seed in seeds for experiment in phase
            for name in experiment.default_models]


def reproduce_all(seeds: list[int], results_dir: Path = RESULTS_DIR,
                  page: Path | None = RESULTS_PAGE, max_minutes: float | None = None,
                  threads: int | None = None, jobs: int = 1, registry: Registry = REGISTRY
                  ) -> Path | None:
    """Every experiment of ``registry`` for every seed, then the results page.

    Each model of each seed is one job; ``jobs`` of them train side by side in worker
    processes, each on its own thread count, so the numbers are the same as one after the other.
    Models saved with the same settings are loaded, not trained. An experiment's jobs come after
    those of the experiments it names in ``after`` (lesson 10 compares the Transformer with the
    seed's Bahdanau model), and last each several-model experiment's file for the seed is
    written from the saved models. A bar over all jobs shows the estimated time left."""
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    phases = [_jobs(phase, seeds) for phase in registry.phases()]
    estimate = {(e, n): estimate_seconds(e, n, registry) for phase in phases for e, n, _ in phase}
    total = sum(estimate[e, n] for phase in phases for e, n, _ in phase)
    print(f"course reproduce all: {sum(map(len, phases))} models ({len(seeds)} seeds × "
          f"{len(registry)} experiments), about {total / 3600:.1f} hours of one core of "
          f"{REFERENCE_MACHINE}{f', {jobs} at a time' if jobs > 1 else ''}; models already "
          "saved are loaded instead.", flush=True)
    bar = tqdm(total=round(total), unit="s", desc="all experiments",
               bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} estimated s [{elapsed}<{remaining}]")
    noted = []

    def done(experiment: str, name: str, seed: int, stopped: list[str]) -> None:
        bar.update(round(estimate[experiment, name]))
        bar.set_postfix_str(f"{experiment} {name} seed {seed} done")
        noted.extend(stopped)

    pool = None if jobs == 1 else ProcessPoolExecutor(jobs, mp_context=get_context("spawn"))
    try:
        for phase in phases:
            arguments = [(e, n, s, seed_dir(s, results_dir), max_minutes, threads)
                         for e, n, s in phase]
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
        for experiment in registry:
            if len(experiment.default_models) > 1:
                run_experiment(experiment.name, seed, seed_dir(seed, results_dir),
                               max_minutes=max_minutes, threads=threads, reuse=True,
                               progress=False, registry=registry)
    if noted:
        warn_if_cut_short({name: {"cut_short": True} for name in noted}, max_minutes)
    if page is None:
        return None
    return write_results_page(results_dir, page, registry, get_profile(),
                              readme=README if page == RESULTS_PAGE else None)


def _model_option_error(args, declared: Experiment, registry: Registry) -> str | None:
    """Why ``--model``/``--dataset`` do not fit ``declared``, or None when they do."""
    for option in ("model", "dataset"):
        value = getattr(args, option)
        if value is None:
            continue
        if option != declared.model_option:
            users = [e.name for e in registry if e.model_option == option and len(e.models) > 1]
            hint = f"; use --{declared.model_option}" if len(declared.models) > 1 else ""
            return f"--{option} is for {', '.join(users) or 'no experiment'}{hint}"
        try:
            declared.check_model(value)
        except ValueError as error:
            return str(error)
    return None


def _seeds_of(args) -> list[int]:
    if args.seeds and args.seed is not None:
        raise ValueError("give --seed or --seeds, not both")
    if args.seeds:
        return parse_seeds(args.seeds)
    if args.seed is not None:
        return [args.seed]
    return list(DOCUMENTED_SEEDS) if args.experiment == "all" else [DEFAULT_SEED]


def reproduce_cli(args, registry: Registry = REGISTRY) -> int:
    """``course reproduce EXPERIMENT [--model|--dataset NAME] [--seed N | --seeds A-B] ...``."""
    problem = None
    if args.experiment != "all":
        problem = _model_option_error(args, registry[args.experiment], registry)
    elif args.model is not None or args.dataset is not None:
        problem = "--model and --dataset are for one experiment, not all"
    if problem is None and (args.jobs < 1 or (args.jobs > 1 and args.experiment != "all")):
        problem = f"--jobs is for all and must be at least 1, got {args.jobs}"
    if problem is None and (args.ship or args.check_shipped or args.use_shipped) and \
            args.experiment == "all":
        problem = "--ship, --use-shipped and --check-shipped are for one experiment"
    if problem is None and args.ship and (args.experiment == "all" or args.max_minutes):
        problem = "--ship is for one experiment's full budget, without --max-minutes"
    if problem is None and args.max_minutes is not None and args.max_minutes <= 0:
        problem = f"--max-minutes must be positive, got {args.max_minutes}"
    if problem is None and args.threads is not None and args.threads < 1:
        problem = f"--threads must be at least 1, got {args.threads}"
    try:
        seeds = _seeds_of(args)
    except ValueError as error:
        problem = problem or str(error)
    if problem is not None:
        print(f"course reproduce {args.experiment}: {problem}", file=sys.stderr)
        return 2
    results_dir = Path(args.out_dir) if args.out_dir else RESULTS_DIR
    if args.check_shipped:
        return check_cli(registry[args.experiment], args.model or args.dataset, seeds)
    if args.experiment == "all":
        page = None if args.no_page else (Path(args.page) if args.page else RESULTS_PAGE)
        written = reproduce_all(seeds, results_dir, page, args.max_minutes, args.threads,
                                args.jobs, registry)
        if written is not None:
            print(f"wrote {written}")
        return 0
    only = args.model or args.dataset
    for seed in seeds:
        print(f"course reproduce {args.experiment}, seed {seed}: "
              f"{budget_text(args.experiment, only, registry)}.", file=sys.stderr)
        out_dir = seed_dir(seed, results_dir)
        run = run_experiment(args.experiment, seed, out_dir, only, args.max_minutes,
                             args.threads, reuse=args.ship, registry=registry,
                             use_shipped=args.use_shipped)
        print(run.table())
        warn_if_cut_short(run.result, args.max_minutes)
        print(f"wrote results to {out_dir}")
        if args.ship:
            declared = registry[args.experiment]
            for name, record in declared.records(run.result).items():
                entry = ship(declared, name, seed, record,
                             outputs=outputs_on_test_split(run, name))
                print(f"shipped {entry.file} ({entry.bytes:,} bytes)")
    return 0


def check_cli(declared: Experiment, only: str | None, seeds: list[int]) -> int:
    """``course reproduce EXPERIMENT --check-shipped``: each shipped model trained again and
    compared with its file; 1 when one differs."""
    failed = False
    for seed in seeds:
        for name in ((only,) if only else declared.default_models):
            try:
                differ = check_shipped(declared, name, seed)
            except (ValueError, ShippedModelError) as error:
                print(f"{declared.name} {name} (seed {seed}): {error}")
                failed = True
                continue
            verdict = "the same, bit for bit" if not differ else \
                f"DIFFERENT in {len(differ)} tensors: {', '.join(differ[:5])}"
            print(f"{declared.name} {name} (seed {seed}): trained again, {verdict}")
            failed = failed or bool(differ)
    return 1 if failed else 0


def results_cli(args, registry: Registry = REGISTRY) -> int:
    """``course results``: regenerate the results page from the JSON already written."""
    results_dir = Path(args.results_dir) if args.results_dir else RESULTS_DIR
    page = Path(args.page) if args.page else RESULTS_PAGE
    readme = README if page == RESULTS_PAGE else None
    print(f"wrote {write_results_page(results_dir, page, registry, readme=readme)}")
    return 0
