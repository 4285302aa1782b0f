"""``course assign [LESSON]``: generate ``exercises/`` from ``solutions/`` with nbgrader.

nbgrader's ``generate_assignment`` replaces code between ``### BEGIN SOLUTION`` and
``### END SOLUTION`` with a stub, deletes ``### BEGIN HIDDEN TESTS`` blocks and locks the test
cells; the result is then cleaned to the repository's notebook policy (no outputs, one
kernelspec), so committing it gives stable diffs.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import nbformat
from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory

from course_lib.grading.config import (
    RELEASE_DIRECTORY,
    SOURCE_DIRECTORY,
    ensure_environment_on_path,
    lessons_with_exercises,
    nbgrader_config,
)
from course_lib.nbhygiene import clean
from course_lib.paths import COURSE_ROOT


class AssignError(RuntimeError):
    """nbgrader could not generate an exercise notebook."""


def generate_release(root: Path, lessons: list[str], release_root: Path, db_path: Path) -> None:
    """Run nbgrader's generate_assignment for ``lessons`` into ``release_root``/<lesson>."""
    ensure_environment_on_path()
    config = nbgrader_config(root, db_path=db_path)
    config.CourseDirectory.release_directory = str(release_root)
    coursedir = CourseDirectory(config=config)
    api = NbGraderAPI(coursedir=coursedir, config=config)
    for lesson in lessons:
        result = api.generate_assignment(lesson, force=True, create=True)
        if not result["success"]:
            raise AssignError(f"nbgrader could not generate {lesson}:\n"
                              f"{result.get('error') or result.get('log')}")


def assign(lessons: list[str] | None = None, root: Path = COURSE_ROOT,
           release_root: Path | None = None) -> list[Path]:
    """Regenerate the student notebooks of ``lessons`` (default: all); returns their paths."""
    known = lessons_with_exercises(root)
    lessons = list(lessons or known)
    unknown = sorted(set(lessons) - set(known))
    if unknown:
        raise AssignError(f"no exercise source for {unknown} under {root / SOURCE_DIRECTORY}; "
                          f"lessons with exercises: {known}")
    release_root = Path(release_root or root / RELEASE_DIRECTORY)
    written = []
    with tempfile.TemporaryDirectory(prefix="course-assign-") as scratch:
        staging = Path(scratch) / "release"
        generate_release(root, lessons, staging, Path(scratch) / "gradebook.db")
        for lesson in lessons:
            target = release_root / lesson
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(staging / lesson, target)
            for path in sorted(target.rglob("*.ipynb")):
                nbformat.write(clean(nbformat.read(path, as_version=4)), path)
                written.append(path)
    return written
