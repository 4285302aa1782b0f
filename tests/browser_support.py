"""What the browser tests share: Debian's Chromium, its flags, and the check that it is there
(CI must have it; elsewhere its absence skips the test); a folder served on loopback; a page
that records its console errors and requests to other hosts."""

from __future__ import annotations

import functools
import http.server
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from course_lib.course.slide_check import CHROMIUM, CHROMIUM_ARGS
from course_lib.course.syllabus import COURSE_ROOT

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "SCREENSHOTS", "SITE_PROFILE", "Watched",
           "chromium_browser", "require_browser", "served"]


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


SCREENSHOTS = COURSE_ROOT / "build" / "screenshots"
SCREENSHOTS.mkdir(parents=True, exist_ok=True)
# `make test` checks the fast-profile site and decks; COURSE_SITE_PROFILE=full checks the full ones
SITE_PROFILE = os.environ.get("COURSE_SITE_PROFILE", "fast")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@contextmanager
def served(folder: Path) -> Iterator[str]:
    """``folder`` served on a free loopback port while the block runs; yields its base URL."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()


PAGE_TIMEOUT_MS = 120_000
class Watched:
    """A page that records console errors, failed responses and requests to other hosts."""

    def __init__(self, browser, base: str):
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        # An upper bound for a 2-core machine that also runs a test worker and its kernels:
        # a page that loads at all loads within it; the tests judge what loads, not how fast.
        self.page.set_default_timeout(PAGE_TIMEOUT_MS)
        self.base, self.errors, self.outside = base, [], []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("response", lambda r: r.status >= 400 and self.errors.append(
            f"{r.status} {r.url}"))
        self.page.on("request", lambda r: r.url.startswith(("http:", "https:", "ws:"))
                     and not r.url.startswith(base) and self.outside.append(r.url))

    def open(self, path: str) -> None:
        self.errors.clear()
        self.outside.clear()
        self.page.goto(self.base + path, wait_until="load")
        # MathJax 3 typesets after load; a page without math has nothing to wait for
        self.page.wait_for_function(
            "() => !document.querySelector('.math, .reveal') || (window.MathJax && "
            "MathJax.startup && MathJax.startup.promise)", timeout=60_000)
        self.page.evaluate("() => window.MathJax && MathJax.startup ? "
                           "MathJax.startup.promise.then(() => true) : true")
        self.page.wait_for_load_state("networkidle")

    def load_problems(self) -> list[str]:
        """What went wrong loading the page offline: console errors, failed responses,
        requests to another host, images that did not load."""
        return [*self.errors, *(f"request to {url}" for url in self.outside),
                *(f"broken image {src}" for src in self.broken_images())]

    def broken_images(self) -> list[str]:
        return self.page.evaluate("() => Array.from(document.images).filter(i => !i.complete "
                                  "|| i.naturalWidth === 0).map(i => i.src.slice(0, 80))")

    def shot(self, name: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / name))
