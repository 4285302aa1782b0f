"""Lesson 03's trial: trained on reversal, one context loses accuracy with length while
re-reading the source per step keeps much more of it, at a higher price per step; bad
arguments are refused by name."""

from __future__ import annotations

import pytest

from course_lib.lessons.reencode_trial import DESIGNS, length_trial, trial_model


@pytest.fixture(scope="module")
def trial():
    return length_trial(250, max_len=8, buckets=((2, 3), (7, 8)), timing_repeats=3)


def test_one_context_falls_with_length_and_re_reading_holds_more(trial):
    short, long = trial.accuracy["one context"]
    assert short - long > 0.25, trial.accuracy  # the fall with length
    reread_short, reread_long = trial.accuracy["re-read per step"]
    assert reread_long - long > 0.1, trial.accuracy  # re-reading keeps what one context loses
    assert reread_short - reread_long < short - long, trial.accuracy
    assert trial.accuracy["attention"][1] > long + 0.15, trial.accuracy


def test_re_reading_costs_the_most_per_step(trial):
    seconds = trial.step_seconds
    assert seconds["re-read per step"] > 2 * seconds["one context"], seconds
    assert set(trial.parameters) == set(DESIGNS) and all(trial.parameters.values())


@pytest.mark.parametrize(("arguments", "error", "message"), [
    ({"steps": 0}, ValueError, "steps"),
    ({"steps": "ten"}, TypeError, "steps"),
    ({"steps": 1, "max_len": 1}, ValueError, "max_len"),
])
def test_bad_arguments_are_refused_by_name(arguments, error, message):
    with pytest.raises(error, match=message):
        length_trial(**arguments)


def test_an_unknown_design_is_refused():
    with pytest.raises(ValueError, match="design must be one of"):
        trial_model("transformer", 8, 8)
