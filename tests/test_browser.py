"""The course in a real browser: headless Chromium (Debian's ``chromium``) driven by Playwright.

- the site (built in the fast profile, or as ``COURSE_SITE_PROFILE`` says): every page loads with
  no console error and no request to another host, its images load, MathJax typesets its
  equations, saved widgets render;
- the slides: every deck loads offline, typeset, with its figures;
- the live lab: a lesson runs all its cells with no error, and moving a slider redraws a figure;
- an exercise as a learner meets it: a wrong answer makes the self-check fail, the right one
  passes.

Screenshots go to ``build/screenshots/`` (ignored by git). Where Chromium or Playwright is
missing the module is skipped with the command that installs it, except in CI, where that is a
failure.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import threading
import urllib.request
from pathlib import Path

import pytest

from course_lib.course.execute import kernel_environment
from course_lib.course.links import broken_html_links
from course_lib.course.site import DOC_PAGES, build_site
from course_lib.course.slides import build_slides
from course_lib.course.syllabus import COURSE_ROOT, LESSONS
from course_lib.widgets.quiz import load_bank, question_data
from tests.accessibility import axe_violations
from tests.browser_support import chromium_browser, require_browser
from tests.lab_support import START_PAGE, start_make_lab

SCREENSHOTS = COURSE_ROOT / "build" / "screenshots"
SCREENSHOTS.mkdir(parents=True, exist_ok=True)


require_browser(module_level=True)

# ---- fixtures ----------------------------------------------------------------------------------

class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def browser():
    with chromium_browser() as chromium:
        yield chromium


def serve(folder: Path):
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}/"


# `make test` checks the fast-profile site and decks; COURSE_SITE_PROFILE=full checks the full ones
SITE_PROFILE = os.environ.get("COURSE_SITE_PROFILE", "fast")


@pytest.fixture(scope="module")
def site_html():
    return build_site(SITE_PROFILE).html


@pytest.fixture(scope="module")
def site_url(site_html):
    server, url = serve(site_html)
    yield url
    server.shutdown()


@pytest.fixture(scope="module")
def slides_url():
    server, url = serve(build_slides(SITE_PROFILE))
    yield url
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

    def broken_images(self) -> list[str]:
        return self.page.evaluate("() => Array.from(document.images).filter(i => !i.complete "
                                  "|| i.naturalWidth === 0).map(i => i.src.slice(0, 80))")

    def shot(self, name: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / name))


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
def test_a_lesson_page_loads_offline_with_figures_math_and_widgets(browser, site_url, lesson):
    watched = Watched(browser, site_url)
    watched.open(f"notebooks/{lesson.number}_{lesson.slug}.html")
    page = watched.page
    assert watched.errors == [] and watched.outside == []
    assert watched.broken_images() == []
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
    page.close()


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


def open_lesson(browser, site_url, number: str) -> Watched:
    """Lesson ``number``'s page of the site, opened and watched."""
    lesson = next(lesson for lesson in LESSONS if lesson.number == number)
    watched = Watched(browser, site_url)
    watched.open(f"notebooks/{lesson.number}_{lesson.slug}.html")
    return watched


def embedded_data(widget) -> dict:
    """The data saved with a widget on the page: the JSON block of its static copy."""
    return json.loads(widget.evaluate(
        "el => el.closest('[data-course-embed]').querySelector("
        "'script[type=\"application/json\"]').textContent"))


@pytest.mark.parametrize("number", sorted(EXPLORER_LESSONS))
def test_the_explorer_highlights_exactly_row_t_of_the_saved_tensor(browser, site_url, number):
    watched = open_lesson(browser, site_url, number)
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
    page.close()


@pytest.mark.parametrize("number", sorted(CONTROL_LESSONS))
def test_moving_a_control_on_the_site_changes_its_output(browser, site_url, number):
    watched = open_lesson(browser, site_url, number)
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
    page.close()


def test_a_question_on_the_site_explains_a_wrong_answer_and_confirms_the_right(browser,
                                                                               site_url):
    bank = load_bank()
    watched = Watched(browser, site_url)
    watched.open("notebooks/04_bahdanau.html")
    page = watched.page
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
    page.close()


