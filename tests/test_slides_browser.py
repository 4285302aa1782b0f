"""The instructors' decks in a real browser (headless Chromium driven by Playwright): every
deck loads offline, typeset, with its figures, no serious accessibility violation and no slide
whose content does not fit. The decks are built from the lessons executed once for the session
(tests/test_lessons_run.py), and each is opened once: the fit `course slides` measures after
building is measured here on the page the test opens.
"""

from __future__ import annotations

import re

import pytest

from course_lib.course.slide_check import deck_problems, measure_open_deck
from course_lib.course.slides import build_slides
from course_lib.course.syllabus import LESSONS
from tests.accessibility import axe_violations
from tests.browser_support import SITE_PROFILE, Watched, require_browser, served

require_browser(module_level=True)


@pytest.fixture(scope="module")
def slides_url():
    with served(build_slides(SITE_PROFILE, check=False)) as url:
        yield url


# ---- the slides --------------------------------------------------------------------------------

@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.number for lesson in LESSONS])
def test_a_deck_loads_offline_typeset_with_figures_and_every_slide_fits(browser, slides_url,
                                                                        lesson):
    watched = Watched(browser, slides_url)
    watched.open(f"{lesson.number}_{lesson.slug}.html")
    page = watched.page
    page.wait_for_function("() => window.Reveal && Reveal.isReady()")
    assert watched.load_problems() == []
    assert page.evaluate("() => Reveal.getTotalSlides()") >= 5
    if page.locator(".reveal section").filter(has_text=re.compile(r"\\\(|\\\[")).count():
        pytest.fail("a slide shows untypeset math")
    assert axe_violations(page) == []
    deck = f"{lesson.number}_{lesson.slug}.html"
    assert deck_problems(deck, measure_open_deck(page)) == []
    # no fade between slides, so the picture is the slide's own
    page.evaluate("() => { Reveal.configure({transition: 'none', backgroundTransition: 'none'});"
                  " Reveal.slide(2); }")
    page.wait_for_timeout(100)
    watched.shot(f"slides-{SITE_PROFILE}-{lesson.number}.png")
    page.close()


