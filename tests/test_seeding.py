"""seeding.py and profile.py: seeds give the same draws and profiles the right sizes:
``seed_everything``, ``make_generator``, ``COURSE_PROFILE`` and ``by_profile``."""

import random

import numpy as np
import pytest
import torch

from course_lib.profile import by_profile, get_profile, is_fast
from course_lib.seeding import make_generator, seed_everything


def draw():
    return random.random(), np.random.rand()  # noqa: NPY002 - the legacy global RNG is what seeding covers, torch.rand(3).tolist()


def test_same_seed_same_draws_different_seed_different_draws():
    seed_everything(123)
    first = draw()
    seed_everything(123)
    assert draw() == first
    seed_everything(124)
    assert draw() != first


@pytest.mark.parametrize("bad", [-1, 2**32, 1.5, "3", True])
def test_bad_seed_is_refused(bad):
    with pytest.raises(ValueError, match="seed"):
        seed_everything(bad)


def test_generator_is_independent_of_global_state():
    a = torch.rand(3, generator=make_generator(5))
    torch.manual_seed(999)
    b = torch.rand(3, generator=make_generator(5))
    assert torch.equal(a, b)


def test_deterministic_flag(monkeypatch):
    seed_everything(0, deterministic=True)
    try:
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize(("value", "expected"), [("fast", "fast"), ("FULL", "full"), ("", "full")])
def test_profile_values(monkeypatch, value, expected):
    monkeypatch.setenv("COURSE_PROFILE", value)
    assert get_profile() == expected
    assert by_profile(fast=1, full=2) == (1 if expected == "fast" else 2)
    assert is_fast() is (expected == "fast")


def test_profile_defaults_to_full(monkeypatch):
    monkeypatch.delenv("COURSE_PROFILE", raising=False)
    assert get_profile() == "full"


def test_unknown_profile_is_an_error(monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "quick")
    with pytest.raises(ValueError, match=r"'quick'.*fast, full"):
        by_profile(fast=1, full=2)
