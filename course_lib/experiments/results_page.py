"""``docs/results.md`` and README's headline table: the measured results of ``course reproduce``,
generated from its JSON.

``course reproduce`` writes one folder per seed, ``results/seed-N/``, with a JSON file per
experiment or per model (``bottleneck-bahdanau.json``, ``captioning-shapes.json``, ...). This
module reads every full-profile seed found for every experiment of a registry
(:mod:`course_lib.experiments.registry`), checks the experiments' targets on each, and writes
one Markdown page: the targets seed by seed,
then every metric's mean, minimum and maximum over the seeds, then the step budgets and training
times the numbers come from, then the settings each number was made with.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from course_lib.experiments.registry import Experiment, Registry
from course_lib.experiments.targets import seed_targets


def load_seeds(results_dir: Path, registry: Registry, profile: str = "full"
               ) -> dict[int, dict[str, dict]]:
    """``{seed: {experiment: result}}`` for every seed folder under ``results_dir`` and every
    experiment of ``registry`` run in ``profile``, seeds in increasing order.

    An experiment's result gathers ``NAME.json`` and then every ``NAME-MODEL.json`` (one-model
    runs) of the folder: the run metadata of the first file read, and under ``"models"`` each
    model's record (the first file that has it wins), with the settings it was made with."""
    seeds: dict[int, dict[str, dict]] = {}
    for folder in sorted(Path(results_dir).glob("seed-*")):
        match = re.fullmatch(r"seed-(\d+)", folder.name)
        if not match or not folder.is_dir():
            continue
        found = {}
        for experiment in registry:
            merged = _gather(folder, experiment, profile)
            if merged is not None:
                found[experiment.name] = merged
        if found:
            seeds[int(match.group(1))] = found
    return dict(sorted(seeds.items()))


def _gather(folder: Path, experiment: Experiment, profile: str) -> dict | None:
    """One experiment's files in one seed folder, merged (see :func:`load_seeds`)."""
    files = [folder / f"{experiment.name}.json",
             *sorted(folder.glob(f"{experiment.name}-*.json"))]
    merged = None
    for path in (p for p in files if p.is_file()):
        result = json.loads(path.read_text())
        if result.get("profile") != profile:
            continue
        records = experiment.records(result)
        if merged is None:
            merged = {key: value for key, value in result.items()
                      if key not in records and key not in ("models", "settings")}
            merged["models"] = {}
        for name, record in records.items():
            merged["models"].setdefault(
                name, {**record, "settings": record.get("settings", result.get("settings", {}))})
    return merged


