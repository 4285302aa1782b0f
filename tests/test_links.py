"""Every relative link a reader can follow works: in the lab, which serves the repository, and on
the site (links to exercise notebooks become downloads there). Each lesson ends with a Practice
cell that links its own exercise set and states its size correctly."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from course_lib.course.links import (
    broken_html_links,
    broken_markdown_links,
    heading_anchors,
    markdown_links,
    markdown_of,
    slug,
)
from course_lib.course.site import site_links
from course_lib.course.syllabus import COURSE_ROOT, LESSONS
from course_lib.grading.workflow.unit import exercises_of

NUMBERS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def test_every_relative_link_of_lessons_exercises_and_docs_resolves_in_the_lab():
    assert broken_markdown_links(COURSE_ROOT) == []


def test_the_pages_checked_hold_the_links_a_reader_follows():
    links = [target for lesson in LESSONS
             for target in markdown_links(markdown_of(COURSE_ROOT / lesson.notebook))]
    assert "../docs/notation.md" in links
    assert sum(target.startswith("../exercises/") for target in links) == len(LESSONS)


def notebook(path: Path, *markdown: str) -> None:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": text} for text in markdown]
    path.write_text(json.dumps({"cells": cells}))


def test_the_lab_check_reports_missing_files_headings_and_escapes(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "docs" / "notation.md").write_text("# Notation\n\n## Layers of `course_lib`\n")
    notebook(tmp_path / "notebooks" / "00_a.ipynb",
             "[ok](../docs/notation.md) [anchor](../docs/notation.md#layers-of-course_lib)",
             "[gone](../docs/missing.md) [bad anchor](../docs/notation.md#nowhere)",
             "[escape](../../outside.md) [web](https://example.org/x.md) `[code](nope.md)`")
    broken = broken_markdown_links(tmp_path, patterns=("notebooks/*.ipynb",))
    assert broken == ["notebooks/00_a.ipynb: ../docs/missing.md (no such file)",
                      "notebooks/00_a.ipynb: ../docs/notation.md#nowhere (no heading #nowhere)",
                      "notebooks/00_a.ipynb: ../../outside.md (outside the course)"]


def test_anchors_follow_the_github_and_myst_slug():
    assert slug("Layers of `course_lib`") == "layers-of-course_lib"
    assert slug("Slides and the course site") == "slides-and-the-course-site"
    assert heading_anchors("# A\n\n#### Deep\n\n## B c\n") == {"a", "b-c"}


def test_the_site_check_reports_missing_pages_ids_and_escapes(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.html").write_text('<h2 id="here">x</h2><a href="../index.html">i</a>')
    (tmp_path / "index.html").write_text(
        '<a href="docs/a.html#here">ok</a><a href="docs/a.html#gone">id</a>'
        '<a href="docs/b.html">file</a><a href="../x.html">out</a><a href="#top">self</a>'
        '<a href="https://example.org/">web</a><span id="top"></span>')
    assert broken_html_links(tmp_path) == ["index.html: docs/a.html#gone (no element #gone)",
                                           "index.html: docs/b.html (no such file)",
                                           "index.html: ../x.html (outside the site)"]


def test_on_the_site_a_link_to_an_exercise_set_downloads_it():
    nb = {"cells": [{"cell_type": "markdown", "source": [
        "in [`exercises/04_b/04_b_exercises.ipynb`](../exercises/04_b/04_b_exercises.ipynb)"]},
        {"cell_type": "code", "source": "x = '[a](../exercises/04_b/04_b_exercises.ipynb)'"}]}
    cells = site_links(nb)["cells"]
    assert cells[0]["source"] == ("in {download}`exercises/04_b/04_b_exercises.ipynb "
                                  "<../_exercises/04_b_exercises.ipynb>`")
    assert "](../exercises/" in cells[1]["source"]  # code is left alone


@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.number for lesson in LESSONS])
def test_each_lesson_ends_with_practice_that_links_its_exercises(lesson):
    cells = json.loads((COURSE_ROOT / lesson.notebook).read_text())["cells"]
    practice = "".join(cells[-1]["source"])
    assert cells[-1]["cell_type"] == "markdown" and practice.startswith("## Practice")
    stem = Path(lesson.notebook).stem
    target = f"../exercises/{stem}/{stem}_exercises.ipynb"
    assert target in markdown_links(practice)
    assert (COURSE_ROOT / "notebooks" / target).exists()
    exercises = exercises_of(COURSE_ROOT / "solutions" / stem / f"{stem}_exercises.ipynb")
    count, points = re.search(r"(\w+) exercises, (\d+) points", practice).groups()
    assert NUMBERS[count] == len(exercises)
    assert int(points) == sum(exercise.max_points for exercise in exercises)
    assert "one at a time" in practice and "Run All" in practice
