"""Autograding end to end: correct, untouched, misbehaving and cheating submissions in one batch.

The batch is graded once per test session (module fixture) with a short cell timeout, on two
worker processes; each test then reads its rows. Sandbox tests need bubblewrap; CI installs
it, so there they must not skip. The cheats (tests/cheats.py) solve nothing and try to talk
their way through; every one must score zero.
"""

import copy
import csv
import hashlib
import html as html_module
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_lib.course.syllabus import COURSE_ROOT
from course_lib.grading.config import lessons_with_exercises, source_notebooks
from course_lib.grading.isolation import sandbox
from course_lib.grading.isolation.budget import make_group
from course_lib.grading.pages.gradebook import FORMULA_STARTS
from course_lib.grading.workflow import grade as grade_module
from course_lib.grading.workflow.grade import GradingError, exercises_of, grade
from course_lib.grading.workflow.runs import latest_run, runs_file_for
from tests.attacks import ATTACKS, EXPECTED, HONEST
from tests.cheats import CHEATS, make_cheat
from tests.grading_styles import honest_notebooks
from tests.reproduce_cli import refusal

ROOT = COURSE_ROOT
LESSONS = lessons_with_exercises(ROOT)
FIRST = LESSONS[0]
NOTEBOOK = source_notebooks(FIRST)[0].stem
# The lessons every cheat, and the untouched notebook, are graded on here. On every exercise of
# every lesson, tests/test_hidden_tests.py checks in-process what decides those verdicts: the
# untouched stub is "not attempted", and zeros fail with every check rebound to agree.
CHEAT_LESSONS = (FIRST, "04_bahdanau")
# Per cell. Generous: on a 2-core CI machine the batch shares the cores with another pytest
# worker and its own second grading worker, and a slow solution cell must not time out.
TIMEOUT_S = 15
HAS_SANDBOX = sandbox.sandbox_available()
MEMORY_GB = 3.0
# A markdown cell whose rendering would take minutes (each unclosed \begin is searched for to the
# end of the cell: quadratic), 312 KiB as the attack that found it.
STALL = "\\begin{a}" * (312 * 1024 // 9)

if not HAS_SANDBOX and os.environ.get("CI"):
    raise RuntimeError("CI must run the grading tests in the sandbox: install bubblewrap")
needs_sandbox = pytest.mark.skipif(not HAS_SANDBOX, reason="bubblewrap is not installed")


def cell_index(nb, grade_id):
    return next(i for i, c in enumerate(nb.cells)
                if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def solution(lesson=FIRST, notebook=NOTEBOOK):
    return nbformat.read(ROOT / "solutions" / lesson / f"{notebook}.ipynb", as_version=4)


def untouched(lesson=FIRST, notebook=NOTEBOOK):
    return nbformat.read(ROOT / "exercises" / lesson / f"{notebook}.ipynb", as_version=4)


def with_code(nb, grade_id, source):
    nb = copy.deepcopy(nb)
    nb.cells[cell_index(nb, grade_id)].source = source
    return nb


def tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for root, folders, files in os.walk(folder):  # links are not followed
        folders.sort()
        for name in sorted(folders + files):
            path = Path(root) / name
            digest.update(str(path.relative_to(folder)).encode())
            if path.is_symlink():
                digest.update(os.readlink(path).encode())
            elif path.is_file() and path.stat().st_size < 2**26:
                digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Write every kind of submission, grade once, return (rows by student, paths)."""
    if not HAS_SANDBOX:
        pytest.skip("bubblewrap is not installed")
    base = tmp_path_factory.mktemp("grading")
    subs, out = base / "submitted", base / "out" / "gradebook.csv"
    canary = base / "outside.txt"
    out.parent.mkdir()
    out.write_text("an old gradebook\n")

    def put(student, nb_or_bytes, lesson=FIRST, notebook=NOTEBOOK):
        folder = subs / student / lesson
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{notebook}.ipynb"
        if isinstance(nb_or_bytes, bytes):
            path.write_bytes(nb_or_bytes)
        else:
            nbformat.write(nb_or_bytes, path)

    for lesson in LESSONS:  # the course-wide invariant: every solution notebook runs clean
        for nb_path in source_notebooks(lesson):
            put("solution", solution(lesson, nb_path.stem), lesson, nb_path.stem)
    for lesson in CHEAT_LESSONS:
        for nb_path in source_notebooks(lesson):
            put("untouched", untouched(lesson, nb_path.stem), lesson, nb_path.stem)
    put("syntax", with_code(solution(), "ex1_code", "def stable_softmax(scores, dim=-1)\n    ret"))
    put("raises", with_code(solution(), "ex2_code",
                            "def dot_scores(queries, keys):\n    return 1 / 0"))
    # The loop sleeps instead of spinning: the timeout is the same, and a spinning loop would
    # take a core from the rest of the suite for the whole of it.
    put("loops", with_code(solution(), "ex3_code",
                           "import time\n\ndef masked_mean(values, mask):\n"
                           "    while True:\n        time.sleep(1)"))
    put("memory", with_code(solution(), "ex4_code", "hog = bytearray(64 * 2**30)"))
    put("dies", with_code(solution(), "ex2_code", "import os\nos._exit(1)"))
    edited = with_code(untouched(), "ex1_code",
                       "def stable_softmax(scores, dim=-1):\n    return scores")
    edited = with_code(edited, "ex1_stable_softmax", "pass  # the test, weakened")
    put("edits_tests", edited)
    deleted = solution()
    del deleted.cells[cell_index(deleted, "ex2_dot_scores")]
    put("deletes_tests", deleted)
    hidden = ROOT / "solutions" / FIRST / f"{NOTEBOOK}.ipynb"
    other = subs / "solution" / FIRST / f"{NOTEBOOK}.ipynb"
    snoop = with_code(solution(), "ex2_code", solution().cells[
        cell_index(solution(), "ex2_code")].source + f"""

def attempt(label, action):
    try:
        action()
        print(label, "SUCCEEDED")
    except Exception as error:
        print(label, "blocked", type(error).__name__)

attempt("read-solutions", lambda: open({str(hidden)!r}).read())
attempt("overwrite-gradebook", lambda: open({str(out)!r}, "w").write("hacked"))
attempt("write-outside", lambda: open({str(canary)!r}, "w").write("escaped"))
attempt("read-others", lambda: open({str(other)!r}).read())
attempt("network", lambda: __import__("socket").create_connection(("1.1.1.1", 53), timeout=3))
""")
    put("snoops", snoop)
    put("empty", b"")
    put("not_json", b"this is not a notebook")
    (subs / "missing" / FIRST).mkdir(parents=True)
    (subs / "missing" / FIRST / "notes.txt").write_text("forgot the notebook")
    put("wrong_lesson", solution(), lesson="99_no_such_lesson")
    put("calls_reference", with_code(solution(), "ex1_code",
                                     "def stable_softmax(scores, dim=-1):\n"
                                     "    return torch.softmax(scores, dim=dim)"))
    for cheat in CHEATS:
        for lesson in CHEAT_LESSONS:
            for nb_path in source_notebooks(lesson):
                put(cheat, make_cheat(cheat, untouched(lesson, nb_path.stem)), lesson,
                    nb_path.stem)
    context = {"peer": subs / "solution" / FIRST, "solutions": ROOT / "solutions" / FIRST}
    for name, write in {**ATTACKS, **HONEST}.items():
        write(subs / name / FIRST, untouched(), solution(), context)
    (subs / "links_its_whole_folder").symlink_to(subs / "solution", target_is_directory=True)
    for index, (_, nb) in enumerate(honest_notebooks(solution())):
        put(f"honest_{index}", nb)
    marked = copy.deepcopy(solution())
    marked.cells.insert(cell_index(marked, "ex1_code") + 1, nbformat.v4.new_code_cell(
        "# my notes: the grader appends\n### BEGIN HIDDEN TESTS\nprint('to the test cell')\n"))
    put("writes_the_hidden_markers", marked)
    stalled = copy.deepcopy(solution())
    stalled.cells.insert(1, nbformat.v4.new_markdown_cell(STALL))
    put("stalls_the_feedback", stalled)

    before = tree_digest(subs)
    rows = grade(subs, out, timeout=TIMEOUT_S, memory_gb=MEMORY_GB, workers=2)
    by_student = {}
    for row in rows:
        by_student.setdefault(row.student, {})[(row.lesson, row.exercise)] = row
    return {"rows": rows, "by": by_student, "subs": subs, "out": out, "canary": canary,
            "before": before, "base": base, "key": out.with_name("gradebook.key"),
            "run": latest_run(runs_file_for(out))}


def statuses(batch, student):
    return {exercise: (row.points, row.status)
            for (lesson, exercise), row in batch["by"][student].items()}


def test_gradebook_has_the_promised_columns(batch):
    with open(batch["out"], newline="") as file:
        table = list(csv.reader(file))
    assert table[0] == ["student", "lesson", "exercise", "points", "max_points", "status"]
    assert len(table) == len(batch["rows"]) + 1


def feedback_page(batch, student, lesson=FIRST, notebook=NOTEBOOK) -> Path:
    """Where the batch wrote ``student``'s feedback page for ``notebook``."""
    return batch["out"].parent / "feedback" / student / lesson / f"{notebook}.html"


# An error output as the feedback page shows it (a test cell's error is its row's status instead).
ERROR_OUTPUT = re.compile(r'class="[^"]*\boutput_error\b')


def error_outputs(batch, student, lesson=FIRST, notebook=NOTEBOOK) -> int:
    return len(ERROR_OUTPUT.findall(feedback_page(batch, student, lesson, notebook).read_text()))


def test_every_solution_scores_full_marks_and_runs_every_cell_without_an_error(batch):
    """The batch runs every solution notebook top to bottom (the suite's only run of them):
    full marks, and no cell of it, graded or not, raises."""
    for lesson in LESSONS:
        expected = [e for nb in source_notebooks(lesson) for e in exercises_of(nb)]
        assert len(expected) >= 3, f"{lesson} needs at least three exercises"
        rows = [r for (les, _), r in batch["by"]["solution"].items() if les == lesson]
        assert len(rows) == len(expected)
        for row in rows:
            assert (row.points, row.status) == (row.max_points, "ok"), row
        for notebook in source_notebooks(lesson):
            assert error_outputs(batch, "solution", lesson, notebook.stem) == 0, notebook.name
    assert error_outputs(batch, "syntax") > 0  # the count sees a cell's error when there is one


def test_every_untouched_exercise_scores_zero_with_a_reason(batch):
    assert {lesson for lesson, _ in batch["by"]["untouched"]} == set(CHEAT_LESSONS)
    for row in batch["by"]["untouched"].values():
        assert row.points == 0 and row.max_points > 0
        assert row.status.startswith("not attempted"), row


def test_syntax_error_costs_only_its_exercise(batch):
    got = statuses(batch, "syntax")
    assert got["ex1_stable_softmax"][0] == 0
    assert got["ex1_stable_softmax"][1].startswith("syntax error")
    assert all(got[e] == (2, "ok") for e in ("ex2_dot_scores", "ex3_masked_mean",
                                            "ex4_causal_mask"))


def test_raising_code_is_reported(batch):
    got = statuses(batch, "raises")
    assert got["ex2_dot_scores"][0] == 0
    assert got["ex2_dot_scores"][1].startswith("raised ZeroDivisionError: division by zero")
    assert got["ex1_stable_softmax"] == (2, "ok")


def test_infinite_loop_times_out_and_the_rest_is_graded(batch):
    got = statuses(batch, "loops")
    assert got["ex3_masked_mean"] == (0, f"timed out: a cell ran longer than {TIMEOUT_S} s")
    assert got["ex4_causal_mask"] == (2, "ok")


def test_huge_allocation_fails_its_exercise_only(batch):
    got = statuses(batch, "memory")
    assert got["ex4_causal_mask"][0] == 0
    assert got["ex4_causal_mask"][1].startswith("out of memory")
    assert got["ex1_stable_softmax"] == (2, "ok")


def test_a_submission_that_kills_its_kernel(batch):
    got = statuses(batch, "dies")
    assert got["ex1_stable_softmax"] == (2, "ok")
    for exercise in ("ex2_dot_scores", "ex3_masked_mean", "ex4_causal_mask"):
        points, status = got[exercise]
        assert points == 0 and status.startswith("not run: the kernel"), (exercise, status)


def test_weakened_test_cell_is_restored_before_grading(batch):
    got = statuses(batch, "edits_tests")
    points, status = got["ex1_stable_softmax"]
    assert points == 0
    # the restored self-check fails first, in the kernel; the hidden cases never run
    assert status.startswith("self-check failed: stable_softmax: values differ")


def test_deleted_test_cell_scores_zero(batch):
    got = statuses(batch, "deletes_tests")
    assert got["ex2_dot_scores"] == (0, "test cell deleted from the submission")
    assert got["ex3_masked_mean"] == (2, "ok")


def test_snooping_submission_is_contained(batch):
    got = statuses(batch, "snoops")
    # Correct code whose snooping the sandbox contained: socket, named by a literal __import__,
    # reaches nothing of the grading (the sandbox has no network), so nothing is held.
    assert all(status == (2, "ok") for status in got.values()), got
    assert not batch["canary"].exists()
    assert batch["out"].read_text().startswith("student,lesson,exercise")  # not "hacked"
    html = feedback_page(batch, "snoops").read_text()
    for label in ("read-solutions", "overwrite-gradebook", "write-outside", "read-others",
                  "network"):
        assert f"{label} blocked" in html, label
        assert f"{label} SUCCEEDED" not in html, label


def test_broken_files_get_a_reason_and_zero(batch):
    empty, not_json, missing = (statuses(batch, s) for s in ("empty", "not_json", "missing"))
    assert all(p == 0 and "empty file" in s for p, s in empty.values())
    assert all(p == 0 and "not a valid notebook" in s for p, s in not_json.values())
    assert all(p == 0 and "missing from the submission" in s for p, s in missing.values())
    (row,) = batch["by"]["wrong_lesson"].values()
    assert "unknown lesson" in row.status


def test_submissions_are_never_modified(batch):
    assert tree_digest(batch["subs"]) == batch["before"]


def test_feedback_per_student_without_hidden_tests(batch):
    feedback = batch["out"].parent / "feedback"
    html = (feedback / "untouched" / FIRST / f"{NOTEBOOK}.html").read_text()
    assert "0 / 2 points: not attempted (the cell still raises NotImplementedError)" in html
    assert "HIDDEN TESTS" not in html
    hidden_lines = hidden_test_lines()
    assert hidden_lines and not any(line in html for line in hidden_lines)
    assert ">Comment</a>" not in html and "Comments:" not in html  # no empty comment entries
    for student in ("empty", "not_json", "missing", "links_to_a_peer"):  # a page all the same
        page = (feedback / student / FIRST / f"{NOTEBOOK}.html").read_text()
        status = html_module.escape(next(iter(batch["by"][student].values())).status)
        assert status in page and "<script" not in page, student


def hidden_test_lines():
    lines = []
    for lesson in LESSONS:
        for path in source_notebooks(lesson):
            for cell in nbformat.read(path, as_version=4).cells:
                inside = False
                for line in cell.source.splitlines():
                    if "BEGIN HIDDEN TESTS" in line:
                        inside = True
                    elif "END HIDDEN TESTS" in line:
                        inside = False
                    elif inside and len(line.strip()) > 25:
                        lines.append(line.strip())
    return lines


@needs_sandbox
def test_regrading_one_by_one_gives_the_batchs_files(batch, tmp_path):
    # Idempotence and independence from the number of workers in one go: one lesson's folders,
    # regraded by a single process, must give the rows and feedback files the two-worker batch
    # gave them. One lesson is enough, these are the grader's properties.
    subs, students = tmp_path / "subs", ("solution", "untouched")
    for student in students:
        target = subs / student / FIRST
        target.mkdir(parents=True)
        for f in (batch["subs"] / student / FIRST).iterdir():
            target.joinpath(f.name).write_bytes(f.read_bytes())
    out = tmp_path / "gb" / "gradebook.csv"
    # The batch's key and run, replayed: the same hidden inputs, so the same verdicts and
    # feedback.
    out.parent.mkdir()
    runs = runs_file_for(out)
    runs.write_bytes(runs_file_for(batch["out"]).read_bytes())
    rows = grade(subs, out, timeout=TIMEOUT_S, memory_gb=3.0, workers=1, key_file=batch["key"],
                 replay=batch["run"].run_id)
    assert rows == [r for r in batch["rows"] if r.student in students and r.lesson == FIRST]
    for student in students:
        again, first = (folder / "feedback" / student / FIRST
                        for folder in (out.parent, batch["out"].parent))
        assert tree_digest(again) == tree_digest(first)
    assert sorted(p.name for p in out.parent.iterdir()) == [
        "feedback", "gradebook.csv", runs.name]
    assert latest_run(runs) == batch["run"]  # a replay records no new run
    # A fresh run into the same folder reuses the key kept beside the gradebook and draws new
    # inputs: honest work scores the same.
    (out.parent / "gradebook.key").write_bytes(batch["key"].read_bytes())
    assert grade(subs, out, timeout=TIMEOUT_S, memory_gb=3.0) == rows
    assert latest_run(runs) != batch["run"]
    with pytest.raises(GradingError, match="no run 'nope' is recorded"):
        grade(subs, out, timeout=TIMEOUT_S, memory_gb=3.0, replay="nope")


def test_workers_must_be_a_positive_whole_number(tmp_path):
    (tmp_path / "subs").mkdir()
    for bad in (0, -1, 1.5, True):
        with pytest.raises(GradingError, match="workers must be a whole number >= 1"):
            grade(tmp_path / "subs", tmp_path / "gradebook.csv", workers=bad)


def test_gradebook_write_is_atomic(tmp_path, monkeypatch):
    out = tmp_path / "gradebook.csv"
    out.write_text("previous gradebook\n")
    row = grade_module.GradeRow("s", "l", "e", 1.0, 2.0, "ok")

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(grade_module.os, "replace", crash)
    with pytest.raises(OSError):
        grade_module.write_outputs([row], out, tmp_path / "no-feedback")
    assert out.read_text() == "previous gradebook\n"


@pytest.mark.parametrize("sandbox", [True, False], ids=["with-bwrap", "without-bwrap"])
def test_gradebook_inside_submissions_is_refused(tmp_path, monkeypatch, sandbox):
    """The paths are checked before anything else, so the check holds with or without bwrap."""
    monkeypatch.setattr(grade_module, "sandbox_available", lambda: sandbox)
    (tmp_path / "subs").mkdir()
    with pytest.raises(GradingError, match="must not be inside the submissions"):
        grade(tmp_path / "subs", tmp_path / "subs" / "gradebook.csv")
    with pytest.raises(GradingError, match="key .* must not be inside the submissions"):
        grade(tmp_path / "subs", tmp_path / "gradebook.csv",
              key_file=tmp_path / "subs" / "alice" / "gradebook.key")


def test_broken_hidden_tests_stop_the_batch(tmp_path):
    root = tmp_path / "course"
    shutil.copytree(ROOT / "solutions" / FIRST, root / "solutions" / FIRST)
    source = root / "solutions" / FIRST / f"{NOTEBOOK}.ipynb"
    nb = nbformat.read(source, as_version=4)
    cell = nb.cells[cell_index(nb, "ex2_dot_scores")]
    cell.source = cell.source.replace('grade_with("ex2_dot_scores"', 'grade_with("ex9"')
    nbformat.write(nb, source)
    put = tmp_path / "subs" / "alice" / FIRST
    put.mkdir(parents=True)
    nbformat.write(solution(), put / f"{NOTEBOOK}.ipynb")
    with pytest.raises(GradingError, match="hidden tests of .* are broken.*ex2_dot_scores"):
        grade(tmp_path / "subs", tmp_path / "gradebook.csv", root=root, unsafe=True)


def test_without_a_sandbox_grading_refuses_unless_unsafe(tmp_path, monkeypatch):
    monkeypatch.setattr(grade_module, "sandbox_available", lambda: False)
    monkeypatch.setattr(sandbox, "sandbox_available", lambda: False)
    subs = tmp_path / "subs" / "alice" / FIRST
    subs.mkdir(parents=True)
    nbformat.write(solution(), subs / f"{NOTEBOOK}.ipynb")
    with pytest.raises(GradingError, match="--unsafe"):
        grade(tmp_path / "subs", tmp_path / "gradebook.csv")
    rows = grade(tmp_path / "subs", tmp_path / "gradebook.csv", unsafe=True, timeout=TIMEOUT_S)
    assert rows and all(r.status == "ok" for r in rows)


@needs_sandbox
def test_sandbox_blocks_reads_and_writes_outside_its_folder(tmp_path):
    canary = tmp_path / "escaped.txt"
    secret = ROOT / "solutions" / FIRST / f"{NOTEBOOK}.ipynb"
    cells = [f"open({str(secret)!r}).read()",
             f"open({str(canary)!r}, 'w').write('x')",
             "open('mine.txt', 'w').write('allowed'); print(open('mine.txt').read())",
             "print(open('given.txt').read())"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "given.txt").write_text("shipped")
    returned = sandbox.execute_isolated(nb, folder, cell_timeout=TIMEOUT_S)
    read, write, own, given = ([o for o in c.outputs] for c in returned.notebook.cells)
    assert read[0]["ename"] == "FileNotFoundError"
    assert write[0]["ename"] in ("OSError", "FileNotFoundError", "PermissionError")
    assert own[0]["text"].strip() == "allowed" and given[0]["text"].strip() == "shipped"
    assert not canary.exists()
    # what the notebook writes stays in the sandbox's own memory: the staged folder is as given
    assert sorted(p.name for p in folder.iterdir()) == ["given.txt"]


@needs_sandbox
def test_a_dead_kernel_never_leaves_cells_passing(tmp_path):
    cells = ["import os; os._exit(3)", "print('never runs')"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    returned = sandbox.execute_isolated(nb, tmp_path, cell_timeout=TIMEOUT_S)
    assert all(c.outputs and c.outputs[0]["output_type"] == "error"
               for c in returned.notebook.cells)


def test_the_gradebook_schema_version_is_the_one_nbgrader_finds():
    """Read in this process, it is what nbgrader's own ``alembic heads`` subprocess gives."""
    script = "import nbgrader.api; print(nbgrader.api.get_alembic_version())"
    scripts = str(Path(sys.executable).parent)
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           check=True, timeout=300,
                           env={**os.environ, "PATH": scripts + os.pathsep + os.environ["PATH"]})
    assert grade_module.gradebook_schema_version() == found.stdout.strip()
    assert len(found.stdout.strip()) >= 8


@needs_sandbox
def test_course_grade_command(tmp_path, capsys):
    folder = tmp_path / "subs" / "alice" / FIRST
    folder.mkdir(parents=True)
    nbformat.write(solution(), folder / f"{NOTEBOOK}.ipynb")
    out = tmp_path / "results" / "gradebook.csv"
    command = [sys.executable, "-m", "course_lib", "grade", str(tmp_path / "subs"), "--out",
               str(out), "--timeout", str(TIMEOUT_S)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    maximum = sum(e.max_points for e in exercises_of(source_notebooks(FIRST)[0]))
    assert f"{maximum:g} / {maximum:g}" in done.stdout
    assert (out.parent / "feedback" / "alice" / FIRST / f"{NOTEBOOK}.html").is_file()
    assert "is not a folder of submissions" in refusal(["grade", str(tmp_path / "absent")],
                                                       capsys)


# ---------------------------------------------------------------------------------------------
# Cheating: nothing inside the kernel decides a verdict


@pytest.mark.parametrize("cheat", list(CHEATS))
def test_every_cheat_scores_zero_everywhere(batch, cheat):
    rows = batch["by"][cheat].values()
    lessons = {lesson for lesson, _ in batch["by"][cheat]}
    assert lessons == set(CHEAT_LESSONS)
    scored = [(row.lesson, row.exercise, row.status) for row in rows if row.points > 0]
    assert scored == [], f"{cheat} scored on {scored}"
    assert all(row.status != "ok" for row in rows)


def test_the_key_stays_out_of_the_sandbox(batch):
    key = batch["key"].read_text().strip()
    assert len(key) == 64
    feedback = batch["out"].parent / "feedback" / "snoops_for_answers"
    pages = [p.read_text() for p in feedback.rglob("*.html")]
    assert len(pages) == len(CHEAT_LESSONS) and not any(key in page for page in pages)
    for page in pages:
        assert "key " in page and "other-processes " in page  # the snoop ran to the end
        # It may find files of installed packages (nbgrader ships a test gradebook.db), never
        # the grader's workspace (database, source copies) or the course's solutions.
        assert "course-grade-" not in page and str(ROOT / "solutions") not in page


def test_a_call_into_the_reference_is_flagged_not_failed(batch):
    points, status = statuses(batch, "calls_reference")["ex1_stable_softmax"]
    assert points == 2 and status.startswith("ok; flagged: ")
    assert "uses torch.softmax" in status and "called torch.softmax" in status
    html = feedback_page(batch, "calls_reference").read_text()
    assert "flagged for the instructor" in html
    assert statuses(batch, "calls_reference")["ex2_dot_scores"] == (2, "ok")


# ---------------------------------------------------------------------------------------------
# Attacks beyond the cheats (tests/attacks.py): forge, replace, copy, evade, harm


def measured(batch, student, what):
    """The number an attack printed as ``MEASURED what=N`` in its own feedback page."""
    page = feedback_page(batch, student).read_text()
    found = re.search(rf"MEASURED {what}=(\d+)", page)
    assert found, f"{student} did not report {what}: the attack did not run to its end"
    return int(found.group(1))


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_every_attack_scores_zero_and_says_what_was_seen(batch, attack):
    rows = batch["by"][attack]
    concerned, text = EXPECTED[attack]
    assert {lesson for lesson, _ in rows} == {FIRST}
    for (_, exercise), row in rows.items():
        if concerned is None or exercise in concerned:
            assert row.points == 0 and row.status != "ok", row
            assert text in row.status, row
    assert sum(row.points for row in rows.values()) < sum(r.max_points for r in rows.values())


def test_every_honest_style_scores_full_marks_unheld_and_unflagged(batch):
    honest = [student for student in batch["by"] if student.startswith("honest_")]
    assert len(honest) == len(honest_notebooks(solution()))
    for student in honest:
        got = statuses(batch, student)
        assert all(status == (2, "ok") for status in got.values()), (student, got)


def test_a_trailing_rerun_of_the_tests_is_tampering(batch):
    # The stubs' observations were sealed as their test cells ended; the cell after the last
    # test re-ran every test with working functions and the inputs it had kept.
    for row in batch["by"]["reruns_the_tests_after_the_last"].values():
        assert row.points == 0 and "arrived from cell" in row.status, row


def test_student_text_is_never_read_as_the_hidden_test_markers(batch):
    assert all(status == (2, "ok")
               for status in statuses(batch, "writes_the_hidden_markers").values())
    page = feedback_page(batch, "writes_the_hidden_markers").read_text()
    assert "not graded" not in page and "to the test cell" in page


def test_quadratic_markdown_gets_a_page_as_plain_text(batch):
    assert all(status == (2, "ok") for status in statuses(batch, "stalls_the_feedback").values())
    page = feedback_page(batch, "stalls_the_feedback").read_text()
    assert "not graded" not in page and "<pre>\\begin{a}\\begin{a}" in page


def test_no_answer_is_forged_through_proc(batch):
    assert measured(batch, "forges_the_answer", "forged") == 0
    assert measured(batch, "forges_the_answer", "blocked") >= 1  # it found the pipes, and failed
    assert all(row.points == 0 for row in batch["by"]["forges_the_answer"].values())


def test_shipped_modules_are_never_imported(batch):
    got = statuses(batch, "ships_modules_beside_a_solution")
    assert all(status == (2, "ok") for status in got.values()), got
    page = feedback_page(batch, "ships_modules").read_text()
    assert "shipped_startup_ran" not in page


def test_links_anywhere_are_refused(batch):
    (row,) = batch["by"]["links_its_whole_folder"].values()
    assert row.points == 0 and row.status == "refused: the student's folder is a symbolic link"


@pytest.mark.skipif(make_group() is None, reason="no cgroups to confine a submission in here")
def test_a_submission_stays_within_its_memory_and_processes(batch):
    assert measured(batch, "holds_too_much_memory", "resident_bytes") <= MEMORY_GB * 2**30
    assert measured(batch, "starts_many_processes", "processes") <= sandbox.budgets.MAX_PROCESSES


def test_a_submission_writes_within_its_disk_and_nothing_outside(batch):
    assert measured(batch, "fills_the_disk", "written_bytes") <= sandbox.budgets.DISK_BYTES
    feedback = batch["out"].parent / "feedback"
    for attack in ("fills_the_disk", "ships_a_sparse_file", "floods_the_answer"):
        sizes = [p.stat().st_size for p in (feedback / attack).rglob("*") if p.is_file()]
        assert len(sizes) == 1 and sizes[0] < 2 * 2**20, (attack, sizes)
    assert not any(p.suffix == ".bin" for p in feedback.rglob("*"))


def test_the_gradebook_holds_nothing_a_spreadsheet_would_run(batch):
    with open(batch["out"], newline="") as file:
        table = list(csv.reader(file))
    for row in table[1:]:
        assert not any(field.startswith(FORMULA_STARTS) for field in row), row
    status = statuses(batch, "writes_a_formula")["ex1_stable_softmax"][1]
    assert status.startswith("raised an exception: ") and "HYPERLINK" not in status


def test_a_feedback_page_runs_no_student_script_and_typesets_offline(batch, browser):
    from tests.test_feedback import check_feedback_page_in_browser

    for student in ("writes_a_formula", "solution"):
        check_feedback_page_in_browser(browser, feedback_page(batch, student))


# ---------------------------------------------------------------------------------------------
# Fresh inputs on every run: what one run leaks is worth nothing in the next


LEAKER = '''import base64
import io


def stable_softmax(scores, dim=-1):
    buffer = io.BytesIO()
    torch.save((scores, dim), buffer)
    print("LEAK:" + base64.b64encode(buffer.getvalue()).decode())
    return torch.softmax(scores, dim)
'''
LOOKUP = '''import base64
import io

_TABLE = torch.load(io.BytesIO(base64.b64decode("{table}")))


def stable_softmax(scores, dim=-1):
    for seen, seen_dim, answer in _TABLE:
        if seen_dim == dim and seen.shape == scores.shape and torch.equal(seen, scores):
            return answer.clone()
    raise KeyError("these inputs are not in the table")
'''


@needs_sandbox
def test_inputs_leaked_in_one_run_are_worth_nothing_in_the_next(tmp_path):
    import base64
    import io

    import torch

    subs, out = tmp_path / "subs", tmp_path / "grades" / "gradebook.csv"
    folder = subs / "mallory" / FIRST
    folder.mkdir(parents=True)
    notebook = folder / f"{NOTEBOOK}.ipynb"
    nbformat.write(with_code(untouched(), "ex1_code", LEAKER), notebook)
    grade(subs, out, timeout=TIMEOUT_S, memory_gb=MEMORY_GB)
    leaked_run = latest_run(runs_file_for(out))
    page = (out.parent / "feedback" / "mallory" / FIRST / f"{NOTEBOOK}.html").read_text()
    leaked = [torch.load(io.BytesIO(base64.b64decode(text)))
              for text in re.findall(r"LEAK:([A-Za-z0-9+/=]+)", page)]
    assert len(leaked) == 2 + 4  # the self-check's two calls, then the hidden test's four
    # The answers, worked out offline with the reference, as a lookup table.
    table = [(scores, dim, torch.softmax(scores, dim)) for scores, dim in leaked]
    buffer = io.BytesIO()
    torch.save(table, buffer)
    lookup = LOOKUP.format(table=base64.b64encode(buffer.getvalue()).decode())
    nbformat.write(with_code(untouched(), "ex1_code", lookup), notebook)

    rows = grade(subs, out, timeout=TIMEOUT_S, memory_gb=MEMORY_GB)
    fresh = next(r for r in rows if r.exercise == "ex1_stable_softmax")
    assert fresh.points == 0 and "KeyError" in fresh.status, fresh
    # The leak was complete: replaying the leaked run, the same table scores full marks, with
    # nothing to hold or flag (it is plain data).
    rows = grade(subs, out, timeout=TIMEOUT_S, memory_gb=MEMORY_GB, replay=leaked_run.run_id)
    replayed = next(r for r in rows if r.exercise == "ex1_stable_softmax")
    assert (replayed.points, replayed.status) == (2, "ok")


@needs_sandbox
def test_a_feedback_page_that_cannot_be_made_says_so_in_the_gradebook(tmp_path, monkeypatch):
    from course_lib.grading.workflow import unit

    subs, out = tmp_path / "subs", tmp_path / "grades" / "gradebook.csv"
    folder = subs / "alice" / FIRST
    folder.mkdir(parents=True)
    nbformat.write(solution(), folder / f"{NOTEBOOK}.ipynb")
    monkeypatch.setattr(unit, "make_feedback",
                        lambda *args: "it took longer than its 60 s budget")
    rows = grade(subs, out, timeout=TIMEOUT_S, memory_gb=MEMORY_GB)  # one worker: this process
    assert [r.points for r in rows] == [2.0] * 4
    for row in rows:
        assert row.status == ("ok; no feedback page could be made (it took longer than its 60 s "
                              "budget)"), row
    page = (out.parent / "feedback" / "alice" / FIRST / f"{NOTEBOOK}.html").read_text()
    assert "not graded" in page and "no feedback page could be made" in page
