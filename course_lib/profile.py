"""The notebook profile: one switch, ``COURSE_PROFILE=fast|full``.

``full`` (the default) is what a learner runs: real sizes, a few minutes of training per lesson.
``fast`` is for CI and quick checks: tiny sizes, a few seconds per notebook. Notebooks never
test the profile themselves; they ask :func:`by_profile` for a value::

    epochs = by_profile(fast=1, full=20)
"""

from __future__ import annotations

import os
from typing import TypeVar

PROFILE_ENV = "COURSE_PROFILE"
PROFILES = ("fast", "full")
DEFAULT_PROFILE = "full"

T = TypeVar("T")


def get_profile() -> str:
    """The active profile, ``"fast"`` or ``"full"``; anything else is an error."""
    value = os.environ.get(PROFILE_ENV, DEFAULT_PROFILE).strip().lower() or DEFAULT_PROFILE
    if value not in PROFILES:
        raise ValueError(
            f"{PROFILE_ENV}={os.environ[PROFILE_ENV]!r} is not a profile; expected one of "
            f"{', '.join(PROFILES)}."
        )
    return value


def is_fast() -> bool:
    return get_profile() == "fast"


def by_profile(*, fast: T, full: T) -> T:
    """The value for the active profile: ``fast`` under ``COURSE_PROFILE=fast``, else ``full``."""
    return fast if is_fast() else full
