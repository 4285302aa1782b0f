"""The trusted side of grading, piece by piece: comparing, reading results, judging, flagging.

The end-to-end behaviour (a real sandbox, cheating notebooks) is in test_grading.py; the
hidden tests of every exercise are checked in test_hidden_tests.py.
"""

import math
import os
import pickle
import stat
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from course_lib.grading import hidden
from course_lib.grading.hidden import (
    HiddenTest,
    HiddenTestError,
    encode,
    grade_with,
    load_or_create_key,
)
from course_lib.grading.runner import prepare_folder
from course_lib.grading.verdicts import trusted
from course_lib.grading.verdicts.static_check import static_flags
from course_lib.grading.verdicts.verdict import (
    UnusableResults,
    Verdict,
    build_reference,
    compare,
    judge,
    parse_results,
    seed_for,
)
from course_lib.grading.workflow.grade import GradingError


def read_results(path):
    return parse_results(Path(path).read_bytes())

# ---------------------------------------------------------------------------------------------
# compare


def test_compare_accepts_equal_data_and_float_noise():
    data = {"key:w": torch.tensor([[0.5, 0.25]]), "key:n": 3, "key:ok": True, "key:s": "a",
            "key:xs": [1.5, (2, None)]}
    noisy = {"key:w": torch.tensor([[0.5 + 1e-7, 0.25]]), "key:n": 3, "key:ok": True,
             "key:s": "a", "key:xs": (1.5 + 1e-9, [2, None])}
    assert compare(data, noisy) is None
    assert compare(torch.ones(2, dtype=torch.float16), torch.ones(2) + 5e-4) is None
    assert compare(float("nan"), float("nan")) is None


@pytest.mark.parametrize("expected, got, message", [
    (torch.ones(2, 3), torch.ones(3, 2), "expected shape (2, 3)"),
    (torch.ones(2), torch.ones(2, dtype=torch.long), "floating-point tensor"),
    (torch.ones(2, dtype=torch.long), torch.ones(2, dtype=torch.int32), "expected dtype"),
    (torch.tensor([True, False]), torch.tensor([True, True]), "wrong value at index (1,)"),
    (torch.zeros(3), torch.tensor([0.0, float("nan"), 0.0]),
     "contains NaN, first at index (1,), where 0 was expected"),
    (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.1]), "largest difference 0.1"),
    (torch.ones(2), [1.0, 1.0], "expected a tensor"),
    (torch.ones(2), {"unsupported": "ndarray"}, "unsupported value (ndarray)"),
    (0.5, 0.6, "expected 0.5"),
    (0.5, True, "expected a float"),
    (0.5, torch.tensor(0.5), "expected a float"),
    (3, 3.0, "expected 3"),
    (True, 1, "expected True"),
    ([1, 2], [1, 2, 3], "expected 2 items"),
    ({"key:a": 1}, {"key:b": 1}, "expected the keys ['a']"),
])
def test_compare_reports_what_differs(expected, got, message):
    problem = compare(expected, got)
    assert problem is not None and message in problem, problem


def test_an_int_is_accepted_where_a_float_is_expected():
    assert compare(2.0, 2) is None


# ---------------------------------------------------------------------------------------------
# encode: what the kernel may send


def test_encode_makes_plain_data():
    parameter = torch.nn.Parameter(torch.ones(2))
    encoded = encode({"p": parameter, "n": np.float32(1.5), "t": torch.float16,
                      "size": torch.Size([2, 3]), "kind": float, "obj": object()})
    assert type(encoded["key:p"]) is torch.Tensor and not encoded["key:p"].requires_grad
    assert encoded["key:n"] == 1.5 and encoded["key:t"] == "torch.float16"
    assert encoded["key:size"] == (2, 3) and encoded["key:kind"] == "<class float>"
    assert encoded["key:obj"] == {"unsupported": "object"}
    assert hidden.roundtrip(encoded).keys() == encoded.keys()
    # a dict that imitates a marker is a student's dict, never a marker
    assert encode({"unsupported": "x"}) == {"key:unsupported": "x"}


# ---------------------------------------------------------------------------------------------
# reading results: nothing the sandbox writes is trusted


def _results(path, observations=None):
    torch.save({"observations": observations or {}, "reference_calls": []}, path)
    return path


def test_read_results_loads_plain_data(tmp_path):
    path = _results(tmp_path / "r.pt", {"a": ("value", torch.ones(2))})
    assert torch.equal(read_results(path)["observations"]["a"][1], torch.ones(2))


def test_parse_results_refuses_garbage_odd_shapes_and_size(tmp_path):
    (tmp_path / "junk.pt").write_bytes(b"not a torch file")
    torch.save(["a list"], tmp_path / "list.pt")
    for name in ("junk.pt", "list.pt"):
        with pytest.raises(UnusableResults):
            read_results(tmp_path / name)
    with pytest.raises(UnusableResults, match="bounded size"):
        parse_results(b"\0" * (32 * 2**20 + 1))