def test_the_front_page_is_the_course_map_and_docs_exercises_and_search_work(browser, site_url):
    watched = Watched(browser, site_url)
    watched.open("index.html")  # redirects to lesson 00
    assert "00_start_here" in watched.page.url
    for page in [f"docs/{name}.html" for name in DOC_PAGES] + ["exercises.html"]:
        watched.open(page)
        assert watched.errors == [] and watched.outside == [], page
        assert watched.broken_images() == [], page
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


# ---- the slides --------------------------------------------------------------------------------

@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.number for lesson in LESSONS])
def test_a_deck_loads_offline_with_typeset_math_and_figures(browser, slides_url, lesson):
    watched = Watched(browser, slides_url)
    watched.open(f"{lesson.number}_{lesson.slug}.html")
    page = watched.page
    page.wait_for_function("() => window.Reveal && Reveal.isReady()")
    assert watched.errors == [] and watched.outside == []
    assert watched.broken_images() == []
    assert page.evaluate("() => Reveal.getTotalSlides()") >= 5
    if page.locator(".reveal section").filter(has_text=re.compile(r"\\\(|\\\[")).count():
        pytest.fail("a slide shows untypeset math")
    assert axe_violations(page) == []
    page.evaluate("() => Reveal.slide(2)")
    page.wait_for_timeout(1000)  # the fade between slides
    watched.shot(f"slides-{SITE_PROFILE}-{lesson.number}.png")
    page.close()


