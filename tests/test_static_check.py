"""The grader's static check on two tables: honest styles are never held or flagged; evasions
that reach a capability, however they reach it, are held with the path they took."""

import nbformat
import pytest

from course_lib.course.syllabus import COURSE_ROOT
from course_lib.grading.verdicts.static_check import StaticFindings, cell_roles, static_flags
from course_lib.grading.verdicts.verdict import load_reference
from tests.grading_styles import EVASIONS, EX1, EX4, HONEST, honest_notebooks, with_cells

SOURCE = COURSE_ROOT / "solutions" / "00_start_here" / "00_start_here_exercises.ipynb"
REFERENCE = load_reference(SOURCE)


def source():
    return nbformat.read(SOURCE, as_version=4)


def findings(nb, exercise):
    return static_flags(nb, exercise, REFERENCE.tests[exercise].reimplements, source_nb=source())


def test_the_tables_are_large_enough():
    assert len(HONEST) >= 25 and len(EVASIONS) >= 20


@pytest.mark.parametrize("name", HONEST)
def test_an_honest_style_is_neither_held_nor_flagged(name):
    exercise, cells = HONEST[name]
    nb = with_cells(source(), exercise, cells)
    for other in REFERENCE.tests:
        assert findings(nb, other) == StaticFindings(), (name, other)


def test_the_honest_notebooks_hold_every_style():
    packed = [name for names, _ in honest_notebooks(source()) for name in names]
    assert sorted(packed) == sorted(HONEST)


@pytest.mark.parametrize("name", EVASIONS)
def test_an_evasion_is_held_with_its_path(name):
    exercise, cells, reason = EVASIONS[name]
    nb = with_cells(source(), exercise, cells)
    held = findings(nb, exercise).withheld
    assert any(reason in text for text in held), (name, held)


def test_a_capability_holds_its_exercise_and_every_later_one_only():
    nb = with_cells(source(), "ex2_dot_scores", [HONEST["uses einsum"][1][0], "import sys\n"])
    assert findings(nb, EX1).withheld == []
    for later in ("ex2_dot_scores", "ex3_masked_mean", EX4):
        assert any("import sys" in text for text in findings(nb, later).withheld), later


def test_a_capability_after_the_last_test_is_flagged_not_held():
    nb = source()
    nb.cells.append(nbformat.v4.new_code_cell("import sys\nprint(sys.version)\n"))
    for exercise in REFERENCE.tests:
        found = findings(nb, exercise)
        assert found.withheld == []
        assert any("after the last test cell" in text and "import sys" in text
                   for text in found.flags), exercise


def test_a_cell_that_does_not_parse_is_reported():
    nb = with_cells(source(), EX1, ["def stable_softmax(scores, dim=-1)\n    return scores\n"])
    assert any("does not parse" in text for text in findings(nb, EX1).flags)


def test_student_cells_are_decided_by_the_source_not_the_metadata():
    nb = with_cells(source(), EX1, [HONEST["plain"][1][0], (
        "import os\n", {"nbgrader": {"grade": True, "grade_id": EX1, "points": 2,
                                     "locked": True, "solution": False}})])
    roles = {role.index: role for role in cell_roles(nb, source())}
    forged = next(i for i, c in enumerate(nb.cells) if c.source == "import os\n")
    assert roles[forged].student and roles[forged].test is None
    assert any("import os" in text for text in findings(nb, EX1).withheld)


def test_visible_uses_of_the_reference_are_flagged_with_points_standing():
    nb = with_cells(source(), EX1, ['''def stable_softmax(scores, dim=-1):
    return torch.softmax(scores, dim=dim)
'''])
    found = findings(nb, EX1)
    assert found.withheld == []
    assert found.flags == ["uses torch.softmax, which this exercise re-implements"]
