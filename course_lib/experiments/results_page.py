"""``docs/results.md`` and README's headline table: the measured results of ``course reproduce``,
generated from its JSON.

``course reproduce`` writes one folder per seed, ``results/seed-N/``, with a JSON file per
experiment or per model (``bottleneck-bahdanau.json``, ``captioning-shapes.json``, ...). This
module reads every full-profile seed found, checks the course's targets on each
(:mod:`course_lib.experiments.targets`), and writes one Markdown page: the targets seed by seed,
then every metric's mean, minimum and maximum over the seeds, then the step budgets and training
times the numbers come from, then the settings each number was made with.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from course_lib.experiments.targets import TARGETS, seed_targets

EXPERIMENTS = ("bottleneck", "captioning", "transformer")
BUCKETS = ("1-10", "11-20", "21-30", "31+")
CAPTION_METRICS = {"exact_match": "exact match", "bleu4": "BLEU-4", "localization": "localisation"}


def load_seeds(results_dir: Path, profile: str = "full") -> dict[int, dict[str, dict]]:
    """``{seed: {experiment: result}}`` for every ``results_dir/seed-N/EXPERIMENT.json`` run in
    ``profile``, seeds in increasing order."""
    seeds: dict[int, dict[str, dict]] = {}
    for folder in sorted(Path(results_dir).glob("seed-*")):
        match = re.fullmatch(r"seed-(\d+)", folder.name)
        if not match or not folder.is_dir():
            continue
        found = {}
        for experiment in EXPERIMENTS:
            path = folder / f"{experiment}.json"
            if path.is_file():
                result = json.loads(path.read_text())
                if result.get("profile") == profile:
                    found[experiment] = result
        _merge_single_models(folder, profile, found)
        if found:
            seeds[int(match.group(1))] = found
    return dict(sorted(seeds.items()))


def _merge_single_models(folder: Path, profile: str, found: dict[str, dict]) -> None:
    """Add the models of ``bottleneck-NAME.json`` (``--model NAME`` runs) and the data sets of
    ``captioning-NAME.json`` (``--dataset NAME`` runs) that ``bottleneck.json`` or
    ``captioning.json`` lack, or all of them when there is no such file."""
    for experiment in ("bottleneck", "captioning"):
        for path in sorted(folder.glob(f"{experiment}-*.json")):
            result = json.loads(path.read_text())
            if result.get("profile") != profile:
                continue
            if experiment == "bottleneck":
                merged = found.setdefault(experiment, {**result, "models": {}})["models"]
                entries = result["models"]
            else:
                merged = found.setdefault(experiment, {k: v for k, v in result.items()
                                                       if not _is_caption_entry(v)})
                entries = {k: v for k, v in result.items() if _is_caption_entry(v)}
                by_dataset = merged.setdefault("settings_by_dataset", {})
                for name in entries:
                    by_dataset.setdefault(name, result.get("settings", {}))
            for name, entry in entries.items():
                merged.setdefault(name, entry)


def _is_caption_entry(value) -> bool:
    """True for a data set's record in a captioning result (not run metadata)."""
    return isinstance(value, dict) and "exact_match" in value


