"""The grader's side of a hidden test: inputs, expected results and the verdict, all decided here.

For each exercise the grader

1. draws the inputs from a generator seeded by a secret key and the run's nonce
   (:func:`seed_for`): a student can neither read nor predict them, a new run draws new ones,
   and a replay of a run (the same nonce) draws the same ones;
2. hands them, as plain data, to the sandbox, where the runner gives them to the test cell
   alone, as it starts;
3. reads back the observation the runner sealed as the test cell ended (safely: bounded size,
   ``torch.load(weights_only=True)``, then checked item by item);
4. makes the same observations itself with the instructor's solution (:class:`Reference`,
   built by running the source notebook in this process) and compares (:func:`compare`);
5. looks at the student's code for calls into what the exercise re-implements
   (:func:`course_lib.grading.verdicts.static_check.static_flags`).

Nothing the submission's kernel does can change a verdict: it only supplies data, and data
passes only when it agrees with what this process computed from inputs the kernel never chose.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import hmac
import io
import math
import os
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from course_lib.grading import hidden
from course_lib.grading.config import read_source_notebook
from course_lib.grading.hidden import HiddenTest, HiddenTestError

MAX_RESULT_BYTES = 32 * 2**20
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
QUALIFIED_NAME = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+")


def is_test_cell(cell) -> bool:
    """An autograded test cell: a code cell nbgrader grades that is not a solution."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def error_outputs(cell) -> list:
    """The error outputs of a cell, in order."""
    return [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def defined_names(source: str) -> list[str]:
    """Top-level functions and classes a cell defines."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [node.name for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]


# The reference: the instructor's source notebook, run in the grader's own process


@dataclass
class Reference:
    """A source notebook's hidden tests, and the solution functions each exercise defines."""

    tests: dict[str, HiddenTest]
    functions: dict[str, tuple[str, ...]]


_cache: dict[tuple[str, float], Reference] = {}


def load_reference(source: Path) -> Reference:
    """Run the source notebook once per process (cached) and collect its hidden tests."""
    source = Path(source).resolve()
    key = (str(source), source.stat().st_mtime)
    if key not in _cache:
        _cache[key] = build_reference(read_source_notebook(source), source.name)
    return _cache[key]


def build_reference(nb, label: str = "notebook") -> Reference:
    """Execute every code cell of ``nb`` in one fresh namespace, collecting its hidden tests.

    Every test cell must register exactly one hidden test under its own grade_id.
    """
    os.environ.setdefault("MPLBACKEND", "Agg")
    namespace: dict[str, Any] = {"__name__": "__course_reference__"}
    tests, functions, pending = {}, {}, []
    quiet = io.StringIO()
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        with hidden.collecting() as found, contextlib.redirect_stdout(quiet), \
                contextlib.redirect_stderr(quiet):
            try:
                exec(compile(cell.source, f"<{label} cell {index}>", "exec"), namespace)  # noqa: S102
            except Exception as error:
                raise HiddenTestError(f"{label}: cell {index} of the source failed: "
                                      f"{type(error).__name__}: {error}") from error
        if is_test_cell(cell):
            grade_id = cell.metadata["nbgrader"]["grade_id"]
            if [t.grade_id for t in found] != [grade_id]:
                raise HiddenTestError(
                    f"{label}: test cell {grade_id} must register exactly one hidden test "
                    f"with grade_with({grade_id!r}, ...); it registered "
                    f"{[t.grade_id for t in found]}")
            tests[grade_id] = found[0]
            functions[grade_id] = tuple(pending)
            pending = []
        else:
            if found:
                raise HiddenTestError(f"{label}: cell {index} registers a hidden test outside "
                                      f"a test cell")
            if cell.metadata.get("nbgrader", {}).get("solution"):
                pending += defined_names(cell.source)
    return Reference(tests, functions)


def seed_for(key: bytes, *parts: str) -> int:
    """A 63-bit seed from the secret key and ``parts``: the run's nonce and the (student,
    lesson, notebook, exercise) names."""
    digest = hmac.new(key, "\0".join(parts).encode("utf-8"), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def draw_inputs(test: HiddenTest, seed: int) -> Any:
    """The test's inputs for ``seed``, as plain data (what the kernel will load)."""
    return hidden.roundtrip(test.inputs(torch.Generator().manual_seed(seed)))


def expected_records(test: HiddenTest, inputs: Any) -> dict[str, tuple]:
    """The solution's observations on ``inputs`` (given a fresh copy: observations may mutate)."""
    records, _ = hidden.observe_all(test, hidden.roundtrip(inputs))
    return records


# Reading what the kernel sent


class UnusableResults(ValueError):
    """The results file is missing, too large, not a regular file, or not plain data."""


def parse_results(data: bytes) -> dict:
    """Load the bytes of a results file the kernel wrote, trusting nothing about them: bounded
    size, ``torch.load(weights_only=True)`` (no code runs), and the expected shape."""
    if not isinstance(data, bytes) or len(data) > MAX_RESULT_BYTES:
        raise UnusableResults("the results file is not of bounded size")
    try:
        with warnings.catch_warnings():  # torch's notes on odd files say nothing to a grader
            warnings.simplefilter("ignore")
            results = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as error:  # noqa: BLE001 - any malformed file means the same
        raise UnusableResults(f"the results file is unreadable ({type(error).__name__})") from error
    if not (isinstance(results, dict) and isinstance(results.get("observations"), dict)
            and isinstance(results.get("reference_calls"), list)):
        raise UnusableResults("the results file does not hold observations")
    return results


# Comparing


def tolerance_for(expected: torch.Tensor, rtol: float, atol: float) -> tuple[float, float]:
    if expected.dtype in (torch.float16, torch.bfloat16):
        return max(rtol, 1e-3), max(atol, 1e-3)
    return rtol, atol


def compare(expected: Any, got: Any, rtol: float = 1e-5, atol: float = 1e-5,
            where: str = "") -> str | None:
    """None when ``got`` matches ``expected``, else what differs.

    Tensors: same shape; floating point where expected (any float dtype, values compared in
    float64 to tolerance, NaN only where expected), otherwise the same dtype and equal values.
    Floats: within tolerance (an int is accepted); bools, ints, strings, None: equal and of the
    same kind; lists and tuples item by item; dicts key by key.
    """
    at = f" at {where}" if where else ""
    if isinstance(expected, torch.Tensor):
        return _compare_tensors(expected, got, rtol, atol, at)
    if isinstance(expected, float):
        if isinstance(got, bool) or not isinstance(got, int | float):
            return f"expected a float{at}, got {_kind(got)}"
        if math.isnan(expected) and math.isnan(got):
            return None
        if not math.isclose(got, expected, rel_tol=rtol, abs_tol=atol):
            return f"expected {expected:.6g}{at}, got {got:.6g}"
        return None
    if isinstance(expected, list | tuple):
        if not isinstance(got, list | tuple):
            return f"expected a {type(expected).__name__}{at}, got {_kind(got)}"
        if len(got) != len(expected):
            return f"expected {len(expected)} items{at}, got {len(got)}"
        for index, (e, g) in enumerate(zip(expected, got, strict=True)):
            problem = compare(e, g, rtol, atol, f"{where}[{index}]")
            if problem:
                return problem
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return f"expected a dict{at}, got {_kind(got)}"
        if set(got) != set(expected):
            return (f"expected the keys {sorted(map(_key, expected))}{at}, got "
                    f"{sorted(map(_key, got))}")
        for key in expected:
            problem = compare(expected[key], got[key], rtol, atol, f"{where}[{_key(key)!r}]")
            if problem:
                return problem
        return None
    if type(got) is not type(expected) or got != expected:
        return f"expected {_short(expected)}{at}, got {_short(got)}"
    return None


def _compare_tensors(expected, got, rtol, atol, at) -> str | None:
    if type(got) is not torch.Tensor or got.layout != torch.strided:
        return f"expected a tensor{at}, got {_kind(got)}"
    if got.shape != expected.shape:
        return f"expected shape {tuple(expected.shape)}{at}, got {tuple(got.shape)}"
    if expected.is_floating_point():
        if not got.is_floating_point():
            return f"expected a floating-point tensor{at}, got {got.dtype}"
        rtol, atol = tolerance_for(expected, rtol, atol)
        want, have = expected.double(), got.double()
        unexpected_nan = have.isnan() & ~want.isnan()
        if bool(unexpected_nan.any()):
            index = tuple(int(i) for i in torch.nonzero(unexpected_nan)[0])
            return (f"the result{at} contains NaN, first at index {index}, where "
                    f"{want[index].item():.6g} was expected")
        if not torch.allclose(have, want, rtol=rtol, atol=atol, equal_nan=True):
            difference = (have - want).abs().nan_to_num(nan=math.inf)
            index = tuple(int(i) for i in torch.nonzero(difference == difference.max())[0])
            return (f"values differ{at}; largest difference {difference.max().item():.3g} at "
                    f"index {index}: expected {want[index].item():.6g}, got "
                    f"{have[index].item():.6g}")
        return None
    if got.dtype != expected.dtype:
        return f"expected dtype {expected.dtype}{at}, got {got.dtype}"
    if not torch.equal(got, expected):
        index = tuple(int(i) for i in torch.nonzero(got != expected)[0])
        return (f"wrong value{at} at index {index}: expected {expected[index].item()}, got "
                f"{got[index].item()}")
    return None


def _key(key):
    return key[4:] if isinstance(key, str) and key.startswith("key:") else key


def _kind(value) -> str:
    if isinstance(value, dict) and set(value) == {"unsupported"}:
        return f"an unsupported value ({value['unsupported']})"
    return f"a {type(value).__name__}"


def _short(value) -> str:
    text = repr(_key(value))
    return text if len(text) <= 80 else text[:77] + "..."


# Verdicts


@dataclass
class Verdict:
    """Pass or fail for one exercise; ``error`` is (ename, evalue) for the feedback, or None to
    keep the error the test cell already shows. ``flags`` note visible uses of what the exercise
    re-implements (the points stand; the instructor decides); ``withheld`` notes code that hides
    what it runs (no points until the instructor decides)."""

    passed: bool
    cases: int = 0
    error: tuple[str, str] | None = None
    flags: list[str] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)


def judge(test: HiddenTest, expected: dict[str, tuple], results: dict | None,
          cell_failed: bool) -> Verdict:
    """Compare the kernel's observations with the solution's, observation by observation."""
    if results is None:
        return Verdict(False, len(expected), None if cell_failed else (
            "NoResults", "the grader's cases did not run to the end, so nothing was checked"))
    observed = results["observations"]
    for name, want in expected.items():
        got = observed.get(name)
        problem = _record_problem(want, got, *test.tolerances.get(name, (1e-5, 1e-5)))
        if problem is not None:
            ename, text = problem
            if ename == "WrongAnswer":
                text = f"{name}: {text}"
            elif text:  # an exception without a message (the exercise's stub) stays bare
                text = f"{text} (in: {name})"
            return Verdict(False, len(expected), (ename, text))
    return Verdict(True, len(expected))


def resolve_exception(qualified: Any) -> type | None:
    """The exception class ``module.QualName`` names in the grader's own process, or None.

    Only modules the grader has already imported are looked in (nothing is imported by a name
    the kernel sent), so a class defined in the submission never resolves.
    """
    if not isinstance(qualified, str) or not QUALIFIED_NAME.fullmatch(qualified):
        return None
    parts = qualified.split(".")
    for split in range(len(parts) - 1, 0, -1):
        target: Any = sys.modules.get(".".join(parts[:split]))
        if target is None:
            continue
        for attribute in parts[split:]:
            target = getattr(target, attribute, None)
        if isinstance(target, type) and issubclass(target, BaseException) and \
                f"{target.__module__}.{target.__qualname__}" == qualified:
            return target
        return None
    return None


def short_name(qualified: Any) -> str:
    """The class name a student reads: the last part of a qualified name, letters only."""
    name = str(qualified).rsplit(".", 1)[-1]
    return name[:80] if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name[:80]) else "an exception"


