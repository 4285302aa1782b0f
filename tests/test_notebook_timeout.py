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
import pytest

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


def start_notebook(folder, name: str, cells: list[str], cell_timeout: int,
                   guard: bool = True) -> subprocess.Popen:
    """pytest --nbval on a notebook of ``cells`` in ``folder``, with or without the guard,
    started (its output read by :func:`finished`)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, folder / f"{name}.ipynb")
    plugin = ["-p", "tests.kernel_guard"] if guard else []
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         *plugin, "--nbval-lax", "--nbval-current-env", f"--nbval-cell-timeout={cell_timeout}",
         f"{name}.ipynb"], cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


KILLED = ["import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "print('never reached')"]
# name: (cells, nbval's cell timeout, with the guard)
NOTEBOOKS = {
    "hangs": (["import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
               "time.sleep(600)", "print('never reached')"], 2, True),
    # without the guard, nbval waits the cell timeout for a dead kernel
    "killed_unguarded": (KILLED, 3, False),
    # a cell timeout far past the run's limit: only the guard can end it in time
    "killed": (KILLED, 3000, True),
    "sockets": (["import tempfile",
                 "from ipykernel.kernelapp import IPKernelApp\n"
                 "app = IPKernelApp.instance()\n"
                 "assert app.transport == 'ipc', app.transport\n"
                 "assert app.ip.startswith(tempfile.gettempdir()) and '/kernel-' in app.ip, "
                 "app.ip"], 60, True),
}


@pytest.fixture(scope="module")
def nbval_runs(tmp_path_factory):
    """Every notebook of NOTEBOOKS run by nbval, all at once: most of their time is nbval
    waiting for a timeout, so side by side they take the time of the longest."""
    started = {name: start_notebook(tmp_path_factory.mktemp(name), name, cells, timeout, guard)
               for name, (cells, timeout, guard) in NOTEBOOKS.items()}
    try:
        yield {name: finished(run) for name, run in started.items()}
    finally:
        for run in started.values():
            run.kill()


def finished(run: subprocess.Popen) -> subprocess.CompletedProcess:
    """The ended run's exit status and output; a run still going after 150 s has hung."""
    stdout, stderr = run.communicate(timeout=150)
    return subprocess.CompletedProcess(run.args, run.returncode, stdout, stderr)


def test_a_cell_that_hangs_and_ignores_interrupts_fails_fast_and_is_named(nbval_runs):
    # without the cell timeout this would run for 600 s and hit the run's limit
    result = nbval_runs["hangs"]
    assert result.returncode != 0
    assert "FAILED hangs.ipynb::Cell 0" in result.stdout, result.stdout[-2000:]


def test_a_kernel_killed_in_a_cell_looks_like_a_hang_to_nbval_alone(nbval_runs):
    """Without the guard, nbval waits the whole cell timeout for a dead kernel and then reports
    that it could not interrupt it: the symptom of a lesson "hung in its first cell"."""
    result = nbval_runs["killed_unguarded"]
    assert "FAILED killed_unguarded.ipynb::Cell 0" in result.stdout, result.stdout[-2000:]
    assert "Timeout of 3 seconds exceeded while executing cell" in result.stdout
    assert "Failed to interrupt kernel" in result.stdout


def test_a_kernel_killed_in_a_cell_fails_that_cell_at_once_saying_how(nbval_runs):
    result = nbval_runs["killed"]
    assert "FAILED killed.ipynb::Cell 0" in result.stdout, result.stdout[-2000:]
    assert "kernel killed by SIGKILL (the signal the out-of-memory killer sends)" in \
        result.stdout
    assert "Timeout" not in result.stdout


def test_kernels_listen_on_unix_sockets_of_their_own(nbval_runs):
    result = nbval_runs["sockets"]
    assert result.returncode == 0, result.stdout[-2000:]
    assert "2 passed" in result.stdout
