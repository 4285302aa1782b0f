"""What the grader does with what a submission hands it, piece by piece: the returned notebook,
exception classes, code that hides what it runs, submission folders, the runner's answer, the
gradebook's cells. The end-to-end attacks are in test_grading.py (tests/attacks.py)."""

import copy
import os
import sys

import nbformat
import pytest
import torch

from course_lib.grading import hidden
from course_lib.grading.isolation import budget, sandbox
from course_lib.grading.isolation.sandbox import Returned, run_bounded
from course_lib.grading.pages.gradebook import FORMULA_STARTS, GradeRow, gradebook_csv, inert
from course_lib.grading.verdicts import trusted
from course_lib.grading.verdicts.static_check import StaticFindings, static_flags
from course_lib.grading.verdicts.verdict import (
    HiddenTest,
    judge,
    resolve_exception,
)
from course_lib.grading.workflow.submission import (
    MAX_DEPTH,
    MAX_FILES,
    MAX_FILES_BYTES,
    Refused,
    explain_error,
    stage_files,
)

TEST = HiddenTest("ex", lambda g: {}, lambda x: {})


# ---------------------------------------------------------------------------------------------
# only outputs come back, matched by the grader's own cell ids


def _sent():
    cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_markdown_cell("text"),
             nbformat.v4.new_code_cell("check()")]
    cells[2].metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "ex1",
                                     "points": 2}
    return trusted.with_grader_ids(nbformat.v4.new_notebook(cells=cells))


def _ran(nb):
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hi\n")]
            cell.execution_count = 1
    return nb


def test_only_outputs_come_back():
    sent = _sent()
    returned = _ran(sent)
    returned.cells[2].metadata["nbgrader"]["points"] = 100  # what a forger would write
    returned.metadata["forged"] = True
    merged, problem = trusted.merge_outputs(sent, returned)
    assert problem == ""
    assert merged.cells[2].metadata["nbgrader"]["points"] == 2 and "forged" not in merged.metadata
    assert merged.cells[0].outputs[0]["text"] == "hi\n" and merged.cells[0].execution_count == 1


@pytest.mark.parametrize(("change", "problem"), [
    (lambda nb: nb.cells.pop(0), "did not come back"),
    (lambda nb: nb.cells.append(nbformat.v4.new_code_cell("y")), "was not sent"),
    (lambda nb: nb.cells.append(copy.deepcopy(nb.cells[0])), "was not sent"),
    (lambda nb: setattr(nb.cells[0], "source", "x = 2"), "came back altered"),
    (lambda nb: setattr(nb.cells[1], "cell_type", "raw"), "came back altered"),
    (lambda nb: nb.cells[0].outputs.append({"output_type": "evil"}), "malformed outputs"),
    (lambda nb: nb.cells[0].outputs.append({"output_type": "stream"}), "not valid"),
    (lambda nb: nb.pop("cells"), "no cells came back"),
])
def test_missing_extra_or_altered_cells_are_tampering(change, problem):
    sent = _sent()
    returned = _ran(sent)
    change(returned)
    _, found = trusted.merge_outputs(sent, returned)
    assert problem in found


def _source_notebook():
    setup = nbformat.v4.new_code_cell("from course_lib.grading.hidden import grade_with")
    solution = nbformat.v4.new_code_cell("def f0(x):\n    return x + 1")
    solution.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "c0"}
    test = nbformat.v4.new_code_cell(
        "grade_with('ex0', lambda g: {}, lambda x: {'f0': lambda: f0(1)})")
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "ex0",
                                 "points": 1}
    return nbformat.v4.new_notebook(cells=[setup, solution, test])


def test_a_tampered_notebook_fails_every_exercise(tmp_path):
    source = tmp_path / "source.ipynb"
    nbformat.write(_source_notebook(), source)

    def execute(nb, staged, tests):
        returned = _ran(nb)
        returned.cells.pop(0)
        return Returned(returned)

    staged = tmp_path / "staged"
    staged.mkdir()
    _, verdicts = trusted.grade_notebook(nbformat.read(source, as_version=4), staged,
                                         source=source, key=bytes(32), nonce="00",
                                         names=("a", "l", "n"), execute=execute)
    assert "did not come back" in verdicts.tampered
    assert not verdicts.exercises["ex0"].passed
    assert verdicts.exercises["ex0"].error[0] == "Tampered"


def test_an_observation_out_of_turn_fails_every_exercise(tmp_path):
    source = tmp_path / "source.ipynb"
    nbformat.write(_source_notebook(), source)
    handed = []

    def execute(nb, staged, tests):
        handed.append(tests)
        return Returned(_ran(nb), tampering=["an observation ('ex0.pt') arrived from cell 4, "
                                             "which is not its test cell"])

    _, verdicts = trusted.grade_notebook(nbformat.read(source, as_version=4), tmp_path,
                                         source=source, key=bytes(32), nonce="00",
                                         names=("a", "l", "n"), execute=execute)
    assert list(handed[0].values())[0][0] == "ex0"  # the test cell's id -> its inputs
    assert "arrived from cell 4" in verdicts.tampered
    assert verdicts.exercises["ex0"].error[0] == "Tampered"


