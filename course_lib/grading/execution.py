"""Runs a submission's cells in the grading kernel, for the runner inside the sandbox.

:class:`GradingClient` is nbclient's notebook client (the engine of nbconvert's and nbgrader's
``Execute``) set as nbgrader's ``Execute`` sets it: a per-cell timeout that interrupts the
kernel, errors recorded and the next cell run, an error output for a cell whose reply reports an
error its outputs do not show (a timeout); after the last cell the kernel is killed, not asked
to shut down. :func:`coalesce_streams` and :func:`limit_outputs` do what nbconvert's
``CoalesceStreamsPreprocessor`` and nbgrader's ``LimitOutput`` do.

Nothing here imports nbgrader or nbconvert: the runner starts once per graded notebook, and
those packages' imports (nbgrader's server extensions, exchange and database among them) would
be most of its start-up.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from nbclient import NotebookClient
from nbformat import NotebookNode

from course_lib.grading.config import MAX_OUTPUT_LINES

CELL_TIMEOUT_ERROR = {
    "ename": "CellTimeoutError",
    "evalue": "",
    "traceback": ["\x1b[0;31mCellTimeoutError\x1b[0m: No reply from kernel before timeout"],
}
MAX_TRACEBACK_LINES = 100  # nbgrader's LimitOutput default
_CARRIAGE_RETURN = re.compile(r".*\r(?=[^\n])")  # text a \r overwrites, as nbconvert drops it

CellHook = Callable[[NotebookNode, int], None]


class GradingClient(NotebookClient):
    """Executes every cell of ``nb`` in order in a kernel started by ``kernel_manager_class``,
    in ``workdir``. ``before(cell, index)`` and ``after(cell, index)`` are called around each
    cell; ``running`` is the index of the cell being executed (None between cells), so that a
    kernel that dies can be blamed on its cell."""

    def __init__(self, nb: NotebookNode, *, cell_timeout: int, workdir: Path,
                 kernel_manager_class: type, before: CellHook | None = None,
                 after: CellHook | None = None) -> None:
        super().__init__(nb, timeout=cell_timeout, interrupt_on_timeout=True, allow_errors=True,
                         raise_on_iopub_timeout=True, error_on_timeout=dict(CELL_TIMEOUT_ERROR),
                         kernel_manager_class=kernel_manager_class,
                         # the kernel is killed after the last cell, as every process of the
                         # sandbox is before the results are read: nothing the submission
                         # registered to run at exit runs (and tearing torch down gracefully
                         # costs half a second of CPU per notebook)
                         shutdown_kernel="immediate",
                         resources={"metadata": {"path": str(workdir)}})
        self.before_cell, self.after_cell = before, after
        self.running: int | None = None

    def run(self) -> NotebookNode:
        """Start the kernel, execute each cell with its history stored, stop the kernel."""
        self.reset_execution_trackers()
        with self.setup_kernel():
            info = self.wait_for_reply(self.kc.kernel_info())
            self.nb.metadata["language_info"] = info["content"]["language_info"]
            for index, cell in enumerate(self.nb.cells):
                self.execute_cell(cell, index, store_history=True)
        self.set_widgets_metadata()
        return self.nb

    def on_cell_execute(self, cell: NotebookNode, cell_index: int) -> None:
        self.running = cell_index
        if self.before_cell is not None:
            self.before_cell(cell, cell_index)

    def on_cell_executed(self, cell: NotebookNode, cell_index: int, execute_reply: dict) -> None:
        if self.after_cell is not None:
            self.after_cell(cell, cell_index)
        content = execute_reply["content"]
        if content["status"] == "error" and not any(
                output.output_type == "error" and output.ename == content["ename"]
                for output in cell.outputs):
            cell.outputs.append(NotebookNode(
                output_type="error", ename=content["ename"], evalue=content["evalue"],
                traceback=content["traceback"] or ["ERROR: An error occurred while "
                                                   "showtraceback was disabled"]))
        self.running = None


def coalesce_streams(nb: NotebookNode) -> NotebookNode:
    """Each run of consecutive outputs of one stream merged into one output (the kernel flushes
    printed text in chunks whose boundaries vary from run to run), text a carriage return
    overwrites removed."""
    for cell in nb.cells:
        outputs = cell.get("outputs") or []
        merged: list[NotebookNode] = []
        for output in outputs:
            last = merged[-1] if merged else None
            if last is not None and output.output_type == last.output_type == "stream" \
                    and output.name == last.name:
                last.text += output.text
            else:
                merged.append(output)
        for output in merged:
            if output.output_type == "stream" and "\r" in output.text:
                output.text = _CARRIAGE_RETURN.sub("", output.text)
        if outputs:
            cell.outputs = merged
    return nb


def limit_outputs(nb: NotebookNode, max_lines: int = MAX_OUTPUT_LINES,
                  max_traceback: int = MAX_TRACEBACK_LINES) -> NotebookNode:
    """Each code cell's stream outputs cut to ``max_lines`` lines in all (the cut marked
    ``... Output truncated ...``), and each traceback longer than ``max_traceback`` lines cut to
    its first and last lines around ``... Traceback truncated ...``."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept, lines = [], 0
        for output in cell.outputs:
            if output.output_type == "stream":
                if lines == max_lines:
                    continue
                text = output.text.split("\n")
                if lines + len(text) > max_lines:
                    text = text[:max_lines - lines - 1] + ["... Output truncated ..."]
                lines += len(text)
                output.text = "\n".join(text)
            kept.append(output)
        cell.outputs = kept
        for output in cell.outputs:
            if output.output_type == "error" and len(output.traceback) > max_traceback:
                head = max_traceback // 2
                tail = max_traceback - head - 1
                output.traceback = [*output.traceback[:head], "... Traceback truncated ...",
                                    *output.traceback[-tail:]]
    return nb