def test_read_results_never_runs_code_from_the_file(tmp_path):
    canary = tmp_path / "ran.txt"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {canary}",))

    (tmp_path / "evil.pt").write_bytes(pickle.dumps({"observations": Payload()}, protocol=2))
    with pytest.raises(UnusableResults):
        read_results(tmp_path / "evil.pt")
    assert not canary.exists()


def test_a_fresh_folder_replaces_whatever_the_submission_shipped(tmp_path):
    staged, workdir = tmp_path / "staged", tmp_path / "work"
    (staged / ".grading" / "results").mkdir(parents=True)
    _results(staged / ".grading" / "results" / "ex1.pt")
    (staged / ".grading" / "inputs").symlink_to(tmp_path)
    prepare_folder(staged, workdir)
    folder = workdir / ".grading"
    assert sorted(p.name for p in folder.iterdir()) == ["inputs", "results"]
    assert not any((folder / "results").iterdir()) and not (folder / "inputs").is_symlink()


# ---------------------------------------------------------------------------------------------
# judging


TEST = HiddenTest("ex", lambda g: {}, lambda x: {}, (), {"loose": (0.1, 0.1)})


def test_judge_compares_observation_by_observation():
    expected = {"value": ("value", torch.ones(2)),
                "error": ("raised", ("builtins.ValueError",), "bad")}
    passing = {"value": ("value", torch.ones(2)),  # a subclass the grader knows passes
               "error": ("raised", ("json.decoder.JSONDecodeError", "builtins.ValueError",
                                    "builtins.Exception"), "too big")}
    assert judge(TEST, expected, {"observations": passing, "reference_calls": []}, False).passed
    wrong = dict(passing, value=("value", torch.zeros(2)))
    verdict = judge(TEST, expected, {"observations": wrong, "reference_calls": []}, False)
    assert verdict.error[0] == "WrongAnswer" and verdict.error[1].startswith("value: values")
    silent = dict(passing, error=("value", None))
    verdict = judge(TEST, expected, {"observations": silent, "reference_calls": []}, False)
    assert "expected ValueError to be raised, but a value came back" in verdict.error[1]
    crashed = dict(passing, value=("raised", ("builtins.ZeroDivisionError",
                                              "builtins.Exception"), "division"))
    verdict = judge(TEST, expected, {"observations": crashed, "reference_calls": []}, False)
    assert verdict.error == ("ZeroDivisionError", "division (in: value)")
    verdict = judge(TEST, expected, {"observations": {}, "reference_calls": []}, False)
    assert not verdict.passed and "no observation came back" in verdict.error[1]


def test_judge_uses_per_observation_tolerances():
    expected = {"loose": ("value", 1.0)}
    assert judge(TEST, expected, {"observations": {"loose": ("value", 1.05)},
                                  "reference_calls": []}, False).passed


def test_missing_results_keep_the_cells_own_error():
    expected = {"value": ("value", 1.0)}
    assert judge(TEST, expected, None, cell_failed=True).error is None
    assert judge(TEST, expected, None, cell_failed=False).error[0] == "NoResults"


def test_verdicts_rewrite_the_test_cells_outputs():
    def cell(grade_id, outputs):
        c = nbformat.v4.new_code_cell("check()")
        c.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": grade_id,
                                  "points": 2}
        c.outputs = outputs
        return c

    error = nbformat.v4.new_output("error", ename="AssertionError", evalue="x", traceback=[])
    partial = nbformat.v4.new_output("execute_result", data={"text/plain": "2"},
                                     execution_count=1)
    stderr = nbformat.v4.new_output("stream", name="stderr", text="a warning\n")
    nb = trusted.with_grader_ids(nbformat.v4.new_notebook(
        cells=[cell("a", [stderr, error, partial]), cell("b", [partial])]))
    trusted.apply_verdicts(nb, {"a": Verdict(True, 3, flags=["uses x"]),
                                "b": Verdict(False, 3, ("AssertionError", "b: wrong"))},
                           {"graded-0": "a", "graded-1": "b"})
    passed, failed = nb.cells
    assert [o.output_type for o in passed.outputs] == ["stream"] * 3
    assert passed.outputs[0].name == "stdout" and "all 3" in passed.outputs[1].text
    assert "flagged for the instructor: uses x" in passed.outputs[2].text
    assert [o.output_type for o in failed.outputs] == ["error"]  # no partial credit left


# ---------------------------------------------------------------------------------------------
# static flags


def _notebook(*sources):
    cells = []
    for index, source in enumerate(sources):
        code = nbformat.v4.new_code_cell(source)
        code.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": f"c{index}"}
        test = nbformat.v4.new_code_cell("pass")
        test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": f"ex{index}"}
        cells += [code, test]
    return nbformat.v4.new_notebook(cells=cells)


