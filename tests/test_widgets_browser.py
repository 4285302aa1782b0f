"""The course's widgets in headless Chromium, drawn by the site's script from their static
copies (``course_lib/widgets/embed.py``), exactly as the site draws them: the explorer
highlights row t of the tensor it was built from, masked keys read 0; a question answered
wrongly shows that option's explanation and rightly the confirmation, with the options shuffled
per seed; a saved control changes its output when it moves; the keyboard alone reaches all of
it; axe-core finds no serious violation."""

from __future__ import annotations

import json

import ipywidgets as widgets
import pytest
import torch

from course_lib.nn.self_attention import causal_mask
from course_lib.widgets.controls import static_copy
from course_lib.widgets.embed import embedded_html, site_script, site_styles
from course_lib.widgets.explorer import attention_explorer
from course_lib.widgets.quiz import load_bank, question_data
from tests.accessibility import axe_violations
from tests.browser_support import require_browser

require_browser(module_level=True)

TOKENS = ["<bos>", "the", "cat", "sat", "down"]


def causal_weights() -> tuple[torch.Tensor, torch.Tensor]:
    """Two heads of causal self-attention over five tokens, and the mask (True = masked)."""
    generator = torch.Generator().manual_seed(7)
    scores = torch.randn(2, 5, 5, generator=generator)  # (h, T, T)
    allowed = causal_mask(5)  # (T, T), True = may attend
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights, ~allowed


def page_html(*blocks: str) -> str:
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>widgets</title>"
            f"<style>{site_styles()}</style></head><body><main>{''.join(blocks)}</main>"
            f"<script>{site_script()}</script></body></html>")


def open_page(browser, html: str, query: str = ""):
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.goto("about:blank" + query)
    page.set_content(html)
    return page, errors


def active_row(page) -> tuple[int, list[float], list[bool]]:
    strip = page.locator('[data-course-widget="attention-explorer"] [data-role="active-row"]')
    cells = strip.locator("[data-weight]")
    weights = [float(w) for w in cells.evaluate_all("cs => cs.map(c => c.dataset.weight)")]
    masked = cells.evaluate_all("cs => cs.map(c => c.dataset.masked === 'true')")
    return int(strip.get_attribute("data-query-index")), weights, masked


def test_pointing_at_query_t_highlights_row_t_of_the_tensor_and_masked_keys_read_0(browser):
    weights, masks = causal_weights()
    explorer = attention_explorer(TOKENS, TOKENS, weights, masks=masks,
                                  labels=[{"head": 0}, {"head": 1}], title="causal")
    page, errors = open_page(browser, page_html(embedded_html("explorer", explorer.data)))
    root = page.locator('[data-course-widget="attention-explorer"]')
    assert "Rows are queries" in root.inner_text()
    for head in (0, 1):
        root.locator('select[data-explorer-selector="head"]').select_option(str(head))
        for t in range(len(TOKENS)):
            root.locator(f'button[data-query-index="{t}"]').hover()
            index, row, masked = active_row(page)
            assert index == t
            assert row == pytest.approx(weights[head, t].tolist(), abs=1e-6)
            assert sum(row) == pytest.approx(1, abs=1e-3)
            assert masked == masks[t].tolist()
            assert all(w == 0 for w, m in zip(row, masked, strict=True) if m)
            active = root.locator("tr.is-active")
            assert active.count() == 1 and active.get_attribute("data-row") == str(t)
    assert errors == []
    page.close()


def test_the_explorer_works_from_the_keyboard_alone(browser):
    weights, masks = causal_weights()
    explorer = attention_explorer(TOKENS, TOKENS, weights[0], masks=masks)
    page, _ = open_page(browser, page_html(embedded_html("explorer", explorer.data)))
    page.keyboard.press("Tab")  # the first focusable element: the "show numbers" box
    while page.evaluate("() => document.activeElement.dataset.queryIndex") is None:
        page.keyboard.press("Tab")
    assert active_row(page)[0] == 0
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    index, row, _ = active_row(page)
    assert index == 2 and row == pytest.approx(weights[0, 2].tolist(), abs=1e-6)
    page.close()


def choice_question():
    question = next(q for q in load_bank().values() if q.kind == "choice")
    return question, question_data(question)


