"""``course grade SUBMISSIONS_DIR``: autograde a batch with nbgrader, safely.

Layout read (nbgrader's ``submitted/``): ``SUBMISSIONS_DIR/<student>/<lesson>/<notebook>.ipynb``
with the lesson and notebook names of ``solutions/``. Written: the gradebook CSV
(``student,lesson,exercise,points,max_points,status``), and ``feedback/<student>/<lesson>/
<notebook>.html`` beside it.

For each run a private nbgrader course directory is made in a temporary folder: the sources are
copied in and ``generate_assignment`` records every cell's checksum and source (hidden tests
included) in its own database. Each submission is checked (present, a regular file, a valid
notebook) and copied in; ``autograde`` then restores locked and test cells from the database
(nbgrader's checksums), runs the notebook in the sandbox (:mod:`course_lib.grading.sandbox`) and
scores each test cell. The submissions folder is only read. Outputs are written atomically, and
grading the same folder twice gives the same files.

With ``workers`` > 1 (``course grade --workers N``) that many processes each keep their own
workspace and take (student, lesson) folders from a shared queue; the gradebook and feedback do
not depend on the number of workers.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbconvert.preprocessors import (
    ClearMetadataPreprocessor,
    CSSHTMLHeaderPreprocessor,
    Preprocessor,
)
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearHiddenTests,
    GetGrades,
    IgnorePattern,
    LimitOutput,
    SaveAutoGrades,
)
from sqlalchemy.exc import SAWarning
from traitlets import Bool

from course_lib.course.syllabus import COURSE_ROOT
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
from course_lib.grading.gradebook import GradeRow, summary, write_outputs
from course_lib.grading.hidden import HiddenTestError, key_file_for, load_or_create_key
from course_lib.grading.sandbox import (
    SandboxedExecute,
    copy_without_notebooks,
    sandbox_available,
)
from course_lib.grading.submission import (
    _error_outputs,
    read_submission,
    reasons_by_grade_id,
)
from course_lib.grading.trusted import read_flags
from course_lib.grading.verdict import load_reference


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
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            found.append(Exercise(notebook.stem, meta["grade_id"], float(meta.get("points", 0))))
    return found


# ---------------------------------------------------------------------------------------------
# Checking a submitted file before anything runs


# ---------------------------------------------------------------------------------------------
# Turning an autograded notebook into reasons


# ---------------------------------------------------------------------------------------------
# nbgrader set-up


class RedactHiddenTests(Preprocessor):
    """For feedback: hidden test code leaves the test cells, and tracebacks shrink to their last
    line, so students learn what failed without seeing the hidden tests."""

    enabled = Bool(True)

    def preprocess_cell(self, cell, resources, index):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            for output in _error_outputs(cell):
                output["traceback"] = [f"{output.get('ename')}: {output.get('evalue')}"]
        return cell, resources


def grading_config(workspace: Path, timeout: int, memory_gb: float, unsafe: bool,
                   kernel_threads: int, key: str):
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
    config.SandboxedExecute.verdict_root = str(workspace / "verdicts")
    config.GenerateFeedback.preprocessors = [
        GetGrades, ClearHiddenTests, RedactHiddenTests, CSSHTMLHeaderPreprocessor,
    ]
    config.ClearHiddenTests.enforce_metadata = False
    return config


def _failure_text(result: dict) -> str:
    text = (result.get("error") or result.get("log") or "unknown error").strip().splitlines()
    return text[-1][:300] if text else "unknown error"


# ---------------------------------------------------------------------------------------------
# The batch


def student_folders(submissions: Path) -> Iterable[Path]:
    for path in sorted(submissions.iterdir()):
        if path.is_dir() and not path.is_symlink() and not path.name.startswith("."):
            yield path


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def grade(submissions: Path, out: Path, *, root: Path = COURSE_ROOT,
          timeout: int = DEFAULT_CELL_TIMEOUT_S, memory_gb: float = DEFAULT_MEMORY_GB,
          unsafe: bool = False, workers: int = 1, key_file: Path | None = None) -> list[GradeRow]:
    """Grade every submission under ``submissions``; write ``out`` and ``feedback/`` beside it.

    ``workers`` processes grade (student, lesson) folders side by side, each in its own nbgrader
    workspace, and each kernel gets ``cpus // workers`` threads, so parallel grading never
    oversubscribes the machine. The rows and files are the same for any number of workers.
    The hidden tests' inputs come from the key in ``key_file`` (default: ``<out>.key`` beside
    the gradebook, made on first use).
    """
    submissions, out = Path(submissions).resolve(), Path(out).resolve()
    if not submissions.is_dir():
        raise GradingError(f"{submissions} is not a folder of submissions")
    if out.is_relative_to(submissions):
        raise GradingError(f"the gradebook {out} must not be inside the submissions folder "
                           f"{submissions}: grading never writes there")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise GradingError(f"workers must be a whole number >= 1, got {workers!r}")
    if not sandbox_available() and not unsafe:
        raise GradingError(
            "bubblewrap (bwrap) is not available, so submissions cannot be isolated. Install it "
            "(Debian/Ubuntu: apt-get install bubblewrap) or, for code you trust, pass --unsafe.")
    lessons = lessons_with_exercises(root)
    if not lessons:
        raise GradingError(f"no exercise sources under {root / SOURCE_DIRECTORY}")
    ensure_environment_on_path()
    key_file = Path(key_file).resolve() if key_file else key_file_for(out)
    if key_file.is_relative_to(submissions):
        raise GradingError(f"the grading key {key_file} must not be inside the submissions "
                           f"folder {submissions}: students' folders reach the sandbox")
    key = load_or_create_key(key_file)

    units = [(student_dir.name, lesson_dir) for student_dir in student_folders(submissions)
             for lesson_dir in sorted(p for p in student_dir.iterdir() if p.is_dir())]
    workers = max(1, min(workers, len(units)))
    with tempfile.TemporaryDirectory(prefix="course-grade-") as scratch:
        settings = GraderSettings(root=root, scratch=Path(scratch), timeout=timeout,
                                  memory_gb=memory_gb, unsafe=unsafe,
                                  kernel_threads=max(1, available_cpus() // workers), key=key)
        if workers == 1:
            grader = LessonGrader(settings)
            rows_by_unit = [grader.grade(student, lesson_dir) for student, lesson_dir in units]
        else:
            context = multiprocessing.get_context("spawn")  # no fork of a process holding torch
            with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                                     initargs=(settings,)) as pool:
                rows_by_unit = list(pool.map(_grade_in_worker, units))
        rows = [row for unit_rows in rows_by_unit for row in unit_rows]
        write_outputs(rows, out, settings.feedback_stage)
    return rows


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

    @property
    def feedback_stage(self) -> Path:
        return self.scratch / "feedback-out"


class LessonGrader:
    """One nbgrader workspace (one database), preparing each lesson the first time it is met."""

    def __init__(self, settings: GraderSettings):
        self.settings = settings
        self.workspace = Path(tempfile.mkdtemp(prefix="workspace-", dir=settings.scratch))
        config = grading_config(self.workspace, settings.timeout, settings.memory_gb,
                                settings.unsafe, settings.kernel_threads, settings.key)
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
            raise GradingError(f"nbgrader could not prepare {lesson}: {_failure_text(result)}")
        for notebook in self.expected[lesson]:  # an author's mistake stops the batch, here
            try:
                load_reference(self.workspace / "source" / lesson / f"{notebook}.ipynb")
            except HiddenTestError as error:
                raise GradingError(f"the hidden tests of {lesson} are broken: {error}") from error
        self.prepared.add(lesson)

    def grade(self, student: str, lesson_dir: Path) -> list[GradeRow]:
        self.prepare(lesson_dir.name)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=SAWarning)
            return grade_one(self.api, self.workspace, student, lesson_dir, self.expected,
                             self.settings.feedback_stage, self.settings.timeout,
                             self.settings.memory_gb)


_WORKER: LessonGrader | None = None


def _start_worker(settings: GraderSettings) -> None:
    global _WORKER
    _WORKER = LessonGrader(settings)


def _grade_in_worker(unit: tuple[str, Path]) -> list[GradeRow]:
    assert _WORKER is not None, "the pool initializer did not run"
    return _WORKER.grade(*unit)


def grade_one(api, workspace, student, lesson_dir, expected, feedback_stage, timeout,
              memory_gb) -> list[GradeRow]:
    """Rows for one student's lesson folder; never raises for anything the submission did."""
    lesson = lesson_dir.name
    if lesson not in expected:
        return [GradeRow(student, lesson, "", 0.0, 0.0,
                         f"unknown lesson {lesson!r}; expected one of {sorted(expected)}")]
    target = workspace / "submitted" / student / lesson
    usable, rows_by_notebook = {}, {}
    for notebook, exercises in expected[lesson].items():
        nb, reason = read_submission(lesson_dir / f"{notebook}.ipynb")
        if nb is None:
            rows_by_notebook[notebook] = [GradeRow(student, lesson, e.grade_id, 0.0, e.max_points,
                                                   reason) for e in exercises]
        else:
            usable[notebook] = nb
    if usable:
        copy_without_notebooks(lesson_dir, target)
        for notebook, nb in usable.items():
            nbformat.write(nb, target / f"{notebook}.ipynb")
        try:
            result = api.autograde(lesson, student, force=True, create=True)
            failure = "" if result["success"] else f"grading failed: {_failure_text(result)}"
        except Exception as error:  # noqa: BLE001 - one submission must never stop the batch
            failure = f"grading failed: {type(error).__name__}: {error}"
        for notebook in usable:
            rows_by_notebook[notebook] = collect_rows(
                workspace, student, lesson, notebook, expected[lesson][notebook], failure,
                timeout, memory_gb)
        if not failure:
            api.generate_feedback(lesson, student, force=True)
            produced = workspace / "feedback" / student / lesson
            if produced.is_dir():
                shutil.copytree(produced, feedback_stage / student / lesson, dirs_exist_ok=True)
    return [row for notebook in expected[lesson] for row in rows_by_notebook[notebook]]