# ---- the live lab ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """`make lab` on a copy of the course (the lab saves what runs in it): the same command a
    learner runs, serving lessons, exercises and docs."""
    root = tmp_path_factory.mktemp("lab")
    for folder in ("notebooks", "exercises", "docs"):
        shutil.copytree(COURSE_ROOT / folder, root / folder)
    started = start_make_lab(root, env=kernel_environment("fast"), options=(
        "--LabApp.expose_app_in_browser=True "
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"))
    yield started
    started.stop()


NOTEBOOK = "(window.jupyterapp && window.jupyterapp.shell.currentWidget)"  # until the app is up
KERNEL_IDLE = (f"() => {{ const nb = {NOTEBOOK}; return nb && nb.sessionContext && "
               "nb.sessionContext.session && nb.sessionContext.session.kernel && "
               "nb.sessionContext.session.kernel.status === 'idle'; }")
CELLS = f"Array.from({NOTEBOOK}.content.model.cells)"


def open_in_lab(browser, lab, path: str):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{lab.base}lab/tree/{path}?reset&token={lab.token}")  # reset: no earlier tab
    page.wait_for_function(f"() => {{ const nb = {NOTEBOOK}; return nb && nb.context && "
                           "nb.context.isReady && nb.content.model.cells.length > 1; }",
                           timeout=120_000)
    page.wait_for_function(KERNEL_IDLE, timeout=120_000)
    return page


CURRENT_PATH = f"() => {NOTEBOOK} && {NOTEBOOK}.context && {NOTEBOOK}.context.path"


def wait_until_open(page, path: str, holding: str | None = None) -> None:
    """Wait until the lab's current tab shows the file ``path`` (relative to the lab's root),
    loaded (and, for a text file, with ``holding`` in its text)."""
    page.wait_for_function(
        f"([path, holding]) => ({CURRENT_PATH})() === path && {NOTEBOOK}.context.isReady && "
        f"(holding === null || {NOTEBOOK}.context.model.toString().includes(holding))",
        arg=[path, holding], timeout=120_000)


def open_from_file_browser(page, *names: str) -> None:
    """From the file browser's top folder, double-click each of ``names`` in turn, as a learner
    opens a folder and then a file."""
    page.locator(".jp-BreadCrumbs-home").first.click()
    for name in names:
        item = page.locator(".jp-DirListing-item").filter(
            has=page.locator(".jp-DirListing-itemText", has_text=re.compile(f"^{name}$")))
        item.first.dblclick(timeout=60_000)


def test_make_lab_opens_lesson_00_and_reaches_exercises_and_docs(browser, lab):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    assert START_PAGE in lab.url
    page.goto(lab.url + "&reset")  # the URL `make lab` prints; reset: no tab from earlier
    wait_until_open(page, "notebooks/00_start_here.ipynb")
    page.screenshot(path=str(SCREENSHOTS / "lab-start.png"))
    # a link in the lesson opens the docs page inside the lab
    page.locator(".jp-RenderedMarkdown a", has_text=re.compile("^notation$")).first.click()
    wait_until_open(page, "docs/notation.md", holding="Notation")
    page.evaluate("() => window.jupyterapp.commands.execute('filebrowser:activate')")
    open_from_file_browser(page, "exercises", "04_bahdanau", "04_bahdanau_exercises.ipynb")
    wait_until_open(page, "exercises/04_bahdanau/04_bahdanau_exercises.ipynb")
    page.screenshot(path=str(SCREENSHOTS / "lab-exercise-from-file-browser.png"))
    open_from_file_browser(page, "docs", "setup.md")
    wait_until_open(page, "docs/setup.md", holding="make lab")
    page.screenshot(path=str(SCREENSHOTS / "lab-docs-from-file-browser.png"))
    page.close()


def error_outputs(page) -> list[str]:
    return page.evaluate(f"() => {CELLS}.flatMap(c => c.type === 'code' ? "
                         "c.outputs.toJSON().filter(o => o.output_type === 'error')"
                         ".map(o => o.ename + ': ' + o.evalue) : [])")


def test_the_lab_runs_a_lesson_and_a_slider_redraws_its_figure(browser, lab):
    page = open_in_lab(browser, lab, "notebooks/01_embeddings.ipynb")
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(
        f"() => ({KERNEL_IDLE})() && {CELLS}.every(c => c.type !== 'code' || "
        "c.executionCount !== null || c.outputs.toJSON().some(o => o.output_type === 'error'))"
        f" || {CELLS}.some(c => c.type === 'code' && c.outputs.toJSON().some(o => "
        "o.output_type === 'error'))", timeout=300_000)
    assert error_outputs(page) == []
    interact = page.locator(".widget-interact").filter(has=page.locator(".noUi-handle")).first
    interact.scroll_into_view_if_needed()
    figure = interact.locator("img").first
    figure.wait_for(timeout=60_000)
    before = figure.get_attribute("src")
    page.screenshot(path=str(SCREENSHOTS / "lab-slider-before.png"))
    handle = interact.locator(".noUi-handle").first
    handle.focus()
    for _ in range(10):
        page.keyboard.press("ArrowRight")
    page.wait_for_function("([el, src]) => el.querySelector('img') && "
                           "el.querySelector('img').src !== src",
                           arg=[interact.element_handle(), before], timeout=60_000)
    page.wait_for_function(KERNEL_IDLE)
    page.screenshot(path=str(SCREENSHOTS / "lab-slider-after.png"))
    page.close()


WRONG_SOFTMAX = ("def softmax_t(scores, temperature):\n"
                 "    return torch.softmax(scores, dim=-1)")
RIGHT_SOFTMAX = ("def softmax_t(scores, temperature):\n"
                 "    if not temperature > 0:\n"
                 "        raise ValueError(f'temperature must be > 0, got {temperature}')\n"
                 "    return torch.softmax(scores / temperature, dim=-1)")


def answer_and_check(page, answer_index: int, answer: str) -> str:
    """Type ``answer`` into the answer cell as a learner does, run it and the self-check below
    it with Shift+Enter, and return the self-check's output as the page shows it."""
    cells = page.locator(".jp-Notebook .jp-Cell")
    editor = cells.nth(answer_index).locator(".cm-content")
    editor.click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(answer)
    page.keyboard.press("Shift+Enter")
    page.wait_for_function(KERNEL_IDLE)
    page.keyboard.press("Shift+Enter")
    page.wait_for_function(
        f"(i) => ({KERNEL_IDLE})() && {CELLS}[i].executionCount !== null", arg=answer_index + 1)
    page.wait_for_timeout(500)
    return cells.nth(answer_index + 1).locator(".jp-OutputArea").inner_text()


