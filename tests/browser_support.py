"""What the browser tests share: Debian's Chromium, its flags, and the check that it is there
(CI must have it; elsewhere its absence skips the test)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from course_lib.course.slide_check import CHROMIUM, CHROMIUM_ARGS

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "chromium_browser", "require_browser"]


def require_browser(*, module_level: bool = False) -> None:
    """Fail in CI, skip elsewhere, when Playwright or Chromium is missing."""
    missing = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("playwright (pip install playwright)")
    if not Path(CHROMIUM).is_file():
        missing.append("chromium (apt-get install chromium)")
    if missing and os.environ.get("CI"):
        pytest.fail(f"CI must run the browser checks, but these are missing: {missing}")
    if missing:
        pytest.skip(f"browser checks need {' and '.join(missing)}",
                    allow_module_level=module_level)


@contextmanager
def chromium_browser() -> Iterator:
    """Debian's Chromium, headless, launched by Playwright with the course's flags."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
