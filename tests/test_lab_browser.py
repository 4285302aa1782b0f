"""The live lab in a real browser (headless Chromium driven by Playwright): `make lab` opens
lesson 00 and reaches the exercises and docs; a lesson runs all its cells with no error and
moving a slider redraws a figure; an exercise fails a wrong answer and passes the right one; the
explorer and a question draw from course_lib tensors.
"""

from __future__ import annotations

import json
import re
import shutil
import urllib.request

import pytest

from course_lib.course.execute import kernel_environment
from course_lib.course.syllabus import COURSE_ROOT
from course_lib.widgets.quiz import load_bank
from tests.browser_support import SCREENSHOTS, require_browser
from tests.lab_support import START_PAGE, start_make_lab

require_browser(module_level=True)


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
