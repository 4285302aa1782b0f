"""exercises/ is exactly what `course assign` makes of solutions/, and leaks nothing."""

import re

import nbformat
import pytest

from course_lib.course.syllabus import COURSE_ROOT, LESSONS
from course_lib.grading.config import lessons_with_exercises, source_notebooks
from course_lib.grading.workflow.assign import AssignError, assign

ROOT = COURSE_ROOT
SOLUTION_LINES = re.compile(r"### BEGIN SOLUTION(.*?)### END SOLUTION", re.S)
HIDDEN_LINES = re.compile(r"### BEGIN HIDDEN TESTS(.*?)### END HIDDEN TESTS", re.S)


def secret_lines(path):
    """Substantial lines of solution and hidden-test blocks in a source notebook, except those
    that the visible code has too (``with torch.no_grad():`` is no secret)."""
    lines, visible = [], []
    for cell in nbformat.read(path, as_version=4).cells:
        visible.append(HIDDEN_LINES.sub("", SOLUTION_LINES.sub("", cell.source)))
        for pattern in (SOLUTION_LINES, HIDDEN_LINES):
            for block in pattern.findall(cell.source):
                lines += [line.strip() for line in block.splitlines()
                          if len(line.strip()) > 20]
    shown = "\n".join(visible)
    return [line for line in lines if line not in shown]


def test_there_is_a_first_exercise_set():
    lessons = lessons_with_exercises(ROOT)
    assert lessons, "solutions/ holds no exercise set"
    first_existing = next(lesson for lesson in LESSONS[1:2] + LESSONS[:1] if lesson.exists(ROOT))
    assert f"{first_existing.number}_{first_existing.slug}" in lessons


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    release = tmp_path_factory.mktemp("release")
    assign(root=ROOT, release_root=release)
    return release


@pytest.mark.parametrize("lesson", lessons_with_exercises(ROOT))
def test_exercises_are_up_to_date(regenerated, lesson):
    for source in source_notebooks(lesson, ROOT):
        committed = ROOT / "exercises" / lesson / source.name
        assert committed.exists(), f"{committed} is missing: run `course assign {lesson}`"
        fresh = nbformat.read(regenerated / lesson / source.name, as_version=4)
        assert nbformat.read(committed, as_version=4) == fresh, (
            f"{committed} is out of date with {source}: run `course assign {lesson}`")


@pytest.mark.parametrize("lesson", lessons_with_exercises(ROOT))
def test_no_solution_or_hidden_test_leaks(lesson):
    for source in source_notebooks(lesson, ROOT):
        text = (ROOT / "exercises" / lesson / source.name).read_text()
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS",
                       "END HIDDEN TESTS"):
            assert marker not in text
        secrets = secret_lines(source)
        assert secrets, f"{source} has no solution or hidden-test lines to protect"
        leaked = [line for line in secrets if line in text]
        assert not leaked, f"exercises/{lesson}/{source.name} leaks {leaked[:3]}"


def test_exercise_cells_are_stubs_and_tests_are_locked():
    for lesson in lessons_with_exercises(ROOT):
        for source in source_notebooks(lesson, ROOT):
            nb = nbformat.read(ROOT / "exercises" / lesson / source.name, as_version=4)
            solution_cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
            test_cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
            assert len(test_cells) >= 3
            assert all("raise NotImplementedError()" in c.source for c in solution_cells)
            assert all(c.metadata["nbgrader"]["locked"] for c in test_cells)
            assert all(c.metadata.get("editable") is False for c in test_cells)


def test_assign_rejects_an_unknown_lesson(tmp_path):
    with pytest.raises(AssignError, match="no exercise source for \\['99_nope'\\]"):
        assign(["99_nope"], root=ROOT, release_root=tmp_path)


def test_every_existing_lesson_has_an_exercise_set():
    with_sets = set(lessons_with_exercises(ROOT))
    for lesson in LESSONS:
        if lesson.exists(ROOT):
            assert f"{lesson.number}_{lesson.slug}" in with_sets, (
                f"lesson {lesson.number} has no solutions/{lesson.number}_{lesson.slug}/")
