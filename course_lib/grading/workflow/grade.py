"""``course grade SUBMISSIONS_DIR``: autograde a batch with nbgrader, safely.

Layout read (nbgrader's ``submitted/``): ``SUBMISSIONS_DIR/<student>/<lesson>/<notebook>.ipynb``
with the lesson and notebook names of ``solutions/``. Written: the gradebook CSV
(``student,lesson,exercise,points,max_points,status``), and ``feedback/<student>/<lesson>/
<notebook>.html`` beside it.

For each run a private nbgrader course directory is made in a temporary folder: the sources are
copied in and ``generate_assignment`` records every cell's checksum and source (hidden tests
included) in its own database. Each submission is checked (present, a regular file, a valid
notebook) and copied in; ``autograde`` then restores locked and test cells from the database
(nbgrader's checksums), runs the notebook in the sandbox
(:mod:`course_lib.grading.isolation.sandbox`) and scores each test cell. The submissions folder
is only read. Outputs are written atomically, and grading the same folder twice gives the same
files.

With ``workers`` > 1 (``course grade --workers N``) that many processes each keep their own
workspace and take (student, lesson) folders from a shared queue; the gradebook and feedback do
not depend on the number of workers.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import shutil
import tempfile
import warnings
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

import nbgrader
import nbgrader.api
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    IgnorePattern,
    LimitOutput,
    SaveAutoGrades,
)
from sqlalchemy.exc import SAWarning

from course_lib.grading.config import (
    DEFAULT_CELL_TIMEOUT_S,
    DEFAULT_MEMORY_GB,
    SOURCE_DIRECTORY,
    GradingError,
    ensure_environment_on_path,
    lessons_with_exercises,
    nbgrader_config,
    source_notebooks,
)
from course_lib.grading.hidden import HiddenTestError, key_file_for, load_or_create_key
from course_lib.grading.isolation.sandbox import SandboxedExecute, sandbox_available
from course_lib.grading.pages.feedback import configure_feedback
from course_lib.grading.pages.gradebook import GradeRow, summary, write_outputs
from course_lib.grading.verdicts.verdict import load_reference
from course_lib.grading.workflow.runs import find_run, latest_run, new_run, runs_file_for
from course_lib.grading.workflow.unit import exercises_of, failure_text, grade_one
from course_lib.paths import COURSE_ROOT

# nbgrader set-up


def grading_config(workspace: Path, timeout: int, memory_gb: float, unsafe: bool,
                   kernel_threads: int, key: str, nonce: str):
    config = nbgrader_config(workspace, db_path=workspace / "gradebook.db")
    config.CourseDirectory.source_directory = "source"
    config.CourseDirectory.release_directory = "release"
    config.Autograde.autograde_preprocessors = [
        SandboxedExecute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
        SaveAutoGrades, AssignLatePenalties, CheckCellMetadata,
    ]
    config.SandboxedExecute.timeout = timeout
    config.SandboxedExecute.memory_gb = memory_gb
    config.SandboxedExecute.unsafe = unsafe
    config.SandboxedExecute.threads = kernel_threads
    config.SandboxedExecute.source_root = str(workspace / "source")
    config.SandboxedExecute.key = key
    config.SandboxedExecute.nonce = nonce
    config.SandboxedExecute.verdict_root = str(workspace / "verdicts")
    config.SandboxedExecute.files_root = str(workspace / "files")
    configure_feedback(config)
    return config


# The batch


def grading_units(submissions: Path) -> tuple[list[tuple[str, Path]], list[GradeRow]]:
    """The (student, lesson folder) pairs to grade, and rows for what cannot even be listed
    (a student folder that is a link or unreadable). A lesson folder that is a link is listed:
    grading it gives its rows their reason."""
    units, rows = [], []
    for path in sorted(submissions.iterdir()):
        if path.name.startswith("."):
            continue
        if path.is_symlink():
            rows.append(GradeRow(path.name, "", "", 0.0, 0.0,
                                 "refused: the student's folder is a symbolic link"))
            continue
        if not path.is_dir():
            continue
        try:
            lessons = sorted(p for p in path.iterdir() if p.is_symlink() or p.is_dir())
        except OSError as error:
            rows.append(GradeRow(path.name, "", "", 0.0, 0.0,
                                 f"refused: the folder could not be read ({error.strerror})"))
            continue
        units += [(path.name, lesson) for lesson in lessons]
    return units, rows


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def grade(submissions: Path, out: Path, *, root: Path = COURSE_ROOT,
          timeout: int = DEFAULT_CELL_TIMEOUT_S, memory_gb: float = DEFAULT_MEMORY_GB,
          unsafe: bool = False, workers: int = 1, key_file: Path | None = None,
          replay: str | None = None) -> list[GradeRow]:
    """Grade every submission under ``submissions``; write ``out`` and ``feedback/`` beside it.

    ``workers`` processes grade (student, lesson) folders side by side, each in its own nbgrader
    workspace, and each kernel gets ``cpus // workers`` threads, so parallel grading never
    oversubscribes the machine. The rows and files are the same for any number of workers.
    The hidden tests' inputs come from the key in ``key_file`` (default: ``<out>.key`` beside
    the gradebook, made on first use) and a nonce drawn for this run, recorded beside the
    gradebook (:mod:`course_lib.grading.workflow.runs`); ``replay`` names an earlier run whose
    nonce is used again, to repeat it exactly. Whatever one submission does, the batch finishes and
    writes its gradebook: a failure is that submission's rows and reason.
    """
    submissions, out = Path(submissions).resolve(), Path(out).resolve()
    if not submissions.is_dir():
        raise GradingError(f"{submissions} is not a folder of submissions")
    if out.is_relative_to(submissions):
        raise GradingError(f"the gradebook {out} must not be inside the submissions folder "
                           f"{submissions}: grading never writes there")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise GradingError(f"workers must be a whole number >= 1, got {workers!r}")
    key_file = Path(key_file).resolve() if key_file else key_file_for(out)
    if key_file.is_relative_to(submissions):
        raise GradingError(f"the grading key {key_file} must not be inside the submissions "
                           f"folder {submissions}: students' folders reach the sandbox")
    if not sandbox_available() and not unsafe:
        raise GradingError(
            "bubblewrap (bwrap) is not available, so submissions cannot be isolated. Install it "
            "(Debian/Ubuntu: apt-get install bubblewrap) or, for code you trust, pass --unsafe.")
    lessons = lessons_with_exercises(root)
    if not lessons:
        raise GradingError(f"no exercise sources under {root / SOURCE_DIRECTORY}")
    ensure_environment_on_path()
    key = load_or_create_key(key_file)
    runs_file = runs_file_for(out)
    run = find_run(runs_file, replay) if replay else new_run(runs_file)

    units, unlisted = grading_units(submissions)
    workers = max(1, min(workers, len(units)))
    with tempfile.TemporaryDirectory(prefix="course-grade-") as scratch:
        settings = GraderSettings(root=root, scratch=Path(scratch), timeout=timeout,
                                  memory_gb=memory_gb, unsafe=unsafe,
                                  kernel_threads=max(1, available_cpus() // workers), key=key,
                                  nonce=run.nonce)
        rows_by_unit = grade_units(units, settings, workers)
        rows = unlisted + [row for unit_rows in rows_by_unit for row in unit_rows]
        write_outputs(rows, out, settings.feedback_stage)
    return rows


def grade_units(units: list[tuple[str, Path]], settings: GraderSettings,
                workers: int) -> list[list[GradeRow]]:
    """Each unit's rows, in order. A unit whose grading raised, or whose worker died, gets rows
    that say so; a broken pool is replaced for the units still to grade."""
    if workers == 1:
        grader = LessonGrader(settings)
        return [grader.grade(student, lesson_dir) for student, lesson_dir in units]
    done: dict[int, list[GradeRow]] = {}
    context = multiprocessing.get_context("spawn")  # no fork of a process holding torch
    for _ in range(3):
        todo = [i for i in range(len(units)) if i not in done]
        if not todo:
            break
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                                 initargs=(settings,)) as pool:
            futures = {i: pool.submit(_grade_in_worker, units[i]) for i in todo}
            for i, future in futures.items():
                try:
                    done[i] = future.result()
                except BrokenProcessPool:
                    continue
                except Exception as error:  # noqa: BLE001 - one unit never stops the batch
                    done[i] = failed_unit(*units[i], settings.root, error)
    return [done.get(i) or failed_unit(*units[i], settings.root,
                                       RuntimeError("a grading worker died"))
            for i in range(len(units))]


def failed_unit(student: str, lesson_dir: Path, root: Path, error: BaseException
                ) -> list[GradeRow]:
    """Rows for a unit whose grading itself failed: every exercise 0, with the reason."""
    reason = f"grading failed: {type(error).__name__}: {str(error)[:200]}"
    lesson = lesson_dir.name
    try:
        exercises = [e for nb in source_notebooks(lesson, root) for e in exercises_of(nb)]
    except OSError:
        exercises = []
    return [GradeRow(student, lesson, e.grade_id, 0.0, e.max_points, reason)
            for e in exercises] or [GradeRow(student, lesson, "", 0.0, 0.0, reason)]


@dataclass(frozen=True)
class GraderSettings:
    """What every grading process needs; ``scratch`` is the batch's temporary folder."""

    root: Path
    scratch: Path
    timeout: int
    memory_gb: float
    unsafe: bool
    kernel_threads: int
    key: str  # hex; never leaves the grading processes
    nonce: str  # hex; this run's, recorded beside the gradebook

    @property
    def feedback_stage(self) -> Path:
        return self.scratch / "feedback-out"


