"""The slides fit their slides, measured in Chromium: a slide whose content reaches past the
slide's edges is reported by lesson, number and heading, and building lesson 04's real deck
(fast profile) measures it and finds none. Long Markdown cells are cut into several slides, and
each figure of a cell gets a slide of its own, without a browser."""

from __future__ import annotations

import asyncio

from course_lib.course import slide_check, slides
from course_lib.course.syllabus import LESSONS
from course_lib.course.web_assets import copy_assets
from tests.browser_support import require_browser

LESSON_04 = next(lesson for lesson in LESSONS if lesson.number == "04")
PARAGRAPH = ("A sentence of the kind a lesson's prose is made of, long enough to fill most of "
             "one line of a slide. ")


def test_a_long_markdown_cell_is_cut_between_blocks_and_keeps_its_heading():
    md = slides.markdown_renderer()
    source = "## 3. A long section\n\n" + "\n\n".join(PARAGRAPH * 3 for _ in range(12))
    pages = slides.markdown_pages(source, md)
    assert len(pages) >= 3
    assert all(page.startswith("<h2>3. A long section</h2>") for page in pages)
    assert sum(page.count("<p>") for page in pages) == 12  # every paragraph, once
    short = "## Short\n\nOne line."
    assert slides.markdown_pages(short, md) == [md.render(short)]


def test_each_figure_of_a_tagged_cell_gets_a_slide_of_its_own():
    png = {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo=",
                                                   "text/plain": "<Figure>"}}
    nb = {"metadata": {}, "cells": [
        {"id": "m", "cell_type": "markdown", "source": "## Two pictures", "metadata": {}},
        {"id": "c", "cell_type": "code", "source": "draw(a); draw(b)",
         "metadata": {"tags": ["slide"]}, "outputs": [png, png]}]}
    made = slides.lesson_slides(nb)
    assert [slide.figure for slide in made] == [True, True]
    assert all(slide.html.count("<img") == 1 for slide in made)
    assert 'class="figure"' in slides.deck_html(LESSON_04, made)


def test_a_slide_that_overflows_is_named_and_one_that_fits_is_not(tmp_path):
    require_browser()
    wide = "| " + " | ".join(f"column {i}" for i in range(30)) + " |\n|" + "---|" * 30
    made = [slides.Slide("<h2>Fits</h2><p>One short line.</p>"),
            slides.Slide("<h2>Too tall</h2>" + "<p>line</p>" * 40),
            slides.Slide("<h2>Too wide</h2>" + slides.markdown_renderer().render(wide))]
    copy_assets(tmp_path / "_static", widgets=False, reveal=True)
    (tmp_path / "deck.html").write_text(slides.deck_html(LESSON_04, made))
    async def from_a_running_loop():  # as in a notebook, or beside the tests' own browser
        return slide_check.deck_overflows(tmp_path, ["deck.html"])

    problems = asyncio.run(from_a_running_loop())
    assert len(problems) == 2, problems
    tall, wide = problems
    assert tall.startswith('deck.html, slide 3 "Too tall": content') and "on a 960 × 700" in tall
    assert wide.startswith('deck.html, slide 4 "Too wide": content')


def test_building_lesson_04_s_deck_measures_that_every_slide_fits(tmp_path, capsys):
    """`course slides` measures the decks it builds (every deck's fit is also measured by
    tests/test_slides_browser.py, on the page it opens)."""
    require_browser()
    slides.build_slides("fast", ["04"], out=tmp_path)  # raises SlidesOverflow if one overflows
    assert "Chromium or Playwright is missing" not in capsys.readouterr().out