def collect_rows(workspace, student, lesson, notebook, exercises, failure, timeout,
                 memory_gb) -> list[GradeRow]:
    if failure:
        return [GradeRow(student, lesson, e.grade_id, 0.0, e.max_points, failure)
                for e in exercises]
    graded = workspace / "autograded" / student / lesson / f"{notebook}.ipynb"
    reasons = reasons_by_grade_id(nbformat.read(graded, as_version=4), timeout, memory_gb)
    flags = read_flags(workspace / "verdicts" / student / lesson / f"{notebook}.json")
    rows = []
    with Gradebook(f"sqlite:///{workspace / 'gradebook.db'}") as gradebook:
        for exercise in exercises:
            if exercise.grade_id not in reasons:
                rows.append(GradeRow(student, lesson, exercise.grade_id, 0.0, exercise.max_points,
                                     "test cell deleted from the submission"))
                continue
            try:
                found = gradebook.find_grade(exercise.grade_id, notebook, lesson, student)
                points = float(found.score)
            except MissingEntry:
                points = 0.0
            status = "ok" if points >= exercise.max_points else (
                reasons[exercise.grade_id] or "no points")
            if flags.get(exercise.grade_id):
                status += "; flagged: " + "; ".join(flags[exercise.grade_id])
            rows.append(GradeRow(student, lesson, exercise.grade_id, points, exercise.max_points,
                                 status))
    return rows


# ---------------------------------------------------------------------------------------------
# Writing


def grade_cli(args) -> int:
    timeout = args.timeout or DEFAULT_CELL_TIMEOUT_S
    memory_gb = args.memory_gb or DEFAULT_MEMORY_GB
    if args.unsafe and not sandbox_available():
        print("course grade: WARNING: no sandbox (bubblewrap) here; running submissions "
              "unisolated because --unsafe was given")
    rows = grade(Path(args.submissions), Path(args.out), timeout=timeout, memory_gb=memory_gb,
                 unsafe=args.unsafe, workers=args.workers, key_file=args.key)
    print(f"graded {len({(r.student, r.lesson) for r in rows})} submission(s); "
          f"gradebook: {args.out}; feedback: {Path(args.out).parent / 'feedback'}")
    print(summary(rows))
    return 0
