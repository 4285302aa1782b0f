"""What every experiment shares (`experiments/runs.py`): one `TrainSettings` nested as `train` in
every experiment's settings, checked once, choosing one learning-rate schedule, and read by every
training function for everything it passes to `fit`."""

import math
from dataclasses import fields, replace

import pytest
import torch

from course_lib.experiments import captioning, transformer, translation
from course_lib.experiments.catalogue import REGISTRY
from course_lib.experiments.runs import TrainSettings

TRAIN_FIELDS = {f.name for f in fields(TrainSettings)}


@pytest.mark.parametrize("experiment", REGISTRY.names())
def test_every_experiment_nests_its_training_settings_as_train(experiment):
    for model in REGISTRY[experiment].models:
        settings = REGISTRY[experiment].settings(model, 0)
        assert isinstance(settings.train, TrainSettings), (experiment, model)
        flat = TRAIN_FIELDS & {f.name for f in fields(settings)}
        assert not flat, f"{experiment} {model}: training fields outside train: {flat}"


def rates(train: TrainSettings, steps: int) -> list[float]:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=train.lr)
    scheduler = train.scheduler(optimizer)
    seen = []
    for _ in range(steps):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
    return seen


def test_one_schedule_is_chosen_by_the_settings():
    warm = TrainSettings(lr=0.5, steps=40, final_lr_fraction=None, warmup_steps=8)
    assert rates(warm, 40) == pytest.approx(
        [0.5 * min(s / 8, math.sqrt(8 / s)) for s in range(1, 41)])
    cosine = TrainSettings(lr=0.5, steps=10, final_lr_fraction=0.1)
    assert rates(cosine, 12) == pytest.approx(
        [0.5 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1, n / 10)))) for n in range(12)])
    assert rates(TrainSettings(lr=0.5, final_lr_fraction=None), 5) == [0.5] * 5


@pytest.mark.parametrize("changes, error", [
    ({"batch_size": 0}, "train.batch_size must be a positive int, got 0"),
    ({"batch_size": True}, "train.batch_size must be a positive int, got True"),
    ({"steps": 2.5}, "train.steps must be a positive int, got 2.5"),
    ({"lr": 0.0}, "train.lr must be positive, got 0.0"),
    ({"clip_grad_norm": -1.0}, "train.clip_grad_norm must be positive, got -1.0"),
    ({"max_minutes": 0}, "train.max_minutes must be positive, got 0"),
    ({"warmup_steps": 10}, r"give warmup_steps \(10\) or final_lr_fraction \(0.05\), not both"),
])
def test_bad_training_settings_are_refused_by_name(changes, error):
    with pytest.raises(ValueError, match=error):
        TrainSettings(**changes)


class StopAtFit(Exception):
    pass


@pytest.fixture
def fit_calls(monkeypatch):
    """Each experiment module's ``fit``, replaced by one that records its arguments and stops."""
    calls = []

    def fake_fit(model, optimizer, batches, loss_fn, **kwargs):
        calls.append({"lr": optimizer.param_groups[0]["initial_lr"]
                      if "initial_lr" in optimizer.param_groups[0]
                      else optimizer.param_groups[0]["lr"], **kwargs})
        raise StopAtFit

    for module in (translation, captioning, transformer):
        monkeypatch.setattr(module, "fit", fake_fit)
    return calls


def factor(train: TrainSettings, done: int) -> float:
    """The rate's factor after ``done`` steps, from the formulas (not from the code)."""
    if train.warmup_steps is not None:
        step = done + 1
        return min(step / train.warmup_steps, math.sqrt(train.warmup_steps / step))
    if train.final_lr_fraction is not None:
        f = train.final_lr_fraction
        return f + (1 - f) * 0.5 * (1 + math.cos(math.pi * min(1, done / train.steps)))
    return 1.0


def assert_reaches_fit(call: dict, train: TrainSettings) -> None:
    assert call["lr"] == train.lr
    assert call["max_steps"] == train.steps
    assert call["clip_grad_norm"] == train.clip_grad_norm
    assert call["max_time_s"] == 60.0 * train.max_minutes
    scheduler = call["scheduler"]
    if train.warmup_steps is None and train.final_lr_fraction is None:
        assert scheduler is None
    else:
        assert [scheduler.lr_lambdas[0](n) for n in range(2 * train.steps)] == pytest.approx(
            [factor(train, n) for n in range(2 * train.steps)])


ODD = {"lr": 7e-4, "steps": 7, "clip_grad_norm": 0.37, "max_minutes": 2.0}


def test_every_training_function_takes_its_training_from_train(fit_calls):
    """Distinctive values in ``train`` reach ``fit``: no training setting is hard-coded."""
    bottleneck = REGISTRY["bottleneck"].settings("none", 0)
    corpus = translation.load_corpus(bottleneck.corpus)
    vocabs = translation.build_vocabs(corpus)
    train = replace(bottleneck.train, batch_size=4, **ODD)
    with pytest.raises(StopAtFit):
        translation.train_translator(translation.translator_class("none")(bottleneck.model),
                                     corpus, vocabs, train, "cpu")
    assert_reaches_fit(fit_calls[-1], train)

    for name in ("digits", "shapes"):
        settings = REGISTRY["captioning"].settings(name, 0)
        settings = replace(settings, train=replace(settings.train, **ODD))
        with pytest.raises(StopAtFit):
            captioning.train_captioner(captioning.ShowAttendTell(settings.model),
                                       captioning.caption_data(name, 0), settings, "cpu")
        assert_reaches_fit(fit_calls[-1], settings.train)

    settings = REGISTRY["transformer"].settings("transformer", 0)
    settings = replace(settings, train=replace(settings.train, batch_size=4, **ODD))
    with pytest.raises(StopAtFit):
        transformer.train_transformer(transformer.Transformer(settings.model), corpus, vocabs,
                                      settings, "cpu")
    assert_reaches_fit(fit_calls[-1], settings.train)
    assert settings.train.warmup_steps is not None
