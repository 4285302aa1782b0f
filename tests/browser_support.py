"""What the browser tests share: Debian's Chromium, its flags, and the check that it is there
(CI must have it; elsewhere its absence skips the test)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


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
