"""`course reproduce captioning`: the command, its JSON and figure, the model cache, and (full
profile only, `make test-full`) the measured targets of lesson 07."""

import json
from dataclasses import asdict, replace
from inspect import signature

import pytest

from course_lib.experiments import captioning as caption_experiment
from course_lib.experiments.captioning import (
    CaptioningSettings,
    caption_data,
    caption_steps,
    captioner_path,
    reproduce_captioning,
)
from course_lib.models.captioner import ShowAttendTell

from .reproduce_cli import full_profile_result, refused, run_reproduce

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
    for name in ("digits", "shapes"):
        assert result[name]["steps"] == caption_steps(name), name
        assert result[name]["cut_short"] is False, name
        # The record holds the settings its model was built from, the model's config complete.
        built = json.loads(json.dumps(asdict(CaptioningSettings.build(name, 2))))
        assert result[name]["settings"] == built, name
    assert "| digits |" in done.stdout and "| shapes |" in done.stdout


def test_one_data_set_and_reuse_of_the_saved_model(tmp_path):
    run = reproduce_captioning("digits", seed=1, progress=False, cache_dir=tmp_path)
    assert list(run.models) == ["digits"] and "shapes" not in run.result
    settings = CaptioningSettings.build("digits", 1)
    assert run.settings["digits"] == settings
    assert captioner_path("digits", settings, tmp_path).is_file()
    again = reproduce_captioning("digits", seed=1, progress=False, reuse=True,
                                 cache_dir=tmp_path)
    for key in ("exact_match", "bleu4", "localization", "params", "epochs", "train_s"):
        assert again.result["digits"][key] == run.result["digits"][key], key
    # Another seed is another model (and other data).
    assert captioner_path("digits", CaptioningSettings.build("digits", 2), tmp_path) != \
        captioner_path("digits", settings, tmp_path)


def test_a_new_data_version_is_a_new_saved_model(tmp_path, monkeypatch):
    settings = CaptioningSettings.build("shapes", 0)
    before = captioner_path("shapes", settings, tmp_path)
    monkeypatch.setattr(caption_experiment, "DATA_VERSION", caption_experiment.DATA_VERSION + 1)
    assert captioner_path("shapes", settings, tmp_path) != before


def test_unknown_data_set_and_wrong_flags_are_refused(tmp_path, capsys, monkeypatch):
    with pytest.raises(ValueError, match="unknown data set 'cifar'; available: digits, shapes"):
        reproduce_captioning("cifar")
    assert "unknown data set 'cifar'" in refused("captioning", "--dataset", "cifar",
                                                 out_dir=tmp_path, capsys=capsys,
                                                 monkeypatch=monkeypatch)
    assert "use --dataset" in refused("captioning", "--model", "bahdanau", out_dir=tmp_path,
                                      capsys=capsys, monkeypatch=monkeypatch)
    with pytest.raises(ValueError, match="unknown data set 'cifar'; available: digits, shapes"):
        CaptioningSettings.build("cifar", 0)


def test_the_settings_nest_the_complete_model_config_of_each_data_set():
    data = {name: caption_data(name, 0) for name in ("digits", "shapes")}
    digits, shapes = (CaptioningSettings.build(name, 0) for name in ("digits", "shapes"))
    # Built complete: the vocabulary of that seed's training captions and the data set's
    # image channels, never a placeholder filled in later.
    assert digits.model.vocab_size == len(data["digits"].vocab)
    assert shapes.model.vocab_size == len(data["shapes"].vocab)
    assert (digits.model.in_channels, shapes.model.in_channels) == (1, 3)
    assert ShowAttendTell(digits.model) and ShowAttendTell(shapes.model)
    assert CaptioningSettings.build("digits", 0, data["digits"].vocab) == digits
    # What the shape scenes change, and nothing else.
    assert shapes.model == replace(digits.model, vocab_size=shapes.model.vocab_size,
                                   in_channels=3, read_convs=2, gate=False,
                                   pool_before_norm=False)
    assert (shapes.train.final_lr_fraction, digits.train.final_lr_fraction) == (None, 0.05)
    assert (shapes.regularization, digits.regularization) == (0.0, 0.1)
    assert (shapes.train.steps, digits.train.steps) == (caption_steps("shapes"),
                                                        caption_steps("digits"))
    assert replace(shapes, model=digits.model, regularization=0.1,
                   train=replace(shapes.train, final_lr_fraction=0.05,
                                 steps=digits.train.steps)) == digits


def test_one_seed_decides_the_images_the_initialisation_and_the_batches(tmp_path):
    settings = CaptioningSettings.build("digits", 4)
    assert settings.seed == 4
    assert "settings" not in signature(reproduce_captioning).parameters
    with pytest.raises(TypeError):
        reproduce_captioning("digits", 4, settings=settings)
    # A changed budget is a new saved model; the same settings are the same file.
    shorter = replace(settings, train=replace(settings.train, steps=7))
    assert captioner_path("digits", shorter, tmp_path) != \
        captioner_path("digits", settings, tmp_path)
    assert captioner_path("digits", CaptioningSettings.build("digits", 4), tmp_path) == \
        captioner_path("digits", settings, tmp_path)


@pytest.fixture(scope="module", params=[0, 1], ids=lambda seed: f"seed{seed}")
def measured(request, tmp_path_factory):
    return full_profile_result(reproduce_captioning, request.param,
                               tmp_path_factory.mktemp("captioning"))


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
    for name in ("digits", "shapes"):
        assert measured[name]["steps"] == caption_steps(name), name
        assert not measured[name]["cut_short"], name
