"""The runner's cell execution (`grading/execution.py`): its output limits and stream merging do
exactly what nbgrader's `LimitOutput` and nbconvert's `CoalesceStreamsPreprocessor` do (checked
against them on generated outputs), and the runner starts without importing nbgrader or
nbconvert."""

import copy
import random
import subprocess
import sys

import nbformat
import pytest
from nbconvert.preprocessors import CoalesceStreamsPreprocessor
from nbgrader.preprocessors import LimitOutput

from course_lib.grading.config import nbgrader_config
from course_lib.grading.execution import (
    MAX_OUTPUT_LINES,
    MAX_TRACEBACK_LINES,
    coalesce_streams,
    limit_outputs,
)

PIECES = ["a", "b\n", "\n", "x\ry", "50%\r100%\n", "\r", "line\n" * 7, "é\n", ""]


def random_output(rng: random.Random) -> nbformat.NotebookNode:
    kind = rng.choice(["stdout", "stdout", "stderr", "display", "error"])
    if kind == "display":
        return nbformat.v4.new_output("display_data", data={"text/plain": "shown"})
    if kind == "error":
        lines = rng.choice([1, 5, MAX_TRACEBACK_LINES, MAX_TRACEBACK_LINES + 1, 400])
        return nbformat.v4.new_output("error", ename="E", evalue="v",
                                      traceback=[f"frame {i}" for i in range(lines)])
    repeat = rng.choice([1, 3, 120, MAX_OUTPUT_LINES])
    return nbformat.v4.new_output("stream", name=kind, text="".join(
        rng.choice(PIECES) for _ in range(rng.randint(1, 4))) * repeat)


def random_notebook(seed: int) -> nbformat.NotebookNode:
    rng = random.Random(seed)
    nb = nbformat.v4.new_notebook()
    for _ in range(rng.randint(1, 4)):
        cell = nbformat.v4.new_code_cell("pass")
        cell.outputs = [random_output(rng) for _ in range(rng.randint(0, 8))]
        nb.cells.append(cell)
    nb.cells.append(nbformat.v4.new_markdown_cell("text"))
    return nb


@pytest.mark.parametrize("seed", range(200))
def test_outputs_are_merged_and_limited_as_nbconvert_and_nbgrader_do(seed):
    nb = random_notebook(seed)
    theirs, _ = CoalesceStreamsPreprocessor().preprocess(copy.deepcopy(nb), {})
    theirs, _ = LimitOutput(config=nbgrader_config()).preprocess(theirs, {})
    assert limit_outputs(coalesce_streams(copy.deepcopy(nb))) == theirs


def test_the_limits_are_nbgraders_as_the_course_configures_it():
    limiter = LimitOutput(config=nbgrader_config())
    assert (limiter.max_lines, limiter.max_traceback) == (MAX_OUTPUT_LINES, MAX_TRACEBACK_LINES)


def test_the_runner_starts_without_nbgrader_or_nbconvert():
    # The runner starts once per graded notebook, in the sandbox: nbgrader's import (server
    # extensions, exchange, database) and nbconvert's would be most of its start-up.
    probe = ("import sys\n"
             "from course_lib.grading import runner, execution\n"
             "runner.import_nbformat()\n"
             "runner.kernel_manager_class()\n"
             "print(sorted(m.split('.')[0] for m in sys.modules\n"
             "             if m.split('.')[0] in ('nbgrader', 'nbconvert')))")
    done = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