def _record_problem(want: tuple, got: Any, rtol: float, atol: float) -> tuple[str, str] | None:
    if not (isinstance(got, tuple) and len(got) in (2, 3) and got[0] in ("value", "raised")):
        return "WrongAnswer", "no observation came back"
    if want[0] == "raised":
        expected_class = resolve_exception(want[1][0])
        if expected_class is None:
            raise HiddenTestError(f"the solution raised {want[1][0]}, which the grader cannot "
                                  f"resolve")
        raised = got[1][0] if got[0] == "raised" and isinstance(got[1], tuple) and got[1] \
            else None
        resolved = resolve_exception(raised)
        if resolved is not None and issubclass(resolved, expected_class):
            return None
        if raised is None:
            came = "a value came back"
        elif resolved is None:
            came = f"{short_name(raised)}, a class defined in the submission, was raised"
        else:
            text = got[2] if len(got) == 3 and isinstance(got[2], str) else ""
            came = f"{short_name(raised)}: {text}"
        return "WrongAnswer", f"expected {expected_class.__name__} to be raised, but {came}"
    if got[0] == "raised":
        names = got[1] if isinstance(got[1], tuple) and got[1] else ("Exception",)
        message = got[2] if len(got) == 3 and isinstance(got[2], str) else ""
        return short_name(names[0]), message[:hidden.MAX_TEXT]
    problem = compare(want[1], got[1], rtol, atol)
    return None if problem is None else ("WrongAnswer", problem)