# ---------------------------------------------------------------------------------------------
# "must raise": the class the grader resolves, so that one class cannot stand for all


def _raised(names):
    expected = {"error": ("raised", ("builtins.ValueError",), "bad")}
    return judge(TEST, expected, {"observations": {"error": ("raised", names, "")},
                                  "reference_calls": []}, False)


def test_one_class_cannot_stand_for_every_error():
    mega = ("__main__._AnyError", "builtins.ValueError", "builtins.TypeError")
    assert "a class defined in the submission" in _raised(mega).error[1]
    assert not _raised(("builtins.ValueError_", "builtins.ValueError")).passed
    assert not _raised(("builtins.TypeError", "builtins.ValueError")).passed
    assert _raised(("builtins.ValueError",)).passed
    assert _raised(("json.decoder.JSONDecodeError", "builtins.ValueError")).passed


@pytest.mark.parametrize("name", ["os.system", "no.such.Error", "builtins", "=1+1", 3, None,
                                  "builtins.ValueError.__init__", "sys.modules"])
def test_only_real_exception_classes_resolve(name):
    assert resolve_exception(name) is None


def test_the_kernel_reports_qualified_class_names():
    class Local(ValueError):
        pass

    def boom():
        raise Local("x")

    record = hidden.capture(boom)
    assert record[1][0].endswith("Local") and record[1][1] == "builtins.ValueError"
    assert resolve_exception(record[1][0]) is None


# ---------------------------------------------------------------------------------------------
# code that hides what it runs: withheld, whatever it is called


def _notebook(source):
    code = nbformat.v4.new_code_cell(source)
    code.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "c0"}
    test = nbformat.v4.new_code_cell("pass")
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "ex0"}
    return nbformat.v4.new_notebook(cells=[code, test])


def test_a_private_chain_is_reported_once():
    nb = _notebook("import torch\nf = torch.ops.aten._softmax")
    assert static_flags(nb, "ex0", ()).withheld == ["torch.ops: a private torch name"]


def test_plain_exercise_code_is_neither_flagged_nor_withheld():
    nb = _notebook("import math\nimport torch\nimport torch.nn.functional as F\n"
                   "from collections import Counter\n"
                   "class Cache:\n    def __init__(self):\n        self._k = None\n"
                   "def f(x):\n    \"\"\"Like torch.softmax, but stable.\"\"\"\n"
                   "    return F.relu(x) / math.sqrt(x.shape[-1])")
    assert static_flags(nb, "ex0", ("torch.softmax",)) == StaticFindings([], [])


def test_references_are_found_under_other_names_and_aliases():
    nb = _notebook("def f(x):\n    return torch.special.softmax(x, -1)")
    assert static_flags(nb, "ex0", ("torch.softmax",)).flags == [
        "uses torch.special.softmax, which this exercise re-implements"]
    # course_lib re-exports: every name bound to the very object is an alias
    assert "masked_softmax" in hidden.reference_aliases(
        ("course_lib.nn.attention.masked_softmax",))


def test_the_spy_sees_calls_by_identity_and_in_threads():
    import threading

    def student(x):
        out = {}
        thread = threading.Thread(target=lambda: out.update(r=x.softmax(-1)))
        thread.start()
        thread.join()
        return torch.softmax(x, -1) + out["r"]

    namespace = {"student": student}
    spy = hidden.ReferenceSpy(("torch.softmax", "torch.Tensor.softmax"), namespace,
                              ("student",))
    with spy:
        namespace["student"](torch.ones(3))
    assert spy.called == {"torch.softmax", "torch.Tensor.softmax"}


# ---------------------------------------------------------------------------------------------
# a submission is only what is in its folder


def _folder(tmp_path):
    folder = tmp_path / "alice" / "00"
    folder.mkdir(parents=True)
    (folder / "nb.ipynb").write_text("{}")
    (folder / "notes.txt").write_text("mine")
    return folder


def test_plain_files_are_staged_without_the_notebooks(tmp_path):
    folder = _folder(tmp_path)
    (folder / "data").mkdir()
    (folder / "data" / "x.csv").write_text("1,2")
    staged = stage_files(folder, tmp_path / "staged")
    assert sorted(str(p.relative_to(staged)) for p in staged.rglob("*")) == [
        "data", "data/x.csv", "notes.txt"]


def _link_inside(folder, tmp_path):
    (folder / "answers").symlink_to(tmp_path)