def test_static_flags_find_references_imports_and_dynamic_code():
    nb = _notebook("def f(x):\n    return F.scaled_dot_product_attention(x, x, x)",
                   "from course_lib.nn.attention import masked_softmax\nimport course_lib.metrics",
                   "def h(x):\n    return exec('x')",
                   "from course_lib.grading.checks import check_close\ndef k(x):\n    return x")
    sdpa = ("torch.nn.functional.scaled_dot_product_attention",)
    assert static_flags(nb, "ex0", sdpa).flags == [
        "uses F.scaled_dot_product_attention, which this exercise re-implements"]
    assert static_flags(nb, "ex1", ("course_lib.nn.attention.masked_softmax",)).flags == [
        "imports masked_softmax from course_lib.nn.attention, which this exercise re-implements",
        "imports course_lib.nn.attention", "imports course_lib.metrics"]
    assert static_flags(nb, "ex2", ()).withheld == ["exec(): builtins.exec runs code built at "
                                                    "run time from text"]
    found = static_flags(nb, "ex3", ())  # a capability holds the later exercises too
    assert found.flags == [] and found.withheld == static_flags(nb, "ex2", ()).withheld
    assert static_flags(nb, "ex1", ()).withheld == []


# ---------------------------------------------------------------------------------------------
# keys, seeds and the reference


def test_the_key_is_made_once_private_and_reused(tmp_path):
    path = tmp_path / "grades" / "gradebook.key"
    key = load_or_create_key(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(bytes.fromhex(key)) == 32
    assert load_or_create_key(path) == key
    path.write_text("not hex")
    with pytest.raises(GradingError, match="hex key"):
        load_or_create_key(path)


def test_seeds_depend_on_key_and_names():
    key = bytes(32)
    base = seed_for(key, "alice", "00", "nb", "ex1")
    assert base == seed_for(key, "alice", "00", "nb", "ex1")
    assert len({base, seed_for(key, "bob", "00", "nb", "ex1"),
                seed_for(b"\1" * 32, "alice", "00", "nb", "ex1"),
                seed_for(key, "alice", "00", "nb", "ex2")}) == 4
    assert 0 <= base < 2**63


def _source(*test_sources):
    cells = [nbformat.v4.new_code_cell("import torch\nfrom course_lib.grading.hidden "
                                       "import grade_with")]
    for index, source in enumerate(test_sources):
        solution = nbformat.v4.new_code_cell(f"def f{index}(x):\n    return x + {index}")
        solution.metadata["nbgrader"] = {"solution": True, "grade": False,
                                         "grade_id": f"c{index}"}
        test = nbformat.v4.new_code_cell(source)
        test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": f"ex{index}",
                                     "points": 1}
        cells += [solution, test]
    return nbformat.v4.new_notebook(cells=cells)


def test_the_reference_collects_one_hidden_test_per_test_cell():
    good = ("grade_with('ex0', lambda g: {'x': torch.randn(3, generator=g)}, "
            "lambda x: {'f0': lambda: f0(x['x'])})")
    reference = build_reference(_source(good))
    assert list(reference.tests) == ["ex0"] and reference.functions == {"ex0": ("f0",)}
    with pytest.raises(HiddenTestError, match="exactly one hidden test"):
        build_reference(_source("pass"))
    with pytest.raises(HiddenTestError, match="exactly one hidden test"):
        build_reference(_source(good.replace("'ex0'", "'ex9'")))


def test_observations_see_the_names_of_their_own_cell():
    # A later cell rebinding a helper must not change what an earlier hidden test observes.
    nb = _source("helper = lambda x: x * 2\ngrade_with('ex0', lambda g: {}, "
                 "lambda x: {'f0': lambda: f0(helper(torch.ones(1)))})")
    nb.cells.append(nbformat.v4.new_code_cell("helper = None"))
    test = build_reference(nb).tests["ex0"]
    records, _ = hidden.observe_all(test, {})
    assert torch.equal(records["f0"][1], torch.full((1,), 2.0))


def test_grade_with_in_the_kernel_writes_data_and_never_raises(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(hidden.GRADING_DIR_VARIABLE, str(tmp_path))
    (tmp_path / "inputs").mkdir()
    torch.save({"inputs": {"x": torch.ones(2)}, "functions": []},
               hidden.inputs_file(tmp_path, "ex1"))
    grade_with("ex1", None, lambda x: {"double": lambda: x["x"] * 2, "bad": lambda: 1 / 0})
    records = read_results(hidden.results_file(tmp_path, "ex1"))["observations"]
    assert torch.equal(records["double"][1], torch.full((2,), 2.0))
    assert records["bad"][:2] == ("raised", ("builtins.ZeroDivisionError",
                                             "builtins.ArithmeticError", "builtins.Exception"))
    grade_with("ex2", None, lambda x: {})  # no inputs for it: reported, not raised
    assert "could not run" in capsys.readouterr().out


def test_a_plain_run_smoke_tests_the_block():
    with pytest.raises(HiddenTestError, match="plain data"):
        grade_with("ex1", lambda g: {"f": math.sqrt}, lambda x: {})
    grade_with("ex1", lambda g: {"x": torch.randn(2, generator=g)},
               lambda x: {"sum": lambda: x["x"].sum()})
