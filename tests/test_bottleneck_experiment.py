"""`course reproduce bottleneck`: the command, its JSON and plot, the checkpoint cache, and (full
profile only, `make test-full`) the headline targets."""

import json
import os
from dataclasses import asdict, replace
from inspect import signature

import pytest

from course_lib.data.corpus import load_corpus
from course_lib.experiments.bottleneck import (
    BOTTLENECK_MODELS,
    bottleneck_config,
    reproduce_bottleneck,
)
from course_lib.experiments.catalogue import measured_records
from course_lib.experiments.translation import (
    BOTTLENECK_STEPS,
    BottleneckSettings,
    bottleneck_training,
    build_translator,
    build_vocabs,
    checkpoint_path,
    translator_from_config,
)
from course_lib.models import count_parameters
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
    assert entry["steps"] == bottleneck_training().steps
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
    for name in BOTTLENECK_MODELS:
        settings = BottleneckSettings.build(name, 1, run.vocabs)
        assert run.settings[name] == settings, name
        assert checkpoint_path(name, settings, tmp_path / "cache").is_file()
    again = reproduce_bottleneck(["bahdanau"], seed=1, progress=False, reuse=True,
                                 cache_dir=tmp_path / "cache")
    assert again.result["models"]["bahdanau"] == result["models"]["bahdanau"]
    assert len(again.history) == result["models"]["bahdanau"]["epochs"]
    # What a lesson draws before training is the architecture that was trained, and each
    # record holds the settings its model was built from: the whole tree, the model included.
    for name in BOTTLENECK_MODELS:
        assert bottleneck_config(name, seed=1) == run.models[name].config, name
        assert result["models"][name]["settings"] == asdict(run.settings[name]), name
    assert "settings" not in result  # no run-wide copy that could disagree with a model's


def test_a_changed_model_configuration_is_not_loaded_from_an_old_checkpoint(monkeypatch):
    # The cache key must cover the model's settings, or reuse would load weights trained for
    # another variant into a model of the same shapes.
    from course_lib.experiments import translation

    before = checkpoint_path("luong-general", BottleneckSettings.build("luong-general", 0))
    monkeypatch.setitem(translation.ATTENTION_MODELS, "luong-general",
                        {**translation.ATTENTION_MODELS["luong-general"], "scaled": False})
    after = BottleneckSettings.build("luong-general", 0)
    assert after.model.scaled is False and checkpoint_path("luong-general", after) != before


def test_one_seed_decides_corpus_initialisation_and_batches():
    # The seed is a field of the settings tree and nowhere else: the corpus is the settings'
    # own, the training settings hold none, and a run takes one seed, never settings beside it.
    settings = BottleneckSettings.build("none", 3)
    assert settings.corpus.seed == 3 and not hasattr(settings.train, "seed")
    assert replace(settings, seed=5).corpus.seed == 5
    assert "settings" not in signature(reproduce_bottleneck).parameters
    with pytest.raises(TypeError):
        reproduce_bottleneck("none", 3, settings=settings)


@pytest.mark.parametrize("name, width", [("none-128", 128), ("none-512", 512),
                                         ("none-1024", 1024)])
def test_each_width_variant_records_the_width_it_trains(name, width):
    # A variant's settings hold the config its model is built from, so the width recorded is
    # the width trained, in either profile.
    settings = BottleneckSettings.build(name, 0)
    assert settings.model.hidden_size == width
    vocabs = build_vocabs(load_corpus(settings.corpus))
    model = translator_from_config(settings.model)
    assert count_parameters(model) == count_parameters(build_translator("none", vocabs, width,
                                                                        settings.model.embed_dim))


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


def test_measured_records_reads_the_full_profile_records_of_one_seed(tmp_path):
    folder = tmp_path / "seed-2"
    folder.mkdir()
    record = {"bleu": 50.0, "bleu_by_length": {"1-10": 60.0}}
    (folder / "bottleneck-none.json").write_text(json.dumps(
        {"profile": "full", "models": {"none": record}}))
    (folder / "bottleneck-bahdanau.json").write_text(json.dumps(
        {"profile": "fast", "models": {"bahdanau": record}}))
    assert measured_records("bottleneck", 2, tmp_path) == {"none": {**record, "settings": {}}}
    assert measured_records("bottleneck", 0, tmp_path) == {}
    with pytest.raises(ValueError, match="unknown experiment 'bottlenek'; available: bottleneck"):
        measured_records("bottlenek", 2, tmp_path)


@pytest.mark.parametrize("width, message", [
    ((63, 32), r"width\[0\] \(the hidden size\) must be even"),
    ((0, 32), r"width\[0\] \(the hidden size\)"),
    ((64, -1), r"width\[1\] \(the embedding size\)"),
    ((64.0, 32), r"width\[0\] \(the hidden size\)"),
    ((64,), r"width must be \(hidden size, embedding size\), got \(64,\)"),
    ("64x32", r"width must be \(hidden size, embedding size\), got '64x32'"),
])
def test_a_bad_width_is_refused_by_name(width, message):
    with pytest.raises((ValueError, TypeError), match=message):
        BottleneckSettings.build("luong-general", 0, width=width)


def test_width_sets_both_sizes_and_the_cache_key():
    small = BottleneckSettings.build("luong-general", 0, width=(64, 32))
    default = BottleneckSettings.build("luong-general", 0)
    assert (small.model.hidden_size, small.model.embed_dim) == (64, 32)
    assert checkpoint_path("luong-general", small) != checkpoint_path("luong-general", default)