def _number(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" if abs(value) <= 1 else f"{value:.1f}"


def _spread(values: list[float]) -> str:
    if not values:
        return "– | – | –"
    return " | ".join(_number(v) for v in (statistics.fmean(values), min(values), max(values)))


def _metric_rows(seeds: dict[int, dict[str, dict]]) -> list[tuple[str, list[float]]]:
    """``(label, values over the seeds that have it)`` for every metric the page summarises."""
    rows: dict[str, list[float]] = {}

    def add(label: str, value: float | None) -> None:
        if value is not None:
            rows.setdefault(label, []).append(value)

    for results in seeds.values():
        for experiment in ("bottleneck", "transformer"):
            for model, entry in results.get(experiment, {}).get("models", {}).items():
                if experiment == "transformer" and model != "transformer":
                    continue  # the RNN rows there repeat the bottleneck experiment's
                for bucket in BUCKETS:
                    add(f"{model}: BLEU {bucket}", entry["bleu_by_length"].get(bucket))
                add(f"{model}: BLEU overall", entry["bleu"])
                add(f"{model}: alignment accuracy", entry["alignment_accuracy"])
        for dataset, entry in results.get("captioning", {}).items():
            if _is_caption_entry(entry):
                for metric, label in CAPTION_METRICS.items():
                    add(f"{dataset}: {label}", entry[metric])
    return list(rows.items())


def _budget_rows(seeds: dict[int, dict[str, dict]]) -> list[str]:
    """One line per trained model: steps, epochs and training seconds (mean, min, max)."""
    runs: dict[str, list[tuple[int, int, float]]] = {}
    for results in seeds.values():
        for experiment in ("bottleneck", "transformer"):
            for model, entry in results.get(experiment, {}).get("models", {}).items():
                if experiment == "transformer" and model != "transformer":
                    continue
                runs.setdefault(model, []).append(
                    (entry["steps"], entry["epochs"], entry["wall_s"]))
        for dataset, entry in results.get("captioning", {}).items():
            if _is_caption_entry(entry):
                runs.setdefault(f"captioner ({dataset})", []).append(
                    (entry["steps"], entry["epochs"], entry["train_s"]))
    lines = []
    for model, rows in runs.items():
        steps = sorted({r[0] for r in rows})
        seconds = [r[2] for r in rows]
        lines.append(f"| {model} | {', '.join(f'{s:,}' for s in steps)} | "
                     f"{', '.join(str(e) for e in sorted({r[1] for r in rows}))} | "
                     f"{statistics.fmean(seconds) / 60:.1f} | {min(seconds) / 60:.1f} | "
                     f"{max(seconds) / 60:.1f} |")
    return lines


# The command that measures one seed of each experiment (`course reproduce all` runs them all).
COMMANDS = {"bottleneck": "course reproduce bottleneck --model MODEL --seed N",
            "captioning": "course reproduce captioning --dataset DATASET --seed N",
            "transformer": "course reproduce transformer --seed N"}


def _flatten(settings: dict, prefix: str = "") -> dict[str, object]:
    """Nested settings as ``{"model.hidden_size": 256, ...}``."""
    flat: dict[str, object] = {}
    for key, value in settings.items():
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _resolved(settings: dict, dataset: str) -> dict:
    """``settings`` with the changes its ``by_dataset`` records for ``dataset`` applied."""
    changes = settings.get("by_dataset", {}).get(dataset, {})
    return {**{k: v for k, v in settings.items() if k != "by_dataset"}, **changes}


def _settings_text(settings: dict) -> str:
    """``settings`` as `name=value` items; the seed and thread count (the tables give both) and
    vocabulary sizes still 0 ("set from the data") left out."""
    shown = [f"`{name}={value}`" for name, value in _flatten(settings).items()
             if name.rpartition(".")[2] not in ("seed", "threads")
             and not (name.endswith("vocab_size") and value == 0)]
    return ", ".join(shown) or "not recorded"


def _settings_lines(seeds: dict[int, dict[str, dict]]) -> list[str]:
    """Per experiment (per data set for captioning): its command and the settings its newest
    seed's JSON records."""
    lines = []
    for experiment in EXPERIMENTS:
        measured = [(seed, results[experiment]) for seed, results in seeds.items()
                    if experiment in results]
        if not measured:
            continue
        if experiment != "captioning":
            seed, result = measured[-1]
            lines.append(f"- **{experiment}**: `{COMMANDS[experiment]}`. Settings (seed {seed}): "
                         f"{_settings_text(result.get('settings', {}))}.")
            continue
        datasets = dict.fromkeys(name for _, result in measured for name, entry in result.items()
                                 if _is_caption_entry(entry))
        for dataset in datasets:
            seed, result = [(s, r) for s, r in measured if dataset in r][-1]
            settings = result.get("settings_by_dataset", {}).get(dataset,
                                                                  result.get("settings", {}))
            settings = _resolved(settings, dataset)
            if "architecture" in result[dataset]:  # the model as built, channels and vocabulary
                settings = {**settings, "model": result[dataset]["architecture"]}
            lines.append(f"- **captioning, {dataset}**: `{COMMANDS[experiment]}`. Settings (seed "
                         f"{seed}): {_settings_text(settings)}.")
    return lines


def results_page(seeds: dict[int, dict[str, dict]], profile: str = "full") -> str:
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
    for index, target in enumerate(TARGETS):
        cells, verdicts, margins = [], [], []
        for results in seeds.values():
            _, value, bound, holds = seed_targets(results)[index]
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
              for label, values in _metric_rows(seeds)]
    lines += ["", "## Step budgets and training time", "",
              "The budget is counted in optimiser steps, so it decides the model; the minutes are"
              " measured (training only, evaluation excluded, one torch thread, two runs side by"
              " side on the machine above), and vary with the machine and what else it is"
              " doing.", "",
              "| model | steps | epochs | minutes (mean) | min | max |",
              "|---|---|---|---|---|---|"]
    lines += _budget_rows(seeds)
    lines += ["", "## How the numbers were made", "",
              "Each seed's file in `results/seed-N/` records the command's full settings, the"
              " machine, the torch build and the thread count beside its numbers.", ""]
    lines += _settings_lines(seeds)
    return "\n".join(lines) + "\n"