@functools.cache
def gradebook_schema_version() -> str:
    """The revision nbgrader stamps a new gradebook database with: the head of its own migration
    scripts, read in this process (nbgrader runs the ``alembic heads`` command in a subprocess
    for it, which costs seconds for every new database)."""
    from alembic.config import Config as AlembicConfig
    from alembic.script import ScriptDirectory

    alembic = AlembicConfig()
    alembic.set_main_option("script_location", str(Path(nbgrader.__file__).parent / "alembic"))
    return ScriptDirectory.from_config(alembic).get_current_head()


class LessonGrader:
    """One nbgrader workspace (one database), preparing each lesson the first time it is met."""

    def __init__(self, settings: GraderSettings):
        nbgrader.api.get_alembic_version = gradebook_schema_version
        self.settings = settings
        self.workspace = Path(tempfile.mkdtemp(prefix="workspace-", dir=settings.scratch))
        config = grading_config(self.workspace, settings.timeout, settings.memory_gb,
                                settings.unsafe, settings.kernel_threads, settings.key,
                                settings.nonce)
        self.api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
        self.expected = {
            lesson: {nb.stem: exercises_of(nb) for nb in source_notebooks(lesson, settings.root)}
            for lesson in lessons_with_exercises(settings.root)}
        self.prepared: set[str] = set()

    def prepare(self, lesson: str) -> None:
        if lesson in self.prepared or lesson not in self.expected:
            return
        shutil.copytree(self.settings.root / SOURCE_DIRECTORY / lesson,
                        self.workspace / "source" / lesson)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=SAWarning)  # nbgrader's session noise
            result = self.api.generate_assignment(lesson, force=True, create=True)
        if not result["success"]:
            raise GradingError(f"nbgrader could not prepare {lesson}: {failure_text(result)}")
        for notebook in self.expected[lesson]:  # an author's mistake stops the batch, here
            try:
                load_reference(self.workspace / "source" / lesson / f"{notebook}.ipynb")
            except HiddenTestError as error:
                raise GradingError(f"the hidden tests of {lesson} are broken: {error}") from error
        self.prepared.add(lesson)

    def grade(self, student: str, lesson_dir: Path) -> list[GradeRow]:
        try:
            self.prepare(lesson_dir.name)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", category=SAWarning)
                return grade_one(self.api, self.workspace, student, lesson_dir, self.expected,
                                 self.settings.feedback_stage, self.settings.timeout,
                                 self.settings.memory_gb)
        except GradingError:
            raise
        except Exception as error:  # noqa: BLE001 - one submission must never stop the batch
            return failed_unit(student, lesson_dir, self.settings.root, error)


