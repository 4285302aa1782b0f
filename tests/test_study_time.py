"""A lesson's stated study time and the estimate it is checked against."""

import json

import pytest

from course_lib.course.study_time import (
    TOLERANCE_MINUTES,
    LessonLoad,
    estimated_minutes,
    stated_minutes,
)
from course_lib.course.syllabus import COURSE_ROOT, LESSONS, course_map


def notebook(*cells):
    return {"cells": [{"cell_type": kind, "source": [text]} for kind, text in cells]}


def test_the_load_counts_prose_words_code_lines_and_widget_controls():
    load = LessonLoad.of_notebook(notebook(
        ("markdown", "The score $e_{t,i} = v^\\top \\tanh(W s + U h)$ is large.\n"
                     "$$\nc_t = \\sum_i \\alpha_{t,i} h_i\n$$\nIt's a weighted mean."),
        ("code", "import torch\n\n# a comment, not code\nx = torch.ones(3)  # counted\nx.sum()\n"),
        ("code", "interact(show, tau=widgets.FloatSlider(min=0.1, max=3.0))\n"),
        ("raw", "not part of the lesson's prose"),
    ))
    # prose: "The score x is large" (5) + "It's a weighted mean" (4); the displayed equation is
    # read with its sentences and counts for nothing
    assert load == LessonLoad(prose_words=9, code_lines=4, widgets=2)


def test_minutes_follow_the_documented_rates():
    assert LessonLoad(prose_words=1000, code_lines=80, widgets=2).minutes() == 10 + 10 + 6
    assert LessonLoad(0, 0, 0).minutes() == 0


def test_the_estimate_is_rounded_to_five_minutes(tmp_path):
    path = tmp_path / "lesson.ipynb"
    path.write_text(json.dumps(notebook(("markdown", "word " * 1_240))))  # 12.4 minutes
    assert estimated_minutes(path) == 10
    path.write_text(json.dumps(notebook(("markdown", "word " * 1_260))))  # 12.6 minutes
    assert estimated_minutes(path) == 15


def test_the_stated_time_is_read_across_a_line_break(tmp_path):
    path = tmp_path / "lesson.ipynb"
    path.write_text(json.dumps(notebook(
        ("markdown", "# Lesson\n"),
        ("markdown", "**Prerequisites**: none. **Estimated time**: 45\nminutes; nothing trains."))))
    assert stated_minutes(path) == 45


def test_a_lesson_without_a_stated_time_is_an_error(tmp_path):
    path = tmp_path / "lesson.ipynb"
    path.write_text(json.dumps(notebook(("markdown", "About an hour."))))
    with pytest.raises(ValueError, match="states no"):
        stated_minutes(path)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.number)
def test_every_lesson_states_the_time_its_content_takes(lesson):
    path = COURSE_ROOT / lesson.notebook
    stated, estimate = stated_minutes(path), estimated_minutes(path)
    assert abs(stated - estimate) <= TOLERANCE_MINUTES, (
        f"lesson {lesson.number} states {stated} minutes; its prose, code and widgets take "
        f"about {estimate} (see docs/contributing.md, 'A lesson's stated time')")


def test_the_course_map_shows_each_lesson_s_stated_time():
    """The minutes column against the introduction's text, read here without the module's
    pattern: the first "**Estimated time**: N" of the notebook."""
    lessons = course_map()
    for lesson in LESSONS:
        text = (COURSE_ROOT / lesson.notebook).read_text(encoding="utf-8")
        after = text.partition("**Estimated time**: ")[2]
        digits = after[:len(after) - len(after.lstrip("0123456789"))]
        assert lessons.loc[lesson.number, "minutes"] == int(digits), lesson.number