def _number(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" if abs(value) <= 1 else f"{value:.1f}"


def _spread(values: list[float]) -> str:
    if not values:
        return "– | – | –"
    return " | ".join(_number(v) for v in (statistics.fmean(values), min(values), max(values)))


def _each_record(seeds: dict[int, dict[str, dict]], registry: Registry):
    """``(experiment, model, record)`` seed by seed, the experiments grouped by family."""
    for results in seeds.values():
        for experiment in registry.by_family():
            for name, record in results.get(experiment.name, {}).get("models", {}).items():
                yield experiment, name, record


def _metric_rows(seeds: dict[int, dict[str, dict]], registry: Registry
                 ) -> list[tuple[str, list[float]]]:
    """``(label, values over the seeds that have it)`` for every metric the page summarises."""
    rows: dict[str, list[float]] = {}
    for experiment, name, record in _each_record(seeds, registry):
        for label, value in experiment.metrics(name, record):
            if value is not None:
                rows.setdefault(label, []).append(value)
    return list(rows.items())


def _budget_rows(seeds: dict[int, dict[str, dict]], registry: Registry) -> list[str]:
    """One line per trained model: steps, epochs and training seconds (mean, min, max)."""
    runs: dict[str, list[tuple[int, int, float]]] = {}
    for experiment, name, record in _each_record(seeds, registry):
        label, *budget = experiment.budget(name, record)
        runs.setdefault(label, []).append(tuple(budget))
    lines = []
    for model, rows in runs.items():
        steps = sorted({r[0] for r in rows})
        seconds = [r[2] for r in rows]
        lines.append(f"| {model} | {', '.join(f'{s:,}' for s in steps)} | "
                     f"{', '.join(str(e) for e in sorted({r[1] for r in rows}))} | "
                     f"{statistics.fmean(seconds) / 60:.1f} | {min(seconds) / 60:.1f} | "
                     f"{max(seconds) / 60:.1f} |")
    return lines


def _flatten(settings: dict, prefix: str = "") -> dict[str, object]:
    """Nested settings as ``{"model.hidden_size": 256, ...}``."""
    flat: dict[str, object] = {}
    for key, value in settings.items():
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _settings_text(settings: dict) -> str:
    """``settings`` as `name=value` items, the seed and thread count left out (the tables give
    both)."""
    shown = [f"`{name}={value}`" for name, value in _flatten(settings).items()
             if name.rpartition(".")[2] not in ("seed", "threads")]
    return ", ".join(shown) or "not recorded"


def _settings_lines(seeds: dict[int, dict[str, dict]], registry: Registry) -> list[str]:
    """Per model of each experiment: its command and the settings its newest seed's record
    holds."""
    lines = []
    for experiment in registry:
        measured = [(seed, results[experiment.name]["models"]) for seed, results in seeds.items()
                    if experiment.name in results]
        names = dict.fromkeys(name for _, records in measured for name in records)
        for name in names:
            seed, records = [(s, r) for s, r in measured if name in r][-1]
            label = experiment.name if len(experiment.models) == 1 else \
                f"{experiment.name}, {name}"
            lines.append(f"- **{label}**: `{experiment.command}`. Settings (seed {seed}): "
                         f"{_settings_text(records[name].get('settings', {}))}.")
    return lines


def results_page(seeds: dict[int, dict[str, dict]], registry: Registry,
                 profile: str = "full") -> str:
    """The Markdown of ``docs/results.md`` for the results of ``seeds``, run in ``profile``."""
    names = ", ".join(str(s) for s in seeds) or "none yet"
    lines = [
        "# Measured results",
        "",
        "<!-- Generated by `course reproduce all` (or `course results`) from results/seed-*/*.json;"
        " do not edit by hand. -->",
        "",
        f"Seeds measured: {names}. Every number comes from `course reproduce EXPERIMENT --seed N`"
        f" in the {profile} profile; `course reproduce all` measures them all again. Training is"
        " counted in optimiser steps on one torch thread, so the same seed gives the same numbers"
        " on any machine of the same kind ([reproducibility.md](reproducibility.md) says what"
        " that covers).",
    ]
    if profile != "full":
        lines += ["", f"**The {profile} profile trains tiny models for a few steps: these numbers"
                  " test the pipeline, not the course's claims.**"]
    machines = sorted({f"{r['machine']}, {r.get('threads', '?')} torch thread(s), {r['device']}"
                       for results in seeds.values() for r in results.values()})
    if machines:
        lines += ["", "Measured on: " + "; ".join(machines) + "."]
    if not seeds:
        return "\n".join(lines) + "\n"
    header = ("| target | required | " + " | ".join(f"seed {s}" for s in seeds)
              + " | smallest margin | all seeds |")
    lines += ["", "## Targets, seed by seed", "",
              "The margin is how far a seed's value lies inside its bound (value − bound, or bound"
              " − value for an upper bound), in the metric's own units; the column gives the"
              " smallest over the seeds.", "", header, "|" + "---|" * (len(seeds) + 4)]
    targets = registry.targets()
    for index, target in enumerate(targets):
        cells, verdicts, margins = [], [], []
        for results in seeds.values():
            _, value, bound, holds = seed_targets(results, targets)[index]
            verdicts.append(holds)
            mark = "" if holds is None else (" ✓" if holds else " ✗")
            cells.append(_number(value) + mark)
            if holds is not None:
                margins.append(bound - value if target.at_most else value - bound)
        if any(v is False for v in verdicts):
            summary = "**fails**"
        elif all(v is True for v in verdicts):
            summary = "holds"
        elif margins:
            summary = (f"holds on the {len(margins)} seed{'s' if len(margins) > 1 else ''}"
                       " measured so far")
        else:
            summary = "not measured yet"
        margin = f"{min(margins):+.3f}" if margins and abs(min(margins)) < 1 else \
            f"{min(margins):+.1f}" if margins else "–"
        lines.append(f"| {target.name} | {target.bound_text} | " + " | ".join(cells)
                     + f" | {margin} | {summary} |")
    lines += ["", "## Every metric over the seeds", "",
              "BLEU on sacreBLEU's 0–100 scale, test split; the other metrics are shares.", "",
              "| metric | seeds | mean | min | max |", "|---|---|---|---|---|"]
    lines += [f"| {label} | {len(values)} | {_spread(values)} |"
              for label, values in _metric_rows(seeds, registry)]
    lines += ["", "## Step budgets and training time", "",
              "The budget is counted in optimiser steps, so it decides the model; the minutes are"
              " measured (training only, evaluation excluded, one torch thread, two runs side by"
              " side on the machine above), and vary with the machine and what else it is"
              " doing.", "",
              "| model | steps | epochs | minutes (mean) | min | max |",
              "|---|---|---|---|---|---|"]
    lines += _budget_rows(seeds, registry)
    lines += ["", "## How the numbers were made", "",
              "Each seed's file in `results/seed-N/` records the command's full settings, the"
              " machine, the torch build and the thread count beside its numbers.", ""]
    lines += _settings_lines(seeds, registry)
    return "\n".join(lines) + "\n"


HEADLINE_START = "<!-- headline results: generated from results/ by `course results` -->"
HEADLINE_END = "<!-- end of headline results -->"


def headline_table(seeds: dict[int, dict[str, dict]], registry: Registry) -> str:
    """README's small table: mean test BLEU of the translators over the seeds measured, and
    how many targets hold on every one of them."""
    lines = ["| model | seeds | BLEU overall | BLEU, sources of 1–10 words | BLEU, sources of "
             "31+ words |", "|---|---|---|---|---|"]
    shown = [(e.name, model, label) for e in registry for model, label in e.headline.items()]
    for experiment, model, label in shown:
        entries = [r[experiment]["models"][model] for r in seeds.values()
                   if model in r.get(experiment, {}).get("models", {})]
        means = [statistics.fmean(values) if values else None for values in (
            [e["bleu"] for e in entries],
            *([e["bleu_by_length"][b] for e in entries if e["bleu_by_length"].get(b) is not None]
              for b in ("1-10", "31+")))]
        lines.append(f"| {label} | {len(entries)} | "
                     + " | ".join(_number(m) for m in means) + " |")
    targets = registry.targets()
    verdicts = [[seed_targets(r, targets)[i][3] for r in seeds.values()]
                for i in range(len(targets))]
    every = sum(all(v is True for v in vs) for vs in verdicts)
    failed = sum(any(v is False for v in vs) for vs in verdicts)
    partial = len(targets) - every - failed
    counts = [f"{n} {verb if n > 1 else verb + 's'} {where}" for n, verb, where in (
        (every, "hold", "on every seed"),
        (partial, "hold", "where measured but not yet on every seed"),
        (failed, "fail", "on at least one seed")) if n]
    if not seeds:
        counts = ["none measured yet"]
    lines += ["", f"Targets ({len(targets)}), over seeds {', '.join(map(str, seeds)) or 'none'}:"
              f" {'; '.join(counts)}."]
    return "\n".join(lines)


def update_readme(readme: Path, seeds: dict[int, dict[str, dict]], registry: Registry) -> Path:
    """Replace the text between README's headline markers by :func:`headline_table`."""
    text = Path(readme).read_text()
    if HEADLINE_START not in text or HEADLINE_END not in text:
        raise ValueError(f"{readme} lacks the headline markers {HEADLINE_START!r} and "
                         f"{HEADLINE_END!r}")
    before, rest = text.split(HEADLINE_START, 1)
    after = rest.split(HEADLINE_END, 1)[1]
    Path(readme).write_text(f"{before}{HEADLINE_START}\n{headline_table(seeds, registry)}\n"
                            f"{HEADLINE_END}{after}")
    return Path(readme)


def write_results_page(results_dir: Path, page: Path, registry: Registry,
                       profile: str = "full", readme: Path | None = None) -> Path:
    """Write :func:`results_page` of the seeds under ``results_dir`` run in ``profile`` (the
    course's documented numbers are the full profile's) to ``page``; with ``readme``, update
    its headline table too (full profile only)."""
    page = Path(page)
    page.parent.mkdir(parents=True, exist_ok=True)
    seeds = load_seeds(results_dir, registry, profile)
    page.write_text(results_page(seeds, registry, profile))
    if readme is not None and profile == "full":
        update_readme(readme, seeds, registry)
    return page
