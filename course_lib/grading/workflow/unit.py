"""One grading unit: a student's lesson folder, graded into gradebook rows and feedback pages.

The folder is checked and its plain files staged for the sandbox
(:func:`course_lib.grading.workflow.submission.stage_files`); only the notebooks enter nbgrader,
whose ``autograde`` runs them through
:class:`course_lib.grading.isolation.sandbox.SandboxedExecute`. Each row is then written from
the grader's own verdicts (:func:`exercise_outcome`), nbgrader's database is set to match, and
the feedback page shows each row in its test cell; a notebook that could not be graded gets a
page of its rows all the same.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook, MissingEntry

from course_lib.grading.isolation.budget import feedback_deadline
from course_lib.grading.pages.feedback import placeholder_page
from course_lib.grading.pages.gradebook import GradeRow
from course_lib.grading.verdicts.trusted import NotebookVerdicts, read_verdicts
from course_lib.grading.verdicts.verdict import is_test_cell
from course_lib.grading.workflow.submission import (
    Refused,
    read_submission,
    reasons_by_grade_id,
    stage_files,
)


@dataclass(frozen=True)
class Exercise:
    """One autograded test cell of a source notebook."""

    notebook: str
    grade_id: str
    max_points: float


def exercises_of(notebook: Path) -> list[Exercise]:
    """The autograded test cells of a source notebook, in order."""
    nb = nbformat.read(notebook, as_version=4)
    found = []
    for cell in nb.cells:
        if is_test_cell(cell):
            meta = cell.metadata["nbgrader"]
            found.append(Exercise(notebook.stem, meta["grade_id"], float(meta.get("points", 0))))
    return found


def failure_text(result: dict) -> str:
    text = (result.get("error") or result.get("log") or "unknown error").strip().splitlines()
    return text[-1][:300] if text else "unknown error"


def grade_one(api, workspace, student, lesson_dir, expected, feedback_stage, timeout,
              memory_gb) -> list[GradeRow]:
    """Rows for one student's lesson folder; never raises for anything the submission did.

    Only the notebooks enter nbgrader's folders (so nothing else of the submission is copied
    into the autograded or feedback folders); the other plain files are staged, capped, for the
    sandbox alone.
    """
    lesson = lesson_dir.name
    if lesson not in expected:
        return [GradeRow(student, lesson, "", 0.0, 0.0,
                         f"unknown lesson; expected one of {', '.join(sorted(expected))}")]
    try:
        stage_files(lesson_dir, workspace / "files" / student / lesson)
    except Refused as refusal:
        rows = [GradeRow(student, lesson, e.grade_id, 0.0, e.max_points, f"refused: {refusal}")
                for exercises in expected[lesson].values() for e in exercises]
        for notebook in expected[lesson]:
            write_placeholder(feedback_stage, student, lesson, notebook, rows)
        return rows
    target = workspace / "submitted" / student / lesson
    usable, rows_by_notebook = {}, {}
    for notebook, exercises in expected[lesson].items():
        nb, reason = read_submission(lesson_dir / f"{notebook}.ipynb")
        if nb is None:
            rows_by_notebook[notebook] = [GradeRow(student, lesson, e.grade_id, 0.0, e.max_points,
                                                   reason) for e in exercises]
            write_placeholder(feedback_stage, student, lesson, notebook,
                              rows_by_notebook[notebook])
        else:
            usable[notebook] = nb
    if usable:
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        for notebook, nb in usable.items():
            nbformat.write(nb, target / f"{notebook}.ipynb")
        try:
            result = api.autograde(lesson, student, force=True, create=True)
            failure = "" if result["success"] else f"grading failed: {failure_text(result)}"
        except Exception as error:  # noqa: BLE001 - one submission must never stop the batch
            failure = f"grading failed: {type(error).__name__}: {error}"
        for notebook in usable:
            rows_by_notebook[notebook] = collect_rows(
                workspace, student, lesson, notebook, expected[lesson][notebook], failure,
                timeout, memory_gb)
        problem = failure
        if not failure:
            for notebook in usable:
                annotate_for_feedback(workspace, student, lesson, notebook,
                                      rows_by_notebook[notebook])
            problem = make_feedback(api, workspace, lesson, student, usable)
            produced = workspace / "feedback" / student / lesson
            for notebook in usable:
                page = produced / f"{notebook}.html"
                if page.is_file():
                    staged = feedback_stage / student / lesson / page.name
                    staged.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(page, staged)
        for notebook in usable:
            page = feedback_stage / student / lesson / f"{notebook}.html"
            if not page.is_file():
                if not failure:  # the gradebook says what the student will not see
                    note = f"; no feedback page could be made ({problem or 'no page came out'})"
                    rows_by_notebook[notebook] = [
                        dataclasses.replace(row, status=row.status + note)
                        for row in rows_by_notebook[notebook]]
                write_placeholder(feedback_stage, student, lesson, notebook,
                                  rows_by_notebook[notebook])
    return [row for notebook in expected[lesson] for row in rows_by_notebook[notebook]]


class FeedbackTimeout(Exception):
    """The feedback step ran past its time budget."""


def make_feedback(api, workspace: Path, lesson: str, student: str, notebooks) -> str:
    """Run nbgrader's feedback step for one unit within its budget (the sum of each notebook's
    :func:`course_lib.grading.isolation.budget.feedback_deadline`); '' or what went wrong."""
    seconds = sum(feedback_deadline(workspace / "source" / lesson / f"{nb}.ipynb")
                  for nb in notebooks)
    too_long = f"it took longer than its {seconds} s budget"
    try:
        with time_limit(seconds):
            result = api.generate_feedback(lesson, student, force=True)
    except FeedbackTimeout:
        return too_long
    if isinstance(result, dict) and not result.get("success", True):
        # nbgrader's API catches what its converters raise, the timeout included
        text = str(result.get("error") or result.get("log") or "")
        return too_long if FeedbackTimeout.__name__ in text else f"nbgrader: {failure_text(result)}"
    return ""


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise :class:`FeedbackTimeout` in this thread after ``seconds``. Only the main thread
    can be interrupted (each grading worker grades there); elsewhere the block runs unlimited."""
    if threading.current_thread() is not threading.main_thread() \
            or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):
        raise FeedbackTimeout(f"past {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def collect_rows(workspace, student, lesson, notebook, exercises, failure, timeout,
                 memory_gb) -> list[GradeRow]:
    """The gradebook rows of one graded notebook, from the grader's own verdicts: an exercise
    scores its source's points only when its verdict passed and nothing was withheld; the
    scores in nbgrader's database are set to match (the feedback shows them)."""
    if failure:
        return [GradeRow(student, lesson, e.grade_id, 0.0, e.max_points, failure)
                for e in exercises]
    graded = workspace / "autograded" / student / lesson / f"{notebook}.ipynb"
    reasons = reasons_by_grade_id(nbformat.read(graded, as_version=4), timeout, memory_gb)
    verdicts = read_verdicts(workspace / "verdicts" / student / lesson / f"{notebook}.json")
    rows = []
    with Gradebook(f"sqlite:///{workspace / 'gradebook.db'}") as gradebook:
        for exercise in exercises:
            points, status = exercise_outcome(exercise, reasons, verdicts, memory_gb)
            try:
                found = gradebook.find_grade(exercise.grade_id, notebook, lesson, student)
                found.auto_score = points
                gradebook.db.commit()
            except MissingEntry:
                pass
            rows.append(GradeRow(student, lesson, exercise.grade_id, points, exercise.max_points,
                                 status))
    return rows