def _link_folder(folder, tmp_path):
    (folder / "sub").mkdir()
    (folder / "sub" / "peer").symlink_to(tmp_path, target_is_directory=True)


def _fifo(folder, tmp_path):
    os.mkfifo(folder / "pipe")


def _sparse(folder, tmp_path):
    with open(folder / "sparse.bin", "wb") as file:
        file.truncate(2**30)


def _too_many(folder, tmp_path):
    for index in range(MAX_FILES + 1):
        (folder / f"f{index}").write_text("")


def _too_deep(folder, tmp_path):
    path = folder
    for _ in range(MAX_DEPTH + 1):
        path = path / "d"
    path.mkdir(parents=True)


def _unreadable_name(folder, tmp_path):
    path = folder
    for _ in range(30):  # longer than a path may be, below the depth cap's reach
        path = path / ("n" * 200)
        try:
            os.mkdir(path)
        except OSError:
            break


@pytest.mark.parametrize(("make", "reason"), [
    (_link_inside, "'answers' is a symbolic link"),
    (_link_folder, "'sub/peer' is a symbolic link"),
    (_fifo, "'pipe' is not a plain file"),
    (_sparse, f"its files hold more than {MAX_FILES_BYTES >> 20} MiB"),
    (_too_many, f"more than {MAX_FILES} files"),
    (_too_deep, f"nested more than {MAX_DEPTH} deep"),
    (_unreadable_name, "nested more than"),
])
def test_links_special_files_and_oversized_folders_are_refused(tmp_path, make, reason):
    folder = _folder(tmp_path)
    make(folder, tmp_path)
    with pytest.raises(Refused, match=reason.replace("(", r"\(")):
        stage_files(folder, tmp_path / "staged")
    assert not (tmp_path / "staged").exists() or not any((tmp_path / "staged").rglob("*.bin"))


def test_a_linked_lesson_folder_is_refused(tmp_path):
    folder = _folder(tmp_path)
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "00").symlink_to(folder, target_is_directory=True)
    with pytest.raises(Refused, match="the lesson folder is a symbolic link"):
        stage_files(tmp_path / "bob" / "00", tmp_path / "staged")


# ---------------------------------------------------------------------------------------------
# the runner's answer is read with a hard limit; the time budget is the source's


def test_an_answer_past_the_limit_ends_the_run_and_keeps_memory_bounded():
    child = [sys.executable, "-c",
             "import sys\nblock = b'x' * 2**20\nfor _ in range(1024): "
             "sys.stdout.buffer.write(block)"]
    finished = run_bounded(child, b"", timeout=60, max_stdout=4 * 2**20)
    assert finished.overflow and len(finished.stdout) == 4 * 2**20


def test_a_run_past_its_deadline_is_ended():
    child = [sys.executable, "-c", "import time; time.sleep(60)"]
    finished = run_bounded(child, b"", timeout=1, max_stdout=2**20)
    assert finished.timed_out


def test_the_deadline_comes_from_the_source_not_the_submission(tmp_path, monkeypatch):
    source = tmp_path / "source" / "00" / "nb.ipynb"
    source.parent.mkdir(parents=True)
    nbformat.write(_source_notebook(), source)
    padded = _source_notebook()  # the submission: the source plus 100 slow cells of its own
    padded.cells += [nbformat.v4.new_code_cell("import time; time.sleep(50)")] * 100
    deadlines = []

    def run(nb, staged, **limits):
        deadlines.append(limits["deadline"])
        return Returned(nb)

    def grade(nb, staged, *, source, key, nonce, names, execute):
        return execute(nb, staged, {}).notebook, trusted.NotebookVerdicts()

    monkeypatch.setattr(sandbox, "execute_isolated", run)
    monkeypatch.setattr(sandbox, "grade_notebook", grade)
    step = sandbox.SandboxedExecute(
        timeout=60, source_root=str(tmp_path / "source"), key="00" * 32,
        verdict_root=str(tmp_path / "verdicts"), files_root=str(tmp_path / "files"))
    step.preprocess(padded, {"nbgrader": {"student": "a", "assignment": "00", "notebook": "nb"}})
    assert deadlines == [budget.notebook_deadline(_source_notebook(), 60)]
    assert deadlines[0] < budget.notebook_deadline(padded, 60)
    answer = sandbox.read_answer(padded, sandbox.Finished(None, b"", b"", timed_out=True),
                                 123, False)
    assert "ran past its 123 s deadline" in answer.notebook.cells[0].outputs[0]["evalue"]


@pytest.mark.parametrize("stdout", [b"", b"not json", b'{"notebook": 3}',
                                    b'{"notebook": {}, "results": {"ex": "@@"}}'])
def test_a_malformed_answer_fails_the_notebook(stdout):
    answer = sandbox.read_answer(_source_notebook(), sandbox.Finished(1, stdout, b"boom"),
                                 10, False)
    assert all(cell.outputs[0]["ename"] == "SandboxError"
               for cell in answer.notebook.cells if cell.cell_type == "code")