HEADLINE_START = "<!-- headline results: generated from results/ by `course results` -->"
HEADLINE_END = "<!-- end of headline results -->"
HEADLINE_MODELS = (("bottleneck", "none", "GRU encoder–decoder, no attention"),
                   ("bottleneck", "bahdanau", "Bahdanau (additive) attention"),
                   ("bottleneck", "luong-general", "Luong (general) attention"),
                   ("transformer", "transformer", "Transformer"))


def headline_table(seeds: dict[int, dict[str, dict]]) -> str:
    """README's small table: mean test BLEU of the translators over the seeds measured, and
    how many targets hold on every one of them."""
    lines = ["| model | seeds | BLEU overall | BLEU, sources of 1–10 words | BLEU, sources of "
             "31+ words |", "|---|---|---|---|---|"]
    for experiment, model, label in HEADLINE_MODELS:
        entries = [r[experiment]["models"][model] for r in seeds.values()
                   if model in r.get(experiment, {}).get("models", {})]
        means = [statistics.fmean(values) if values else None for values in (
            [e["bleu"] for e in entries],
            *([e["bleu_by_length"][b] for e in entries if e["bleu_by_length"].get(b) is not None]
              for b in ("1-10", "31+")))]
        lines.append(f"| {label} | {len(entries)} | "
                     + " | ".join(_number(m) for m in means) + " |")
    verdicts = [[seed_targets(r)[i][3] for r in seeds.values()] for i in range(len(TARGETS))]
    every = sum(all(v is True for v in vs) for vs in verdicts)
    failed = sum(any(v is False for v in vs) for vs in verdicts)
    partial = len(TARGETS) - every - failed
    counts = [f"{n} {verb if n > 1 else verb + 's'} {where}" for n, verb, where in (
        (every, "hold", "on every seed"),
        (partial, "hold", "where measured but not yet on every seed"),
        (failed, "fail", "on at least one seed")) if n]
    if not seeds:
        counts = ["none measured yet"]
    lines += ["", f"Targets ({len(TARGETS)}), over seeds {', '.join(map(str, seeds)) or 'none'}:"
              f" {'; '.join(counts)}."]
    return "\n".join(lines)


def update_readme(readme: Path, seeds: dict[int, dict[str, dict]]) -> Path:
    """Replace the text between README's headline markers by :func:`headline_table`."""
    text = Path(readme).read_text()
    if HEADLINE_START not in text or HEADLINE_END not in text:
        raise ValueError(f"{readme} lacks the headline markers {HEADLINE_START!r} and "
                         f"{HEADLINE_END!r}")
    before, rest = text.split(HEADLINE_START, 1)
    after = rest.split(HEADLINE_END, 1)[1]
    Path(readme).write_text(f"{before}{HEADLINE_START}\n{headline_table(seeds)}\n"
                            f"{HEADLINE_END}{after}")
    return Path(readme)


def write_results_page(results_dir: Path, page: Path, profile: str = "full",
                       readme: Path | None = None) -> Path:
    """Write :func:`results_page` of the seeds under ``results_dir`` run in ``profile`` (the
    course's documented numbers are the full profile's) to ``page``; with ``readme``, update
    its headline table too (full profile only)."""
    page = Path(page)
    page.parent.mkdir(parents=True, exist_ok=True)
    seeds = load_seeds(results_dir, profile)
    page.write_text(results_page(seeds, profile))
    if readme is not None and profile == "full":
        update_readme(readme, seeds)
    return page
