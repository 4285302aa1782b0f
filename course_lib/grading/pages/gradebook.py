"""What ``course grade`` writes: the gradebook CSV, the feedback files and the summary."""

from __future__ import annotations

import csv
import io
import os
import shutil
import tempfile
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from course_lib.grading.pages.feedback import install_mathjax

COLUMNS = ("student", "lesson", "exercise", "points", "max_points", "status")
# A spreadsheet evaluates a cell that begins with one of these (CSV or formula injection).
FORMULA_STARTS = ("=", "+", "-", "@", "|", "%")


@dataclass(frozen=True)
class GradeRow:
    student: str
    lesson: str
    exercise: str
    points: float
    max_points: float
    status: str


def gradebook_csv(rows: list[GradeRow]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([f.name for f in fields(GradeRow)])
    for row in rows:
        student, lesson, exercise, points, max_points, status = astuple(row)
        writer.writerow([inert(student), inert(lesson), inert(exercise), f"{points:g}",
                         f"{max_points:g}", inert(status)])
    return buffer.getvalue()


def inert(text: str) -> str:
    """``text`` on one line, and never read by a spreadsheet as a formula: control characters
    become spaces and a leading formula character gets a ``'`` before it (OWASP's advice)."""
    text = "".join(" " if ord(c) < 32 or ord(c) == 127 else c for c in str(text))
    return "'" + text if text.lstrip().startswith(FORMULA_STARTS) else text


def write_outputs(rows: list[GradeRow], out: Path, feedback_stage: Path) -> None:
    """Write the CSV and swap in the feedback folder, each atomically (never half-written)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    with os.fdopen(handle, "w", encoding="utf-8", newline="") as file:
        file.write(gradebook_csv(rows))
    os.replace(tmp, out)
    feedback = out.parent / "feedback"
    staged = Path(tempfile.mkdtemp(prefix=".feedback.", dir=out.parent))
    if feedback_stage.is_dir():
        shutil.copytree(feedback_stage, staged, dirs_exist_ok=True)
    if any(staged.iterdir()):
        install_mathjax(staged)
    old = None
    if feedback.exists():
        old = Path(tempfile.mkdtemp(prefix=".feedback-old.", dir=out.parent))
        os.replace(feedback, old / "feedback")
    os.replace(staged, feedback)
    if old is not None:
        shutil.rmtree(old)


def summary(rows: list[GradeRow]) -> str:
    totals: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        total = totals.setdefault((row.student, row.lesson), [0.0, 0.0])
        total[0] += row.points
        total[1] += row.max_points
    lines = [f"  {student:<20} {lesson:<24} {points:g} / {maximum:g}"
             for (student, lesson), (points, maximum) in sorted(totals.items())]
    return "\n".join(lines)