def exercise_outcome(exercise: Exercise, reasons: dict[str, str], verdicts: NotebookVerdicts,
                     memory_gb: float) -> tuple[float, str]:
    """(points, status) of one exercise. A status always begins with the grader's words."""
    verdict = verdicts.exercises.get(exercise.grade_id)
    if exercise.grade_id not in reasons:
        return 0.0, "test cell deleted from the submission"
    if verdicts.tampered:
        return 0.0, f"tampered: {verdicts.tampered}; flagged for the instructor"
    if verdict is None:
        return 0.0, reasons[exercise.grade_id] or "no verdict"
    if verdict.passed and verdict.withheld:
        flags = "; flagged: " + "; ".join(verdict.flags) if verdict.flags else ""
        return 0.0, ("held for review: " + "; ".join(verdict.withheld)
                     + " (the cases agree with the solution)" + flags)
    noted = verdict.withheld + verdict.flags
    flags = "; flagged: " + "; ".join(noted) if noted else ""
    if verdict.passed:
        return exercise.max_points, "ok" + flags
    reason = reasons[exercise.grade_id] or "no points"
    if verdicts.out_of_memory and reason.startswith("not run: the kernel"):
        reason = (f"out of memory: the submission's processes together needed more than "
                  f"the {memory_gb:g} GiB limit")
    return 0.0, reason + flags


def annotate_for_feedback(workspace, student, lesson, notebook, rows: list[GradeRow]) -> None:
    """Write each test cell's gradebook row into the autograded notebook, where the feedback
    page shows it in place of the raw error."""
    graded = workspace / "autograded" / student / lesson / f"{notebook}.ipynb"
    nb = nbformat.read(graded, as_version=4)
    by_id = {row.exercise: row for row in rows}
    for cell in nb.cells:
        row = by_id.get(cell.metadata.get("nbgrader", {}).get("grade_id"))
        if row is not None and cell.cell_type == "code":
            cell.metadata["course_grade"] = {"points": row.points, "max_points": row.max_points,
                                             "status": row.status}
    nbformat.write(nb, graded)


def write_placeholder(feedback_stage: Path, student: str, lesson: str, notebook: str,
                      rows: list[GradeRow]) -> None:
    """A feedback page for a notebook that could not be graded: its rows and reasons."""
    page = feedback_stage / student / lesson / f"{notebook}.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(placeholder_page(student, lesson, notebook, [
        (row.exercise, row.points, row.max_points, row.status) for row in rows]),
        encoding="utf-8")
