"""`course reproduce all`, `--seeds`, `--max-minutes` and the up-front estimates (fast profile)."""

import json
import os
import subprocess
import sys

import pytest

from course_lib.experiments.bottleneck import BOTTLENECK_MODELS
from course_lib.experiments.catalogue import measured_training
from course_lib.experiments.reproduce import (
    budget_text,
    estimate_seconds,
    parse_seeds,
    planned_runs,
)
from course_lib.experiments.translation import TRANSLATORS

from .reproduce_cli import refused, run_reproduce, without_times


def test_every_model_a_run_can_name_has_a_step_time(monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "full")
    for name in TRANSLATORS:
        assert estimate_seconds("bottleneck", name) > 0, name


def test_seed_lists_and_ranges():
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert parse_seeds("3") == [3]
    assert parse_seeds("0,2, 5-6,2") == [0, 2, 5, 6]
    for bad in ("", "4-0", "a", "1-2-3", "-1"):
        with pytest.raises(ValueError, match="seed"):
            parse_seeds(bad)


def test_the_estimate_counts_steps_of_the_full_profile(monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "full")
    runs = planned_runs("bottleneck")
    assert [name for name, _ in runs] == list(BOTTLENECK_MODELS)
    assert len({steps for _, steps in runs}) == 1  # the same budget for every translator
    assert planned_runs("bottleneck", "bahdanau") == [("bahdanau", runs[0][1])]
    assert [name for name, _ in planned_runs("captioning")] == ["digits", "shapes"]
    # The estimate grows with the steps and names them.
    assert estimate_seconds("bottleneck") > estimate_seconds("bottleneck", "none") > 0
    # a model with committed runs reports what they took; one without, the estimate
    text = budget_text("transformer")
    steps = planned_runs("transformer")[0][1]
    measured = measured_training("transformer", "transformer")
    assert text.startswith(f"{steps:,} optimiser steps; training took ")
    assert f"{measured['mean']:.1f} minutes on average over {measured['seeds']} seeds" in text
    assert measured["machine"] in text and "laptop" not in text
    estimated = budget_text("bottleneck", "luong-dot")
    dot_steps = planned_runs("bottleneck", "luong-dot")[0][1]
    assert estimated.startswith(f"{dot_steps:,} optimiser steps, about ")
    assert "an estimate" in estimated
    assert "steps each" in budget_text("bottleneck")
    with pytest.raises(ValueError, match="unknown experiment"):
        planned_runs("everything")


def test_a_time_limit_that_cuts_training_short_says_so(tmp_path):
    done = run_reproduce("bottleneck", "--model", "none", "--max-minutes", "0.00001",
                         out_dir=tmp_path)
    assert done.returncode == 0, done.stderr
    entry = json.loads((tmp_path / "seed-0" / "bottleneck-none.json").read_text())["models"]["none"]
    assert entry["cut_short"] is True and entry["steps"] < planned_runs("bottleneck")[0][1]
    assert "--max-minutes" in done.stderr and "will differ from docs/results.md" in done.stderr


@pytest.mark.parametrize("args, message", [
    (["--max-minutes", "0"], "must be positive"),
    (["--seeds", "3-1"], "empty seed range"),
    (["--seed", "1", "--seeds", "0-1"], "not both"),
    (["--model", "none", "--dataset", "digits"], "--dataset is for captioning"),
])
def test_bad_options_are_refused(tmp_path, args, message, capsys, monkeypatch):
    assert message in refused("bottleneck", *args, out_dir=tmp_path, capsys=capsys,
                              monkeypatch=monkeypatch)


def reproduce_all(tmp_path, cache: str, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    """`course reproduce all --seeds 4` (fast profile) into tmp_path/cache-results; returns the
    process and the JSON files written, by name."""
    env = {**os.environ, "COURSE_PROFILE": "fast", "COURSE_DEVICE": "cpu",
           "COURSE_MODEL_CACHE": str(tmp_path / cache)}
    out = tmp_path / f"{cache}-results"
    done = subprocess.run(
        [sys.executable, "-m", "course_lib", "reproduce", "all", "--seeds", "4", "--out-dir",
         str(out), "--page", str(tmp_path / f"{cache}.md"), *args],
        capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done, {p.name: json.loads(p.read_text()) for p in (out / "seed-4").glob("*.json")}


def test_all_runs_every_model_side_by_side_then_reuses_what_is_saved(tmp_path):
    parallel, written = reproduce_all(tmp_path, "a", "--jobs", "2")
    models = len(BOTTLENECK_MODELS) + 2 + 1  # translators, two captioners, the Transformer
    assert f"{models} models (1 seeds × 3 experiments), about" in parallel.stdout
    assert {"bottleneck.json", "captioning.json", "transformer.json"} <= set(written)
    assert set(written["bottleneck.json"]["models"]) == set(BOTTLENECK_MODELS)
    page = (tmp_path / "a.md").read_text()
    assert "Seeds measured: 4." in page and "fast profile" in page
    assert "| Transformer: BLEU overall |" in page
    # One job at a time, from an empty cache, gives the same numbers as two side by side.
    sequential, again = reproduce_all(tmp_path, "b")
    assert sequential.stdout.count("loaded the model trained with these settings") == \
        len(BOTTLENECK_MODELS) + 2  # only when the files are written at the end
    for name in ("bottleneck.json", "captioning.json", "transformer.json"):
        assert without_times(again[name]) == without_times(written[name]), name
    # A second run trains nothing: every model comes from the cache, with the same numbers.
    cached, third = reproduce_all(tmp_path, "b")
    assert cached.stdout.count("loaded the model trained with these settings") == \
        2 * (len(BOTTLENECK_MODELS) + 2) + 1
    for name in ("bottleneck.json", "captioning.json", "transformer.json"):
        assert without_times(third[name]) == without_times(again[name]), name
