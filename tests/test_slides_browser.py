"""The instructors' decks in a real browser (headless Chromium driven by Playwright): every
deck loads offline, typeset, with its figures and no serious accessibility violation. The
decks are built from the lessons executed once for the session (tests/test_lessons_run.py).
"""

from __future__ import annotations

import re

import pytest

from course_lib.course.slides import build_slides
from course_lib.course.syllabus import LESSONS
from tests.accessibility import axe_violations
from tests.browser_support import SITE_PROFILE, Watched, require_browser, served

require_browser(module_level=True)


@pytest.fixture(scope="module")
def slides_url():
    with served(build_slides(SITE_PROFILE)) as url:
        yield url


# ---- the slides --------------------------------------------------------------------------------

@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.number for lesson in LESSONS])
def test_a_deck_loads_offline_with_typeset_math_and_figures(browser, slides_url, lesson):
    watched = Watched(browser, slides_url)
    watched.open(f"{lesson.number}_{lesson.slug}.html")
    page = watched.page
    page.wait_for_function("() => window.Reveal && Reveal.isReady()")
    assert watched.load_problems() == []
    assert page.evaluate("() => Reveal.getTotalSlides()") >= 5
    if page.locator(".reveal section").filter(has_text=re.compile(r"\\\(|\\\[")).count():
        pytest.fail("a slide shows untypeset math")
    assert axe_violations(page) == []
    page.evaluate("() => Reveal.slide(2)")
    page.wait_for_timeout(1000)  # the fade between slides
    watched.shot(f"slides-{SITE_PROFILE}-{lesson.number}.png")
    page.close()


