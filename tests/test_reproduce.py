"""`course reproduce bottleneck`: the command, its JSON and plot, the checkpoint cache, and (full
profile only, `make test-full`) the headline targets."""

import json
import os

import pytest

from course_lib.experiments.bottleneck import (
    BOTTLENECK_MODELS,
    BOTTLENECK_STEPS,
    BottleneckSettings,
    checkpoint_path,
    measured_translators,
    reproduce_bottleneck,
    translator_config,
)
from course_lib.seeding import REPRODUCE_THREADS

from .reproduce_cli import run_reproduce

BUCKETS = ["1-10", "11-20", "21-30", "31+"]
ENTRY_KEYS = {"bleu", "bleu_by_length", "alignment_accuracy", "params", "wall_s", "epochs",
              "steps", "cut_short"}


def course(*args, tmp_path):
    return run_reproduce("bottleneck", *args, out_dir=tmp_path)


def test_command_writes_the_promised_json_for_one_model(tmp_path):
    done = course("--model", "bahdanau", "--seed", "3", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "seed-3" / "bottleneck-bahdanau.json").read_text())
    entry = result["models"]["bahdanau"]
    assert set(entry) >= ENTRY_KEYS and list(entry["bleu_by_length"]) == BUCKETS
    # Exactly the step budget, never cut short by the clock; the documented thread count,
    # whatever the machine.
    assert entry["steps"] == BottleneckSettings.for_profile(3).train.steps
    assert entry["cut_short"] is False and result["threads"] == REPRODUCE_THREADS
    assert 0 <= entry["alignment_accuracy"] <= 1 and entry["params"] > 0
    assert 0 <= entry["bleu"] <= 100 and result["seed"] == 3
    assert "| bahdanau |" in done.stdout  # the results table


def test_every_model_in_one_json_and_one_plot(tmp_path):
    run = reproduce_bottleneck(seed=1, out_dir=tmp_path, progress=False,
                               cache_dir=tmp_path / "cache")
    result = json.loads((tmp_path / "bottleneck.json").read_text())
    assert list(result["models"]) == list(BOTTLENECK_MODELS) == [
        "none", "bahdanau", "luong-dot", "luong-general", "luong-concat", "luong-local"]
    for name, entry in result["models"].items():
        assert set(entry) >= ENTRY_KEYS, name
        assert (entry["alignment_accuracy"] is None) == (name == "none"), name
    assert (tmp_path / "bottleneck.png").stat().st_size > 10_000
    assert result == run.result and "| luong-local |" in run.table()
    # Every model was saved; reuse loads it instead of training again, with the same numbers.
    settings = BottleneckSettings.for_profile(1)
    for name in BOTTLENECK_MODELS:
        assert checkpoint_path(name, run.corpus, settings, tmp_path / "cache").is_file()
    again = reproduce_bottleneck(["bahdanau"], seed=1, progress=False, reuse=True,
                                 cache_dir=tmp_path / "cache")
    assert again.result["models"]["bahdanau"] == result["models"]["bahdanau"]
    assert len(again.history) == result["models"]["bahdanau"]["epochs"]
    # What a lesson draws before training is the architecture that was trained.
    for name in BOTTLENECK_MODELS:
        assert translator_config(name, seed=1) == run.models[name].config, name


def test_a_changed_model_configuration_is_not_loaded_from_an_old_checkpoint(monkeypatch):
    # The cache key must cover the model's settings, or reuse would load weights trained for
    # another variant into a model of the same shapes.
    from types import SimpleNamespace

    from course_lib.experiments import bottleneck as reproduce
    corpus = SimpleNamespace(config=SimpleNamespace(key=lambda: "corpus"))
    settings = BottleneckSettings.for_profile(0)
    before = checkpoint_path("luong-general", corpus, settings)
    monkeypatch.setitem(reproduce.ATTENTION_MODELS, "luong-general",
                        {**reproduce.ATTENTION_MODELS["luong-general"], "scaled": False})
    assert checkpoint_path("luong-general", corpus, settings) != before


def test_unknown_model_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown model 'transformer'; available: none, "):
        reproduce_bottleneck("transformer")
    done = course("--model", "transformer", tmp_path=tmp_path)
    assert done.returncode == 2 and "unknown model 'transformer'" in done.stderr


@pytest.fixture(scope="module", params=[0, 1], ids=lambda seed: f"seed{seed}")
def headline(request, tmp_path_factory):
    """Every model, full profile, its step budget each (about 40 minutes per seed)."""
    os.environ["COURSE_PROFILE"] = "full"
    try:
        return reproduce_bottleneck(seed=request.param, progress=False,
                                    cache_dir=None).result["models"]
    finally:
        del os.environ["COURSE_PROFILE"]


@pytest.mark.slow
def test_no_attention_bleu_falls_with_length(headline):
    none = headline["none"]
    short, long = none["bleu_by_length"]["1-10"], none["bleu_by_length"]["31+"]
    assert short >= 85 and long <= 0.5 * short, none
    assert none["steps"] == BOTTLENECK_STEPS and not none["cut_short"]


@pytest.mark.slow
def test_bahdanau_holds_up_with_length(headline):
    bahdanau, none = headline["bahdanau"], headline["none"]
    long = bahdanau["bleu_by_length"]["31+"]
    assert bahdanau["bleu"] >= 95, bahdanau
    assert long >= 0.95 * bahdanau["bleu_by_length"]["1-10"], bahdanau
    assert long >= 2.5 * none["bleu_by_length"]["31+"], (bahdanau, none)


@pytest.mark.slow
def test_attention_lands_on_the_aligned_word(headline):
    for name in ("bahdanau", "luong-general"):
        assert headline[name]["alignment_accuracy"] >= 0.90, (name, headline[name])


@pytest.mark.slow
def test_every_luong_variant_beats_no_attention(headline):
    for name in ("luong-dot", "luong-general", "luong-concat", "luong-local"):
        assert headline[name]["bleu"] > headline["none"]["bleu"], (name, headline[name])


def test_measured_translators_reads_the_full_profile_records_of_one_seed(tmp_path):
    folder = tmp_path / "seed-2"
    folder.mkdir()
    record = {"bleu": 50.0, "bleu_by_length": {"1-10": 60.0}}
    (folder / "bottleneck-none.json").write_text(json.dumps(
        {"profile": "full", "models": {"none": record}}))
    (folder / "bottleneck-bahdanau.json").write_text(json.dumps(
        {"profile": "fast", "models": {"bahdanau": record}}))
    assert measured_translators(2, tmp_path) == {"none": record}
    assert measured_translators(0, tmp_path) == {}
