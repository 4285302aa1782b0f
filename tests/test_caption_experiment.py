"""`course reproduce captioning`: the command, its JSON and figure, the model cache, and (full
profile only, `make test-full`) the measured targets of lesson 07."""

import json
import os
from dataclasses import replace

import pytest

from course_lib.data.captions import caption_set, caption_vocab
from course_lib.experiments import captioning as caption_experiment
from course_lib.experiments.captioning import (
    CaptioningSettings,
    captioner_path,
    reproduce_captioning,
)
from course_lib.models.captioner import ShowAttendTell

from .reproduce_cli import run_reproduce

METRIC_KEYS = {"exact_match", "bleu4", "localization"}


def course(*args, tmp_path):
    return run_reproduce("captioning", *args, out_dir=tmp_path)


def test_command_writes_the_promised_json_and_figure(tmp_path):
    done = course("--seed", "2", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "seed-2" / "captioning.json").read_text())
    for name in ("digits", "shapes"):
        entry = result[name]
        assert set(entry) >= METRIC_KEYS
        assert 0 <= entry["exact_match"] <= 1 and 0 <= entry["localization"] <= 1
        assert 0 <= entry["bleu4"] <= 100 and entry["params"] > 0
    assert result["wall_s"] > 0 and result["seed"] == 2
    assert (tmp_path / "seed-2" / "captioning.png").stat().st_size > 10_000
    settings = CaptioningSettings.for_profile(2)
    for name in ("digits", "shapes"):
        assert result[name]["steps"] == settings.for_dataset(name).steps, name
        assert result[name]["cut_short"] is False, name
    assert "| digits |" in done.stdout and "| shapes |" in done.stdout


def test_one_data_set_and_reuse_of_the_saved_model(tmp_path):
    run = reproduce_captioning("digits", seed=1, progress=False, cache_dir=tmp_path)
    assert list(run.models) == ["digits"] and "shapes" not in run.result
    settings = CaptioningSettings.for_profile(1)
    assert captioner_path("digits", settings, tmp_path).is_file()
    again = reproduce_captioning("digits", seed=1, progress=False, reuse=True,
                                 cache_dir=tmp_path)
    for key in ("exact_match", "bleu4", "localization", "params", "epochs", "train_s"):
        assert again.result["digits"][key] == run.result["digits"][key], key
    # Another seed is another model (and other data).
    assert captioner_path("digits", CaptioningSettings.for_profile(2), tmp_path) != \
        captioner_path("digits", settings, tmp_path)


def test_a_new_data_version_is_a_new_saved_model(tmp_path, monkeypatch):
    settings = CaptioningSettings.for_profile(0)
    before = captioner_path("shapes", settings, tmp_path)
    monkeypatch.setattr(caption_experiment, "DATA_VERSION", caption_experiment.DATA_VERSION + 1)
    assert captioner_path("shapes", settings, tmp_path) != before


def test_unknown_data_set_and_wrong_flags_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown data set 'cifar'; available: digits, shapes"):
        reproduce_captioning("cifar")
    done = course("--dataset", "cifar", tmp_path=tmp_path)
    assert done.returncode == 2 and "unknown data set 'cifar'" in done.stderr
    done = course("--model", "bahdanau", tmp_path=tmp_path)
    assert done.returncode == 2 and "use --dataset" in done.stderr
    with pytest.raises(ValueError, match=r"by_dataset names unknown data sets \[.cifar.\]"):
        replace(CaptioningSettings.for_profile(0), by_dataset={"cifar": {}})


def test_the_settings_nest_the_model_config_and_each_data_set_fills_in_its_own():
    settings = CaptioningSettings.for_profile(0)
    vocab = caption_vocab([caption_set("digits", 4, "train", 0)])
    digits = settings.model_config("digits", vocab)
    assert digits == replace(settings.model, vocab_size=len(vocab), in_channels=1)
    shapes = settings.model_config("shapes", vocab)
    assert (shapes.in_channels, shapes.read_convs) == (3, 2)
    assert ShowAttendTell(digits)  # buildable once the vocabulary is known
    with pytest.raises(ValueError, match="vocab_size is 0"):
        ShowAttendTell(settings.model)


def test_a_data_set_can_change_its_settings_without_touching_the_other(tmp_path):
    settings = CaptioningSettings.for_profile(0)
    assert settings.for_dataset("digits") == replace(settings, by_dataset={})
    shapes = settings.for_dataset("shapes")
    assert shapes.model == replace(settings.model, read_convs=2, gate=False,
                                   pool_before_norm=False)
    assert (shapes.final_lr_fraction, settings.final_lr_fraction) == (None, 0.05)
    assert (shapes.regularization, settings.regularization) == (0.0, 0.1)
    wide = replace(settings.model, read_convs=3)
    other = replace(settings, by_dataset={"digits": {"model": wide, "steps": 7},
                                          "shapes": settings.by_dataset["shapes"]})
    assert other.for_dataset("digits").model.read_convs == 3
    assert other.for_dataset("digits").for_dataset("digits") == other.for_dataset("digits")
    # A change to one data set's recipe is a new saved model for it and the same for the other.
    assert captioner_path("digits", other, tmp_path) != captioner_path("digits", settings,
                                                                       tmp_path)
    assert captioner_path("shapes", other, tmp_path) == captioner_path("shapes", settings,
                                                                       tmp_path)
    with pytest.raises(ValueError, match=r"by_dataset\['digits'\] sets unknown settings \['lr0'\]"):
        replace(settings, by_dataset={"digits": {"lr0": 1.0}})


@pytest.fixture(scope="module", params=[0, 1], ids=lambda seed: f"seed{seed}")
def measured(request, tmp_path_factory):
    if os.environ.get("COURSE_PROFILE") != "full":
        pytest.skip("the targets are for the full profile (make test-full)")
    return reproduce_captioning(seed=request.param, progress=False,
                                out_dir=tmp_path_factory.mktemp("captioning")).result


@pytest.mark.slow
def test_digit_strips_are_read_exactly_with_attention_on_each_digit(measured):
    assert measured["digits"]["exact_match"] >= 0.95
    assert measured["digits"]["localization"] >= 0.95


@pytest.mark.slow
def test_shape_scenes_are_described_with_attention_on_each_object(measured):
    assert measured["shapes"]["exact_match"] >= 0.80
    assert measured["shapes"]["localization"] >= 0.80


@pytest.mark.slow
def test_each_data_set_trains_for_its_step_budget(measured):
    settings = CaptioningSettings.for_profile(measured["seed"])
    for name in ("digits", "shapes"):
        assert measured[name]["steps"] == settings.for_dataset(name).steps, name
        assert not measured[name]["cut_short"], name
