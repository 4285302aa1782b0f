"""The lessons' question cells, kept in step with the question bank.

Each question of ``course_lib/widgets/questions/<lesson>.yaml`` is asked by one code cell of its
lesson, ``quiz("<lesson>.<id>")``, placed right after the cell its ``after_cell`` names (tagged
``remove-input``: the site shows the question, not the call). ``python -m
course_lib.course.quiz_cells`` inserts the cells that are missing, moves those that are out of
place and removes those whose question left the bank; the test suite checks there is nothing
left to do.
"""

from __future__ import annotations

import json
import re
import secrets
import sys
from pathlib import Path

from course_lib.course.syllabus import COURSE_ROOT, LESSONS
from course_lib.widgets.quiz import Question, load_bank

IMPORT = "from course_lib.widgets.quiz import quiz\n\n"
TAGS = ["quiz", "remove-input"]
_CALL = re.compile(r"^(?:from course_lib\.widgets\.quiz import quiz\s+)?quiz\(\"([\w.-]+)\"\)\s*$")


def quiz_cell(question: Question) -> dict:
    return {"cell_type": "code", "id": secrets.token_hex(4), "metadata": {"tags": TAGS},
            "execution_count": None, "outputs": [],
            "source": (IMPORT + f'quiz("{question.qid}")').splitlines(keepends=True)}


def asked(cell: dict) -> str | None:
    """The question id a quiz cell asks, None for any other cell."""
    match = _CALL.match("".join(cell["source"]).strip()) if cell["cell_type"] == "code" else None
    return match.group(1) if match else None


def synced(notebook: dict, questions: list[Question]) -> dict:
    """``notebook`` with exactly one cell per question, right after its ``after_cell``; cells
    already there keep their ids. ``KeyError`` for an ``after_cell`` the lesson lacks."""
    existing = {asked(cell): cell for cell in notebook["cells"] if asked(cell)}
    cells = [cell for cell in notebook["cells"] if not asked(cell)]
    ids = [cell.get("id") for cell in cells]
    for question in questions:
        if question.after_cell not in ids:
            raise KeyError(f"{question.qid}: after_cell {question.after_cell!r} is not a cell of "
                           f"lesson {question.lesson}")
    result = []
    for cell in cells:
        result.append(cell)
        for question in questions:
            if question.after_cell == cell.get("id"):
                kept = existing.get(question.qid)
                result.append(kept if kept is not None else quiz_cell(question))
    for cell in result:  # each cell imports quiz(), so that any one of them runs on its own
        if asked(cell):
            cell["source"] = (IMPORT + f'quiz("{asked(cell)}")').splitlines(keepends=True)
            cell["metadata"]["tags"] = TAGS
    return {**notebook, "cells": result}


def lesson_questions(number: str) -> list[Question]:
    return [q for q in load_bank().values() if q.lesson == number]


def sync_all(root: Path = COURSE_ROOT, *, write: bool = True) -> list[str]:
    """Bring every lesson's quiz cells in step with the bank; the lessons that changed."""
    changed = []
    for lesson in LESSONS:
        path = root / lesson.notebook
        notebook = json.loads(path.read_text())
        new = synced(json.loads(json.dumps(notebook)), lesson_questions(lesson.number))
        if new != notebook:
            changed.append(lesson.number)
            if write:
                path.write_text(json.dumps(new, indent=1, ensure_ascii=False) + "\n")
    return changed


if __name__ == "__main__":
    done = sync_all()
    print(f"quiz cells updated in lessons {done}" if done else "quiz cells already in step")
    sys.exit(0)