# ---------------------------------------------------------------------------------------------
# safe to open: nothing a spreadsheet runs, statuses that begin with the grader's words


@pytest.mark.parametrize("text", ["=HYPERLINK(\"x\")", "+1", "-1+2", "@SUM(A1)", "\t=1+1",
                                  "\r=1", " =1", "|cmd", "%0A"])
def test_formula_like_fields_are_made_inert(text):
    assert not inert(text).lstrip().startswith(FORMULA_STARTS)
    table = gradebook_csv([GradeRow(text, text, text, 0.0, 2.0, text)])
    assert "\n=" not in table and ",=" not in table and ",+" not in table


def test_fields_stay_on_one_line():
    assert inert("a\nb\x00c") == "a b c"


@pytest.mark.parametrize(("name", "value", "begins"), [
    ('=HYPERLINK("x")', "boom", "raised an exception: boom"),
    ("ZeroDivisionError", "division by zero", "raised ZeroDivisionError: division by zero"),
    ("WrongAnswer", "f: values differ", "wrong answer: f: values differ"),
    ("Tampered", "cell 0 did not come back", "tampered: cell 0 did not come back"),
])
def test_statuses_begin_with_the_graders_words(name, value, begins):
    assert explain_error({"ename": name, "evalue": value}, 60, 4.0) == begins


# ---------------------------------------------------------------------------------------------
# observations sealed as they are made (the runner's Sealer)


def _sealer(tmp_path):
    from course_lib.grading.runner import Sealer

    for name in ("inputs", "results"):
        (tmp_path / name).mkdir()
    return Sealer(tmp_path, {"t1": ("ex1", b"inputs of ex1"), "t2": ("ex2", b"inputs of ex2")})


def _observe(tmp_path, grade_id, data=b"observed"):
    (tmp_path / "results" / f"{grade_id}.pt").write_bytes(data)


def test_each_test_cell_gets_its_inputs_while_it_runs_and_its_observation_is_sealed(tmp_path):
    sealer, inputs = _sealer(tmp_path), tmp_path / "inputs" / "ex1.pt"
    sealer.before({"id": "c0"}, 0)
    assert not inputs.exists()
    sealer.after({"id": "c0"}, 0)
    sealer.before({"id": "t1"}, 1)
    assert inputs.read_bytes() == b"inputs of ex1"
    _observe(tmp_path, "ex1", b"the test cell's")
    sealer.after({"id": "t1"}, 1)
    assert not inputs.exists() and not any((tmp_path / "results").iterdir())
    sealer.before({"id": "c2"}, 2)
    _observe(tmp_path, "ex1", b"a later cell's")  # too late: the first one is sealed
    sealer.after({"id": "c2"}, 2)
    sealer.finish()
    assert sealer.sealed == {"ex1": b"the test cell's"}
    assert sealer.tampering == ["an observation ('ex1.pt') arrived from cell 3, which is not its "
                                "test cell"]


@pytest.mark.parametrize(("steps", "found"), [
    (["write ex1", "t1", "t2"], "arrived before cell 2 ran"),
    (["t1", "write ex2", "t2"], "('ex2.pt') arrived before cell 3 ran"),
    (["t1", "t2", "write ex2"], "arrived after the last cell ran"),
    (["t1 writes ex2"], "('ex2.pt') arrived from cell 1, which is not its test cell"),
    (["t1 replaces results with a file"], "(the results folder itself)"),
])
def test_an_observation_out_of_turn_is_tampering(tmp_path, steps, found):
    sealer = _sealer(tmp_path)
    for index, step in enumerate(steps):
        if step.startswith("write "):
            _observe(tmp_path, step.split()[1])
            continue
        cell = {"id": step.split()[0]}
        sealer.before(cell, index)
        if step == "t1 writes ex2":
            _observe(tmp_path, "ex2")
        elif step == "t1 replaces results with a file":
            import shutil

            shutil.rmtree(tmp_path / "results")
            (tmp_path / "results").write_bytes(b"x")
        sealer.after(cell, index)
    sealer.finish()
    assert any(found in text for text in sealer.tampering), sealer.tampering


def test_a_second_observation_in_its_own_cell_is_tampering(tmp_path):
    sealer = _sealer(tmp_path)
    sealer.before({"id": "t1"}, 0)
    _observe(tmp_path, "ex1")
    sealer.after({"id": "t1"}, 0)
    sealer.before({"id": "t1"}, 0)  # the same test cell, run again
    _observe(tmp_path, "ex1", b"again")
    sealer.after({"id": "t1"}, 0)
    assert sealer.sealed == {"ex1": b"observed"}
    assert sealer.tampering == ["a second observation of ex1 arrived"]
