"""A notebook cell that hangs under nbval (`make test-full` runs every notebook with it) fails at
the cell timeout, naming the notebook and the cell, even when its kernel ignores interrupts; a
full-profile cell gets an hour. A kernel that dies in a cell fails it at once, saying how it
died, and kernels listen on sockets no other process can take (tests/kernel_guard.py).
`make test` runs no notebook through nbval: the lessons run in tests/test_lessons_run.py and
the solutions in the grading batch of tests/test_grading.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import nbformat

from tests.lab_support import ROOT

MAKEFILE = (ROOT / "Makefile").read_text()


def make_variable(name: str) -> int:
    return int(re.search(rf"^{name} \?= (\d+)$", MAKEFILE, re.M).group(1))


def recipe(target: str) -> str:
    return MAKEFILE.split(f"\n{target}: setup", 1)[1].split("\n\n", 1)[0]


def test_make_test_full_gives_a_cell_an_hour_and_make_test_runs_no_notebook_through_nbval():
    assert make_variable("FULL_CELL_TIMEOUT") >= 3600
    assert "--nbval-cell-timeout=$(FULL_CELL_TIMEOUT)" in recipe("test-full")
    assert "nbval" not in recipe("test") and "NOTEBOOK" not in recipe("test")


def run_notebook(folder, name: str, cells: list[str], cell_timeout: int, guard: bool = True,
                 timeout: int = 300) -> subprocess.CompletedProcess:
    """pytest --nbval on a notebook of ``cells`` in ``folder``, with or without the guard."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, folder / f"{name}.ipynb")
    plugin = ["-p", "tests.kernel_guard"] if guard else []
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         *plugin, "--nbval-lax", "--nbval-current-env", f"--nbval-cell-timeout={cell_timeout}",
         f"{name}.ipynb"], cwd=folder, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_cell_that_hangs_and_ignores_interrupts_fails_fast_and_is_named(tmp_path):
    # without the cell timeout this would run for 600 s and hit the subprocess's limit
    result = run_notebook(tmp_path, "hangs", ["import signal, time\n"
                                              "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                              "time.sleep(600)", "print('never reached')"], 2)
    assert result.returncode != 0
    assert "FAILED hangs.ipynb::Cell 0" in result.stdout, result.stdout[-2000:]


KILLED = ["import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "print('never reached')"]


def test_a_kernel_killed_in_a_cell_looks_like_a_hang_to_nbval_alone(tmp_path):
    """Without the guard, nbval waits the whole cell timeout for a dead kernel and then reports
    that it could not interrupt it: the symptom of a lesson "hung in its first cell"."""
    result = run_notebook(tmp_path, "killed", KILLED, cell_timeout=3, guard=False)
    assert "FAILED killed.ipynb::Cell 0" in result.stdout, result.stdout[-2000:]
    assert "Timeout of 3 seconds exceeded while executing cell" in result.stdout
    assert "Failed to interrupt kernel" in result.stdout


def test_a_kernel_killed_in_a_cell_fails_that_cell_at_once_saying_how(tmp_path):
    # A cell timeout far past the subprocess's limit: only the guard can end this in time.
    result = run_notebook(tmp_path, "killed", KILLED, cell_timeout=3000, timeout=150)
    assert "FAILED killed.ipynb::Cell 0" in result.stdout, result.stdout[-2000:]
    assert "kernel killed by SIGKILL (the signal the out-of-memory killer sends)" in \
        result.stdout
    assert "Timeout" not in result.stdout


def test_kernels_listen_on_unix_sockets_of_their_own(tmp_path):
    cell = ("from ipykernel.kernelapp import IPKernelApp\n"
            "app = IPKernelApp.instance()\n"
            "assert app.transport == 'ipc', app.transport\n"
            "assert app.ip.startswith(tempfile.gettempdir()) and '/kernel-' in app.ip, app.ip")
    result = run_notebook(tmp_path, "sockets", ["import tempfile", cell], cell_timeout=60)
    assert result.returncode == 0, result.stdout[-2000:]
    assert "2 passed" in result.stdout