def test_a_wrong_answer_shows_its_explanation_and_the_right_one_confirms(browser):
    question, data = choice_question()
    page, errors = open_page(browser, page_html(embedded_html("quiz", {"questions": [data]})))
    root = page.locator(f'[data-course-quiz="{question.qid}"]')
    feedback = root.locator("[data-feedback]")
    wrong = next(i for i, o in enumerate(question.options) if not o.correct)
    root.locator(f'[data-option="{wrong}"]').click()
    assert feedback.get_attribute("data-result") == "wrong"
    expected = page.evaluate("(html) => { const d = document.createElement('div'); "
                             "d.innerHTML = html; return d.textContent; }",
                             data["options"][wrong]["why"])
    assert expected.strip() in feedback.inner_text()
    root.locator(f'[data-option="{question.correct_index}"]').focus()
    page.keyboard.press("Enter")  # the keyboard alone answers
    assert feedback.get_attribute("data-result") == "right"
    assert feedback.inner_text().startswith("✓ Right.")
    assert errors == []
    page.close()


def test_a_number_question_checks_the_value_and_explains_expected_mistakes(browser):
    question = next(q for q in load_bank().values() if q.kind == "number")
    page, _ = open_page(browser, page_html(
        embedded_html("quiz", {"questions": [question_data(question)]})))
    root = page.locator(f'[data-course-quiz="{question.qid}"]')
    field, feedback = root.locator('[data-option="number"]'), root.locator("[data-feedback]")
    field.fill("not a number")
    field.press("Enter")
    assert feedback.get_attribute("data-result") == "invalid"
    field.fill(str(question.answer + 10 * question.tolerance + 7.5))
    field.press("Enter")
    assert feedback.get_attribute("data-result") == "wrong"
    field.fill(str(question.answer))
    field.press("Enter")
    assert feedback.get_attribute("data-result") == "right"
    page.close()


def test_options_are_shuffled_per_seed_so_the_right_one_has_no_fixed_place(browser):
    question, data = choice_question()
    html = page_html(embedded_html("quiz", {"questions": [data]}))
    places = set()
    for seed in range(12):
        page, _ = open_page(browser, html, f"?quiz-seed={seed}")
        order = page.locator("[data-option]").evaluate_all(
            "bs => bs.map(b => Number(b.dataset.option))")
        assert sorted(order) == list(range(len(question.options)))
        places.add(order.index(question.correct_index))
        page.close()
    assert len(places) > 1, "the right option stayed in one place over 12 seeds"


def test_a_saved_control_shows_the_output_for_each_value(browser):
    def show(n, loud):
        print(("N = " if loud else "n = ") + str(n))

    controls = {"n": widgets.IntSlider(value=2, min=0, max=4, description="n"),
                "loud": widgets.Checkbox(value=False, description="loud")}
    copy = static_copy(show, controls, {}, budget=48)
    page, errors = open_page(browser, page_html(copy))
    output = page.locator("[data-course-output]")
    assert output.inner_text().strip() == "n = 2"
    slider = page.locator('[data-course-control="n"]')
    slider.focus()
    page.keyboard.press("ArrowRight")
    assert output.inner_text().strip() == "n = 3"
    page.locator('[data-course-control="loud"]').check()
    assert output.inner_text().strip() == "N = 3"
    assert errors == []
    page.close()


def test_the_widgets_have_no_serious_accessibility_violation(browser):
    weights, masks = causal_weights()
    explorer = attention_explorer(TOKENS, TOKENS, weights, masks=masks,
                                  labels=[{"head": 0}, {"head": 1}])
    _, data = choice_question()
    page, _ = open_page(browser, page_html(
        embedded_html("explorer", explorer.data), embedded_html("quiz", {"questions": [data]}),
        static_copy(lambda n: print(n), {"n": widgets.IntSlider(1, 0, 3)}, {}, budget=8)))
    assert axe_violations(page) == []
    page.close()


def test_the_static_copy_holds_exactly_the_data_the_lab_receives():
    weights, masks = causal_weights()
    explorer = attention_explorer(["</script>", *TOKENS[1:]], TOKENS, weights[0], masks=masks)
    bundle, _ = explorer._repr_mimebundle_()
    copy = bundle["text/html"]
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert copy.count("</script>") == 1  # a token cannot close the data block
    payload = copy.split('<script type="application/json">', 1)[1].rsplit("</script>", 1)[0]
    assert json.loads(payload) == explorer.data
