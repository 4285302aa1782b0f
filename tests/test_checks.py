"""Self-check messages say what was expected and what came instead."""

import re

import pytest
import torch

from course_lib.grading.checks import (
    SelfCheckFailed,
    check_close,
    check_equal,
    check_raises,
    check_shape,
)


def test_passing_checks_print_a_tick(capsys):
    check_shape("scores", torch.zeros(2, 3), (2, 3))
    check_close("probs", torch.tensor([0.5, 0.5]), torch.tensor([0.5, 0.5]))
    check_equal("mask", torch.tensor([True]), torch.tensor([True]))
    check_equal("count", 3, 3)
    check_raises("bad", ValueError, int, "x")
    assert capsys.readouterr().out.count("✓") == 5


@pytest.mark.parametrize(("call", "message"), [
    (lambda: check_shape("scores", torch.zeros(3, 2), (2, 3)),
     r"scores: expected shape \(2, 3\), got \(3, 2\)"),
    (lambda: check_shape("scores", [1, 2], (2,)), "scores: expected a torch.Tensor, got list"),
    (lambda: check_close("probs", torch.tensor([0.2, 0.9]), torch.tensor([0.2, 0.8])),
     r"probs: values differ; largest difference 0.1 at index \(1,\): expected 0.8, got 0.9"),
    (lambda: check_close("probs", torch.tensor([float("nan")]), torch.tensor([1.0])),
     r"probs: the result contains NaN, first at index \(0,\), where 1 was expected"),
    (lambda: check_close("means", torch.tensor([[1.0], [float("nan")], [float("nan")]]),
                         torch.tensor([[1.0], [0.0], [0.0]]),
                         rows=["length 3", "length 0", "length 0"]),
     r"means: the result contains NaN, first at index \(1, 0\) \(row 1, length 0\)"),
    (lambda: check_close("means", torch.tensor([1.0, 2.0]), torch.tensor([1.0, 0.0]),
                         rows=["length 3", "length 0"]),
     r"at index \(1,\) \(row 1, length 0\): expected 0, got 2"),
    (lambda: check_equal("mask", torch.tensor([[True], [True]]), torch.tensor([[True], [False]]),
                         rows=["length 1", "length 0"]),
     r"wrong value at index \(1, 0\) \(row 1, length 0\)"),
    (lambda: check_close("probs", torch.ones(2), torch.ones(3)),
     r"expected shape \(3,\), got \(2,\)"),
    (lambda: check_close("idx", torch.ones(2, dtype=torch.long), torch.ones(2)),
     "expected dtype torch.float32, got torch.int64"),
    (lambda: check_equal("mask", torch.tensor([True, True]), torch.tensor([True, False])),
     r"mask: wrong value at index \(1,\): expected False, got True"),
    (lambda: check_equal("mask", torch.ones(2), torch.ones(2, dtype=torch.bool)),
     "expected dtype torch.bool, got torch.float32"),
    (lambda: check_equal("count", 2, 3), "count: expected 3, got 2"),
    (lambda: check_raises("f", ValueError, lambda: None), "expected ValueError, but nothing"),
    (lambda: check_raises("f", ValueError, lambda: 1 / 0),
     "expected ValueError, got ZeroDivisionError"),
])
def test_failing_checks_explain(call, message):
    with pytest.raises(AssertionError, match=message):
        call()


def test_a_failed_check_shows_the_learners_lines_not_the_checkers():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_cell("from course_lib.grading.checks import check_close\nimport torch")
    shown = []
    shell._showtraceback = lambda etype, evalue, stb: shown.append("\n".join(stb))
    result = shell.run_cell("check_close('probs', torch.tensor([0.2, 0.9]), "
                            "torch.tensor([0.2, 0.8]))")
    assert isinstance(result.error_in_exec, SelfCheckFailed)
    (text,) = shown
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # IPython's colours
    assert "check_close('probs'" in text and "Cell In[" in text  # the learner's cell
    assert "checks.py" not in text and "raise SelfCheckFailed" not in text
    assert "interactiveshell.py" not in text
    assert text.rstrip().endswith("SelfCheckFailed: probs: values differ; largest difference "
                                  "0.1 at index (1,): expected 0.8, got 0.9")
