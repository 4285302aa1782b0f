"""Paths as messages show them: no folder of the machine that ran the lesson."""

from __future__ import annotations

from pathlib import Path

from course_lib.paths import COURSE_ROOT, cache_dir, display_path


def test_a_path_in_the_checkout_is_shown_relative_to_it():
    assert display_path(cache_dir("models")) == str(Path(".cache") / "models")
    assert display_path(COURSE_ROOT / ".venv" / "bin" / "python") == ".venv/bin/python"


def test_a_path_under_home_is_shown_from_tilde_and_others_as_they_are():
    assert display_path(Path.home() / ".pyenv" / "python") == "~/.pyenv/python"
    assert display_path(Path("/opt/elsewhere")) == "/opt/elsewhere"
