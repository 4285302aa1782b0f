"""Executes one notebook inside the grading sandbox: ``python -m course_lib.grading.runner``.

Protocol: the notebook (JSON) arrives on stdin; ``{"notebook": ..., "error": str | null}`` leaves
on the original stdout. Before anything runs, the runner moves that stdout to a private file
descriptor and points fds 1 and 2 at /dev/null, so the kernel (and the submission's code in it)
cannot write into the result. Cells run with nbgrader's ``Execute`` (per-cell timeout, errors
recorded, execution continues); if the kernel dies, every cell that did not run gets an error
output, so it can never count as passed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def mark_unexecuted(nb, reason: str) -> None:
    """Give every code cell that did not run an error output (so nbgrader scores it 0)."""
    import nbformat

    for cell in nb.cells:
        if cell.cell_type == "code" and cell.get("execution_count") is None and not cell.outputs:
            cell.outputs = [nbformat.v4.new_output(
                "error", ename="NotExecuted", evalue=reason, traceback=[f"NotExecuted: {reason}"])]


def execute(nb, cell_timeout: int):
    import nbformat
    from nbconvert.preprocessors import CoalesceStreamsPreprocessor
    from nbgrader.preprocessors import Execute, LimitOutput

    from course_lib.grading.config import nbgrader_config

    class TrackingExecute(Execute):
        """nbgrader's Execute, remembering which cell is running when the kernel dies."""

        running: int | None = None

        def on_cell_execute(self, **kwargs):
            self.running = kwargs["cell_index"]

        def on_cell_executed(self, **kwargs):
            super().on_cell_executed(**kwargs)
            self.running = None

    config = nbgrader_config()
    config.Execute.timeout = cell_timeout  # config outranks constructor arguments in traitlets
    executor = TrackingExecute(config=config)
    limiter = LimitOutput(config=config)
    error = None
    try:
        nb, _ = executor.preprocess(nb, {"metadata": {"path": os.getcwd()}})
    except Exception as failure:  # DeadKernelError and friends: keep what ran
        error = f"{type(failure).__name__}: {failure}".strip()
        if executor.running is not None:
            reason = f"the kernel died while this cell ran ({error})"
            nb.cells[executor.running].outputs.append(nbformat.v4.new_output(
                "error", ename="KernelDied", evalue=reason, traceback=[f"KernelDied: {reason}"]))
        mark_unexecuted(nb, f"the kernel stopped before this cell ran ({error[:200]})")
    # The kernel flushes printed text in chunks whose boundaries vary from run to run: merge
    # them, so that grading the same submission twice gives the same notebook and feedback.
    nb, _ = CoalesceStreamsPreprocessor().preprocess(nb, {})
    nb, _ = limiter.preprocess(nb, {})
    return nb, error


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=int, required=True, help="seconds per cell")
    args = parser.parse_args()

    result = os.fdopen(os.dup(1), "w", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as we do

    import nbformat

    nb = nbformat.reads(sys.stdin.buffer.read().decode("utf-8"), as_version=4)
    try:
        nb, error = execute(nb, args.timeout)
    except Exception as failure:  # anything else: report, never hang
        error = f"{type(failure).__name__}: {failure}"
        mark_unexecuted(nb, error[:200])
    json.dump({"notebook": nb, "error": error}, result)
    result.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