def test_an_exercise_fails_a_wrong_answer_and_passes_the_right_one(browser, lab):
    page = open_in_lab(browser, lab, "exercises/01_embeddings/01_embeddings_exercises.ipynb")
    sources = page.evaluate(f"() => {CELLS}.map(c => c.sharedModel.getSource())")
    answer = next(i for i, s in enumerate(sources) if s.startswith("def softmax_t"))
    page.evaluate(f"() => {{ {NOTEBOOK}.content.activeCellIndex = 1; "
                  "return window.jupyterapp.commands.execute('notebook:run-cell'); }")
    page.wait_for_function(f"() => ({KERNEL_IDLE})() && {CELLS}[1].executionCount !== null",
                           timeout=120_000)
    wrong = answer_and_check(page, answer, WRONG_SOFTMAX)
    page.screenshot(path=str(SCREENSHOTS / "exercise-wrong-answer.png"))
    assert "SelfCheckFailed" in wrong and "softmax_t at tau = 0.5" in wrong, wrong
    assert "checks.py" not in wrong, wrong  # the learner's lines and the message, not the checker's
    right = answer_and_check(page, answer, RIGHT_SOFTMAX)
    page.screenshot(path=str(SCREENSHOTS / "exercise-right-answer.png"))
    assert "SelfCheckFailed" not in right and right.count("passed") == 3, right
    page.close()


LAB_EXPLORER_CELLS = [
    "import json\n\nimport torch\n\nfrom course_lib.nn.self_attention import causal_mask\n"
    "from course_lib.widgets.explorer import attention_explorer\nfrom course_lib.widgets.quiz "
    "import quiz\n\ntorch.manual_seed(0)\nallowed = causal_mask(6)  # (T, T), True = may attend\n"
    "weights = torch.softmax(torch.randn(6, 6).masked_fill(~allowed, float('-inf')), dim=-1)\n"
    "print(json.dumps(weights.tolist()))",
    "attention_explorer(list('abcdef'), list('abcdef'), weights, masks=~allowed, title='lab')",
    "quiz({qid!r})",
]


def put_notebook(lab, path: str, sources: list[str]) -> None:
    """Save a notebook of code cells ``sources`` at ``path`` through the server's REST API."""
    cells = [{"cell_type": "code", "metadata": {}, "source": s, "outputs": [],
              "execution_count": None, "id": f"cell{i}"} for i, s in enumerate(sources)]
    body = json.dumps({"type": "notebook", "format": "json", "content": {
        "cells": cells, "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "attention-course", "display_name": "course",
                                    "language": "python"}}}}).encode()
    request = urllib.request.Request(f"{lab.base}api/contents/{path}", data=body, method="PUT",
                                     headers={"Authorization": f"token {lab.token}",
                                              "Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=30).close()


def test_the_lab_draws_the_explorer_and_a_question_from_course_lib_tensors(browser, lab):
    question = next(q for q in load_bank().values() if q.kind == "choice")
    put_notebook(lab, "explorer_check.ipynb",
                 [c.replace("{qid!r}", repr(question.qid)) for c in LAB_EXPLORER_CELLS])
    page = open_in_lab(browser, lab, "explorer_check.ipynb")
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    explorer = page.locator('[data-course-widget="attention-explorer"]')
    explorer.wait_for(timeout=120_000)
    assert error_outputs(page) == []
    printed = page.evaluate(f"() => {CELLS}[0].outputs.toJSON()[0].text")
    weights = json.loads("".join(printed))
    for t in range(6):
        explorer.locator(f'button[data-query-index="{t}"]').hover()
        strip = explorer.locator('[data-role="active-row"]')
        assert strip.get_attribute("data-query-index") == str(t)
        cells = strip.locator("[data-weight]")
        row = [float(w) for w in cells.evaluate_all("cs => cs.map(c => c.dataset.weight)")]
        assert row == pytest.approx(weights[t], abs=1e-6)
        assert sum(row) == pytest.approx(1, abs=1e-3)
        masked = cells.evaluate_all("cs => cs.map(c => c.dataset.masked === 'true')")
        assert masked == [j > t for j in range(6)]
        assert all(w == 0 for w, m in zip(row, masked, strict=True) if m)
    page.screenshot(path=str(SCREENSHOTS / "lab-explorer.png"))
    root = page.locator(f'[data-course-quiz="{question.qid}"]')
    root.wait_for(timeout=60_000)
    wrong = next(i for i, o in enumerate(question.options) if not o.correct)
    root.locator(f'[data-option="{wrong}"]').click()
    assert root.locator("[data-feedback]").get_attribute("data-result") == "wrong"
    root.locator(f'[data-option="{question.correct_index}"]').click()
    assert root.locator("[data-feedback]").get_attribute("data-result") == "right"
    page.close()
