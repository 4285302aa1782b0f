"""Measure every slide of a reveal.js deck in Chromium: a slide whose content reaches past the
slide's edges, or hides in a box that scrolls, is reported by deck, number and heading.
``course slides`` runs it after building (where Playwright and Chromium are installed) and fails
on any such slide; the browser tests run it too."""

from __future__ import annotations

import concurrent.futures
import functools
import http.server
import shutil
import threading
from pathlib import Path

# Debian's Chromium, and the flags it needs headless (as root, in containers and CI)
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
# Per slide, in the slide's own pixels: how far its content reaches (the union of its
# elements' boxes, less MathJax's invisible copy for screen readers), and any element that
# hides content by scrolling.
MEASURE_SLIDE = """() => {
  const slide = Reveal.getCurrentSlide(), scale = Reveal.getScale();
  const box = slide.getBoundingClientRect();
  let right = 0, bottom = 0;
  for (const element of slide.querySelectorAll('*')) {
    const rect = element.getBoundingClientRect();
    if (rect.width === 0 || rect.height === 0 || element.closest('mjx-assistive-mml')) continue;
    right = Math.max(right, (rect.right - box.left) / scale);
    bottom = Math.max(bottom, (rect.bottom - box.top) / scale);
  }
  const scrolled = Array.from(slide.querySelectorAll('*')).filter(element => {
    const style = getComputedStyle(element);
    return /auto|scroll/.test(style.overflowX + style.overflowY) &&
      (element.scrollWidth > element.clientWidth + 1 ||
       element.scrollHeight > element.clientHeight + 1);
  }).length;
  const heading = slide.querySelector('h1, h2, h3');
  return {width: Reveal.getConfig().width, height: Reveal.getConfig().height, right, bottom,
          scrolled, heading: heading ? heading.textContent.trim() : ''};
}"""


def measure_deck(page, url: str) -> list[dict]:
    """Open the deck at ``url`` in the Playwright ``page`` and measure every slide
    (:func:`measure_open_deck`)."""
    page.goto(url, wait_until="load")
    return measure_open_deck(page)


def measure_open_deck(page) -> list[dict]:
    """Measure every slide (:data:`MEASURE_SLIDE`) of the deck open in the Playwright ``page``,
    once its equations are typeset and fitted."""
    page.wait_for_function("() => window.Reveal && Reveal.isReady() && window.MathJax && "
                           "MathJax.startup && MathJax.startup.promise", timeout=60_000)
    page.evaluate("() => MathJax.startup.promise.then(() => document.fonts.ready)")
    found = []
    for index in range(page.evaluate("() => Reveal.getTotalSlides()")):
        page.evaluate(f"() => Reveal.slide({index})")
        page.wait_for_timeout(50)
        found.append(page.evaluate(MEASURE_SLIDE))
    return found


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def overflow_text(deck: str, number: int, slide: dict) -> str | None:
    """How slide ``number`` of ``deck`` overflows, from its measurement; None if it fits."""
    if (slide["right"] <= slide["width"] + 1 and slide["bottom"] <= slide["height"] + 1
            and not slide["scrolled"]):
        return None
    return (f'{deck}, slide {number} "{slide["heading"][:60]}": content '
            f'{slide["right"]:.0f} × {slide["bottom"]:.0f} px on a '
            f'{slide["width"]} × {slide["height"]} slide'
            + (", partly hidden in a scrolled box" if slide["scrolled"] else ""))


def deck_problems(deck: str, measured: list[dict]) -> list[str]:
    """:func:`overflow_text` of every slide of ``deck`` that does not fit, in order."""
    return [problem for number, slide in enumerate(measured, start=1)
            if (problem := overflow_text(deck, number, slide))]


def _measure_decks(base: str, decks: list[str]) -> list[str]:
    from playwright.sync_api import sync_playwright

    problems = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 960, "height": 700})
        for deck in decks:
            problems += deck_problems(deck, measure_deck(page, base + deck))
        browser.close()
    return problems


def deck_overflows(folder: Path, decks: list[str]) -> list[str] | None:
    """Each slide of ``decks`` (files in ``folder``) whose content reaches past the slide's
    edges or hides in a scrolled box, as 'deck, slide N "heading": W × H px on a W × H slide';
    None where Playwright or Chromium is missing.

    The browser runs in a thread of its own, so this works from a caller that already runs an
    asyncio loop (a notebook, or a test that holds a Playwright browser)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return None
    if not Path(CHROMIUM).is_file():
        return None
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(_measure_decks, f"http://127.0.0.1:{server.server_port}/",
                               decks).result()
    finally:
        server.shutdown()
