"""The nbgrader configuration of the course, in one place.

nbgrader's source directory is ``solutions/`` and its release directory ``exercises/``; one
assignment per lesson folder (``solutions/<lesson>/<lesson>_exercises.ipynb``). The repository's
``nbgrader_config.py`` loads this too, so plain ``nbgrader`` commands run from the course folder
agree with ``course assign`` and ``course grade``.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

from traitlets.config import Config

from course_lib.paths import COURSE_ROOT

SOURCE_DIRECTORY = "solutions"
RELEASE_DIRECTORY = "exercises"
CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
DEFAULT_CELL_TIMEOUT_S = 60
# Stream lines kept per cell of a graded notebook (nbgrader's LimitOutput, and the sandbox's runner)
MAX_OUTPUT_LINES = 500
DEFAULT_MEMORY_GB = 4.0


def nbgrader_config(root: Path = COURSE_ROOT, *, db_path: Path | None = None) -> Config:
    """The course's nbgrader settings, with the course directory at ``root``."""
    c = Config()
    c.CourseDirectory.root = str(root)
    c.CourseDirectory.source_directory = SOURCE_DIRECTORY
    c.CourseDirectory.release_directory = RELEASE_DIRECTORY
    c.CourseDirectory.course_id = "attention-course"
    if db_path is not None:
        c.CourseDirectory.db_url = f"sqlite:///{db_path}"
    c.ClearSolutions.code_stub = {"python": CODE_STUB}
    c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
    c.Execute.timeout = DEFAULT_CELL_TIMEOUT_S
    c.Execute.kernel_name = "python3"  # the grading environment's own Python
    c.LimitOutput.max_lines = MAX_OUTPUT_LINES
    return c


def lessons_with_exercises(root: Path = COURSE_ROOT) -> list[str]:
    """Lesson folders under ``solutions/`` that hold at least one notebook, sorted."""
    source = root / SOURCE_DIRECTORY
    return sorted(p.name for p in source.iterdir()
                  if p.is_dir() and any(p.glob("*.ipynb"))) if source.is_dir() else []


def source_notebooks(lesson: str, root: Path = COURSE_ROOT) -> list[Path]:
    return sorted((root / SOURCE_DIRECTORY / lesson).glob("*.ipynb"))


def ensure_environment_on_path() -> None:
    """nbgrader runs ``alembic`` by name: make this environment's scripts findable even when
    ``course`` was started as ``.venv/bin/course`` without activating the environment."""
    scripts = str(Path(sys.executable).parent)
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")


class GradingError(RuntimeError):
    """The batch cannot be graded at all (bad arguments, no sandbox); never one submission."""


def read_source_notebook(path: Path):
    """A source notebook of the grader's, read once per file version in this process (the
    reference, the deadlines and the static check all read it). Callers must not change it.
    nbformat is imported here, not with this module: the grading kernel imports this module
    (through the hidden tests), and nbformat is slow to import."""
    path = Path(path).resolve()
    return _read_source(str(path), path.stat().st_mtime)


@functools.lru_cache(maxsize=64)
def _read_source(path: str, mtime: float):
    import nbformat

    return nbformat.read(path, as_version=4)
