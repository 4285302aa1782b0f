"""Every exercise's hidden test, checked in this process (no sandbox, no nbgrader).

For each source notebook the hidden tests are collected as the grader collects them, and for
several secret seeds:

- the solution passes against itself, run twice on fresh copies of the inputs (observations are
  deterministic, so an honest solution scores full marks under any key);
- generic cheats (zeros of the first tensor argument, the first argument unchanged, None, always
  ValueError, always NotImplementedError) fail every exercise, the untouched stub's with the
  grader's "not attempted", and zeros fail even with every self-check helper and torch's own
  comparisons rebound to agree (the sandboxed batch of tests/test_grading.py runs that cheat
  and the untouched notebooks on two lessons; these run them on every exercise of every lesson);
- the solution is not flagged, statically or while it runs, and every re-implemented reference
  names something that exists.
"""

import ast
import contextlib
import io
import re
import types

import nbformat
import pytest
import torch

import course_lib.grading.checks
from course_lib.course.syllabus import COURSE_ROOT
from course_lib.grading.config import lessons_with_exercises, source_notebooks
from course_lib.grading.hidden import HiddenTest, collecting, observe_all, resolve
from course_lib.grading.verdicts.static_check import StaticFindings, static_flags
from course_lib.grading.verdicts.verdict import (
    build_reference,
    draw_inputs,
    expected_records,
    judge,
)
from course_lib.grading.workflow.submission import explain_error
from tests.cheats import REBIND

SEEDS = (1, 2, 3)
NOTEBOOKS = [path for lesson in lessons_with_exercises(COURSE_ROOT)
             for path in source_notebooks(lesson)]


def _first_tensor(*args, **kwargs):
    for value in args:
        if isinstance(value, torch.Tensor):
            return torch.zeros_like(value)
    return 0.0


def _raise(error):
    def cheat(*args, **kwargs):
        raise error
    return cheat


CHEATS = {
    "zeros": _first_tensor,
    "identity": lambda *args, **kwargs: args[0] if args else None,
    "none": lambda *args, **kwargs: None,
    "always ValueError": _raise(ValueError("no")),
    "not attempted": _raise(NotImplementedError()),
}


def with_functions(test: HiddenTest, names, replacement, rebound: dict | None = None
                   ) -> HiddenTest:
    """``test`` observing ``replacement`` wherever it calls one of the exercise's ``names``, with
    the names in ``rebound`` bound as given where its code looks them up."""
    observe = test.observe
    namespace = dict(observe.__globals__) | (rebound or {}) | {name: replacement
                                                               for name in names}
    rebound = types.FunctionType(observe.__code__, namespace, observe.__name__,
                                 observe.__defaults__, observe.__closure__)
    return HiddenTest(test.grade_id, test.inputs, rebound, test.reimplements, test.tolerances)


@pytest.fixture(scope="module", params=NOTEBOOKS, ids=lambda p: p.parent.name)
def source(request):
    nb = nbformat.read(request.param, as_version=4)
    return nb, build_reference(nb, request.param.name)


def test_every_test_cell_has_a_hidden_test(source):
    nb, reference = source
    test_cells = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
                  if c.metadata.get("nbgrader", {}).get("grade")
                  and not c.metadata["nbgrader"].get("solution")]
    assert list(reference.tests) == test_cells
    for grade_id, names in reference.functions.items():
        assert names, f"{grade_id}: no solution function found before its test cell"


def test_the_solution_passes_on_every_seed(source):
    _, reference = source
    for grade_id, test in reference.tests.items():
        for seed in SEEDS:
            inputs = draw_inputs(test, seed)
            expected = expected_records(test, inputs)
            again = expected_records(test, inputs)
            verdict = judge(test, expected, {"observations": again, "reference_calls": []}, False)
            assert verdict.passed, (grade_id, seed, verdict.error)
            assert len(expected) >= 3, f"{grade_id}: observe at least three cases"
            assert any(r[0] == "value" for r in expected.values()), grade_id


@pytest.mark.parametrize("cheat", list(CHEATS))
def test_generic_cheats_fail_every_exercise(source, cheat):
    _, reference = source
    for grade_id, test in reference.tests.items():
        cheating = with_functions(test, reference.functions[grade_id], CHEATS[cheat])
        for seed in SEEDS:
            inputs = draw_inputs(test, seed)
            got, _ = observe_all(cheating, inputs)
            verdict = judge(test, expected_records(test, inputs),
                            {"observations": got, "reference_calls": []}, False)
            assert not verdict.passed, f"{grade_id}: the {cheat!r} cheat passes on seed {seed}"


def test_an_untouched_exercise_is_not_attempted(source):
    """The stub, ``raise NotImplementedError()``, fails every exercise with the status the
    grader gives an untouched cell (tests/test_exercises.py holds every exercise cell a stub)."""
    _, reference = source
    for grade_id, test in reference.tests.items():
        untouched = with_functions(test, reference.functions[grade_id],
                                   CHEATS["not attempted"])
        inputs = draw_inputs(test, SEEDS[0])
        got, _ = observe_all(untouched, inputs)
        verdict = judge(test, expected_records(test, inputs),
                        {"observations": got, "reference_calls": []}, False)
        ename, evalue = verdict.error
        status = explain_error({"ename": ename, "evalue": evalue}, timeout=15, memory_gb=3.0)
        assert status.startswith("not attempted"), f"{grade_id}: {status}"


