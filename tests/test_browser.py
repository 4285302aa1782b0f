"""The course's site in a real browser: headless Chromium (Debian's ``chromium``) driven by
Playwright. The site is built in the fast profile (or as ``COURSE_SITE_PROFILE`` says) from the
lessons executed once for the session (tests/test_lessons_run.py); every page loads with no
console error and no request to another host, its images load, MathJax typesets its equations,
saved widgets render and respond, and every link resolves.

The decks are checked in tests/test_slides_browser.py, the live lab in
tests/test_lab_browser.py. Screenshots go to ``build/screenshots/`` (ignored by git). Where
Chromium or Playwright is missing the module is skipped with the command that installs it,
except in CI, where that is a failure.
"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from course_lib.course.links import broken_html_links
from course_lib.course.site import DOC_PAGES, build_site
from course_lib.course.syllabus import COURSE_ROOT, LESSONS
from course_lib.widgets.quiz import load_bank, question_data
from tests.accessibility import axe_violations
from tests.browser_support import SCREENSHOTS, SITE_PROFILE, Watched, require_browser, served

require_browser(module_level=True)


@pytest.fixture(scope="module")
def site_html():
    return build_site(SITE_PROFILE).html


@pytest.fixture(scope="module")
def site_url(site_html):
    with served(site_html) as url:
        yield url


@pytest.fixture(scope="module")
def lesson_pages(browser, site_url):
    """Each lesson's page, opened (and typeset) once for every test of this module that reads or
    works it: opening a lesson costs seconds of the browser's time. A test that moves a control
    or answers a question leaves the page so; no later test reads what it changed."""
    opened: dict[str, Watched] = {}

    def page_of(number: str) -> Watched:
        if number not in opened:
            lesson = next(lesson for lesson in LESSONS if lesson.number == number)
            opened[number] = Watched(browser, site_url)
            opened[number].open(f"notebooks/{lesson.number}_{lesson.slug}.html")
        return opened[number]

    yield page_of
    for watched in opened.values():
        watched.page.close()


# ---- the site ----------------------------------------------------------------------------------

def lesson_has_widgets(lesson) -> bool:
    return "widgets." in (COURSE_ROOT / lesson.notebook).read_text()


# the lessons whose interactive outputs must respond on the site (issue: at least these)
CONTROL_LESSONS = {"01", "04", "08", "09"}
EXPLORER_LESSONS = {"04", "05", "07", "09", "10"}
# a Markdown table's separator row shown as text: the renderer did not make it a table
RAW_TABLE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?\s*$", re.M)


def page_problems(page) -> list[str]:
    """What a learner must never see on a lesson page: a Markdown table left as text, a folder
    of the machine that built the site, an ipywidgets control that would move without effect."""
    text = page.locator("article").inner_text()
    problems = [f"raw Markdown table: {m.group(0).strip()[:60]}" for m in RAW_TABLE.finditer(text)]
    for folder in {str(COURSE_ROOT), str(Path.home())} - {"/"}:
        if folder in page.content():
            problems.append(f"the build machine's folder {folder} is on the page")
    frozen = page.locator(".widget-slider, .widget-dropdown, .widget-checkbox, .widget-select")
    if frozen.count():
        problems.append(f"{frozen.count()} saved ipywidgets controls (they move without effect)")
    return problems


@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.number for lesson in LESSONS])
def test_a_lesson_page_loads_offline_with_figures_math_and_widgets(lesson_pages, lesson):
    watched = lesson_pages(lesson.number)
    assert watched.load_problems() == []
    page = watched.page
    assert page.locator("article img").count() > 0, "no figure on the page"
    text = page.locator("article").inner_text()
    assert "$$" not in text and "\\(" not in text and "\\[" not in text, "untypeset math"
    if page.locator("article .math").count():
        assert page.locator("mjx-container").count() >= page.locator("article .math").count()
    assert page_problems(page) == []
    assert page.locator("[data-course-quiz]").count() >= 4, "fewer than four questions"
    if lesson.number in CONTROL_LESSONS:
        assert page.locator("[data-course-control]").count() > 0, "no control that responds"
    if lesson.number in EXPLORER_LESSONS:
        assert page.locator('[data-course-widget="attention-explorer"]').count() > 0
    assert axe_violations(page) == []
    watched.shot(f"site-{SITE_PROFILE}-{lesson.number}.png")


def test_the_page_checks_catch_a_raw_table_a_build_path_and_a_frozen_control(browser):
    page = browser.new_page()
    page.set_content(f"<article><p>| model | BLEU |</p><p>|---|---|</p><p>{COURSE_ROOT}/.cache/"
                     "models</p><div class='widget-slider'></div></article>")
    problems = page_problems(page)
    assert [p.split(":")[0].split(" ")[0] for p in problems] == ["raw", "the", "1"], problems
    page.set_content("<article><table><tr><td>| a |</td></tr></table><p>.cache/models</p>"
                     "</article>")
    assert page_problems(page) == []
    page.close()


def embedded_data(widget) -> dict:
    """The data saved with a widget on the page: the JSON block of its static copy."""
    return json.loads(widget.evaluate(
        "el => el.closest('[data-course-embed]').querySelector("
        "'script[type=\"application/json\"]').textContent"))


@pytest.mark.parametrize("number", sorted(EXPLORER_LESSONS))
def test_the_explorer_highlights_exactly_row_t_of_the_saved_tensor(lesson_pages, number):
    watched = lesson_pages(number)
    page = watched.page
    explorers = page.locator('[data-course-widget="attention-explorer"]')
    for e in range(explorers.count()):
        explorer = explorers.nth(e)
        data = embedded_data(explorer)
        view = data["views"][0]  # the view shown first
        explorer.scroll_into_view_if_needed()
        last = len(view["queries"]) - 1
        for t in sorted({0, 1, last // 2, last}):
            explorer.locator(f'button[data-query-index="{t}"]').hover()
            strip = explorer.locator('[data-role="active-row"]')
            assert strip.get_attribute("data-query-index") == str(t)
            row = [float(w) for w in strip.locator("[data-weight]").evaluate_all(
                "cells => cells.map(c => c.dataset.weight)")]
            assert row == pytest.approx(view["weights"][t], abs=1e-9)
            assert sum(row) == pytest.approx(1, abs=1e-3)
            masked = view["masked"][t] if view["masked"] else [False] * len(row)
            assert all(w == 0 for w, m in zip(row, masked, strict=True) if m)
        if number in {"09", "10"}:  # the decoder's self-attention shows the causal mask
            explorer.locator('select[data-explorer-selector="kind"]').select_option(
                "decoder self")
            explorer.locator('button[data-query-index="0"]').hover()
            cells = explorer.locator('[data-role="active-row"] [data-weight]')
            masked = cells.evaluate_all("cs => cs.map(c => c.dataset.masked === 'true')")
            assert not masked[0] and all(masked[1:]), masked
            assert float(cells.first.get_attribute("data-weight")) == pytest.approx(1)
        if e == 0 and number in {"04", "07", "10"}:
            explorer.locator('button[data-query-index="1"]').hover()
            explorer.screenshot(path=str(SCREENSHOTS / f"explorer-{number}.png"))
    assert watched.errors == []


@pytest.mark.parametrize("number", sorted(CONTROL_LESSONS))
def test_moving_a_control_on_the_site_changes_its_output(lesson_pages, number):
    watched = lesson_pages(number)
    page = watched.page
    controls = page.locator("[data-course-control]")
    for c in range(controls.count()):
        control = controls.nth(c)
        output = control.evaluate_handle("el => el.closest('.course-control')"
                                         ".querySelector('[data-course-output]')")
        before = output.evaluate("el => el.innerHTML")
        control.scroll_into_view_if_needed()
        if c == 0:
            page.screenshot(path=str(SCREENSHOTS / f"control-{number}-before.png"))
        kind = control.evaluate("el => el.tagName + ':' + (el.type || '')")
        if kind == "SELECT:select-one":
            options = control.locator("option").count()
            control.select_option(index=(int(control.input_value()) + 1) % options)
        elif kind == "INPUT:checkbox":
            control.click()
        else:
            control.focus()
            page.keyboard.press("End" if control.input_value() != control.get_attribute("max")
                                else "Home")
        after = output.evaluate("el => el.innerHTML")
        assert after != before, f"control {c} ({kind}) moved without changing its output"
        if c == 0:
            page.screenshot(path=str(SCREENSHOTS / f"control-{number}-after.png"))
    assert watched.errors == []


def test_a_question_on_the_site_explains_a_wrong_answer_and_confirms_the_right(lesson_pages):
    bank = load_bank()
    page = lesson_pages("04").page
    choice = page.locator("[data-course-quiz]").filter(has=page.locator("button[data-option]"))
    root = choice.first
    question = bank[root.get_attribute("data-course-quiz")]
    root.scroll_into_view_if_needed()
    wrong = next(i for i, o in enumerate(question.options) if not o.correct)
    root.locator(f'[data-option="{wrong}"]').click()
    feedback = root.locator("[data-feedback]")
    assert feedback.get_attribute("data-result") == "wrong"
    expected = page.evaluate("(html) => { const d = document.createElement('div'); "
                             "d.innerHTML = html; return d.textContent.trim(); }",
                             question_data(question)["options"][wrong]["why"])
    assert " ".join(expected.split()) in " ".join(feedback.inner_text().split())
    root.screenshot(path=str(SCREENSHOTS / "quiz-wrong.png"))
    root.locator(f'[data-option="{question.correct_index}"]').click()
    assert feedback.get_attribute("data-result") == "right"
    root.screenshot(path=str(SCREENSHOTS / "quiz-right.png"))


def test_the_front_page_is_the_course_map_and_docs_exercises_and_search_work(browser, site_url):
    watched = Watched(browser, site_url)
    watched.open("index.html")  # redirects to lesson 00
    assert "00_start_here" in watched.page.url
    for page in [f"docs/{name}.html" for name in DOC_PAGES] + ["exercises.html"]:
        watched.open(page)
        assert watched.load_problems() == [], page
        assert axe_violations(watched.page) == [], page
    links = watched.page.eval_on_selector_all("a.download", "as => as.map(a => a.href)")
    assert len(links) == len(LESSONS)
    with urllib.request.urlopen(links[1]) as response:
        assert json.loads(response.read())["cells"], "a download is not a notebook"
    watched.open("search.html?q=Bahdanau")
    watched.page.wait_for_selector("#search-results li", timeout=30_000)
    results = watched.page.locator("#search-results li a").all_inner_texts()
    assert any("Bahdanau" in result for result in results), results
    watched.shot(f"site-{SITE_PROFILE}-search.png")
    watched.page.close()


def test_every_link_of_the_site_resolves_and_practice_downloads_the_exercises(site_html):
    assert broken_html_links(site_html) == []
    page = (site_html / "notebooks" / "04_bahdanau.html").read_text()
    download = re.search(r'href="([^"]*04_bahdanau_exercises\.ipynb)"', page)
    assert download, "lesson 04's Practice cell has no link to its exercises"
    saved = json.loads((site_html / "notebooks" / download.group(1)).read_text())
    assert saved["cells"][0]["source"], "the download is not the exercise notebook"