_WORKER: LessonGrader | None = None


def _start_worker(settings: GraderSettings) -> None:
    global _WORKER
    _WORKER = LessonGrader(settings)


def _grade_in_worker(unit: tuple[str, Path]) -> list[GradeRow]:
    assert _WORKER is not None, "the pool initializer did not run"
    return _WORKER.grade(*unit)


# Writing


def grade_cli(args) -> int:
    timeout = args.timeout or DEFAULT_CELL_TIMEOUT_S
    memory_gb = args.memory_gb or DEFAULT_MEMORY_GB
    if args.unsafe and not sandbox_available():
        print("course grade: WARNING: no sandbox (bubblewrap) here; running submissions "
              "unisolated because --unsafe was given")
    out = Path(args.out)
    rows = grade(Path(args.submissions), out, timeout=timeout, memory_gb=memory_gb,
                 unsafe=args.unsafe, workers=args.workers, key_file=args.key,
                 replay=args.replay)
    run = latest_run(runs_file_for(out.resolve())) if not args.replay else None
    print(f"graded {len({(r.student, r.lesson) for r in rows})} submission(s); "
          f"gradebook: {args.out}; feedback: {out.parent / 'feedback'}")
    print(f"run {args.replay} replayed" if args.replay else
          f"run {run.run_id} (repeat it exactly with --replay {run.run_id})")
    print(summary(rows))
    return 0