@pytest.fixture
def rebound_checks(monkeypatch):
    """tests/cheats.py's REBIND done in this process, as a cheat does it in its kernel: every
    self-check helper, in the module and as a notebook name, and torch.allclose, torch.equal and
    torch.testing.assert_close agree with anything. Returns the notebook names it binds; the
    module attributes are restored after the test, and by :func:`restored` within it."""
    targets = [(torch, "allclose"), (torch, "equal"), (torch.testing, "assert_close")] + [
        (course_lib.grading.checks, name)
        for name in ("check_shape", "check_close", "check_equal", "check_raises", "passed")]
    originals = {target: getattr(*target) for target in targets}
    for (module, name), value in originals.items():
        monkeypatch.setattr(module, name, value)  # restored at teardown, whatever REBIND did
    names: dict = {}

    @contextlib.contextmanager
    def rebinding():
        exec(REBIND, names)  # noqa: S102 - the cheat's own text
        try:
            yield {name: value for name, value in names.items() if name.startswith("check")
                   or name == "passed"}
        finally:
            for (module, name), value in originals.items():
                setattr(module, name, value)

    return rebinding


def test_zeros_fail_every_exercise_with_every_check_rebound_to_agree(source, rebound_checks):
    """What decides a verdict is outside the kernel: comparisons a cheat rebinds inside it
    decide nothing, in any exercise. The cheat's answer is zeros of its first tensor argument,
    positional or keyword (tests/cheats.py ZEROS)."""
    _, reference = source

    def zeros(*args, **kwargs):
        return _first_tensor(*args, *kwargs.values())

    for grade_id, test in reference.tests.items():
        for seed in SEEDS:
            inputs = draw_inputs(test, seed)
            expected = expected_records(test, inputs)
            with rebound_checks() as rebound:
                assert torch.allclose(torch.zeros(1), torch.ones(1))  # the rebinding holds
                cheating = with_functions(test, reference.functions[grade_id], zeros, rebound)
                got, _ = observe_all(cheating, inputs)
                # the rebinding alone fails nothing: the solution observed under it passes
                honest = with_functions(test, (), None, rebound)
                solved, _ = observe_all(honest, inputs)
            for observed, passes in ((got, False), (solved, True)):
                verdict = judge(test, expected, {"observations": observed,
                                                 "reference_calls": []}, False)
                assert verdict.passed is passes, (grade_id, seed, passes, verdict.error)
    assert not torch.allclose(torch.zeros(1), torch.ones(1))  # and was undone


def test_the_solution_is_not_flagged(source):
    nb, reference = source
    for grade_id, test in reference.tests.items():
        for dotted in test.reimplements:
            assert resolve(dotted) is not None, f"{grade_id}: {dotted} does not exist"
        assert static_flags(nb, grade_id, test.reimplements) == StaticFindings(), grade_id
        _, called = observe_all(test, draw_inputs(test, SEEDS[0]),
                                watch=reference.functions[grade_id])
        assert called == [], f"{grade_id}: the solution calls {called}"


HIDDEN_BLOCK = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)


def test_each_hidden_block_stands_on_its_own(source):
    """A hidden block may use the notebook's visible code, never another hidden block's names:
    when an earlier self-check fails, its hidden block never ran in the student's kernel."""
    nb, _ = source
    namespace: dict = {}
    quiet = io.StringIO()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        blocks = HIDDEN_BLOCK.findall(cell.source)
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            exec(HIDDEN_BLOCK.sub("", cell.source), namespace)  # noqa: S102
            for block in blocks:
                with collecting() as found:
                    exec(block, dict(namespace))  # noqa: S102
                for test in found:
                    records = expected_records(test, draw_inputs(test, SEEDS[0]))
                    broken = {name: r[1][0] for name, r in records.items() if r[0] == "raised"
                              and r[1][0] in ("NameError", "ImportError", "AttributeError")}
                    assert not broken, f"{test.grade_id}: {broken}"


def test_hidden_blocks_bind_only_private_names(source):
    """Names a hidden block leaves in the student's kernel start with an underscore, so they
    neither clobber the student's names nor hand out references to call without importing."""
    nb, _ = source
    for cell in nb.cells:
        for block in HIDDEN_BLOCK.findall(cell.source if cell.cell_type == "code" else ""):
            public = [name for node in ast.parse(block).body for name in _bound(node)
                      if not name.startswith("_") and name != "grade_with"]
            assert not public, f"{cell.metadata['nbgrader']['grade_id']} binds {public}"


def _bound(node) -> list[str]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.For | ast.With):
        return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Store)]
    return []


def test_the_kernel_side_of_grading_imports_no_notebook_machinery():
    # Every graded test cell imports these in the grading kernel: what they import is paid per
    # notebook (nbformat alone once added over a second to each).
    import subprocess
    import sys

    probe = ("import sys, course_lib.grading.hidden, course_lib.grading.checks\n"
             "print(sorted(m for m in ('nbformat', 'nbclient', 'nbgrader', 'nbconvert') "
             "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_the_runner_reads_notebooks_without_building_an_iri_grammar():
    # The sandbox's runner starts once per graded notebook: it must not pay for jsonschema's
    # IRI grammar, and nbformat must still tell a notebook from a broken one.
    import subprocess
    import sys

    probe = ("import sys\n"
             "from course_lib.grading.runner import import_nbformat\n"
             "nbformat = import_nbformat()\n"
             "nb = nbformat.read(sys.argv[1], as_version=4)\n"
             "nbformat.validate(nb)\n"
             "del nb.cells[0]['source']\n"
             "try:\n"
             "    nbformat.validate(nb)\n"
             "    print('invalid notebook accepted')\n"
             "except nbformat.ValidationError:\n"
             "    print('ok', 'lark' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-I", "-c", probe, str(NOTEBOOKS[0])],
                          capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "ok False", done.stdout + done.stderr
