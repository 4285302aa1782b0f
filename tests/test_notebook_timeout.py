"""A notebook cell that hangs fails `make test` quickly, naming the notebook and the cell: the
fast-profile cell timeout is minutes, not the full profile's hour, and nbval's timeout stops even
a kernel that ignores interrupts."""

from __future__ import annotations

import re
import subprocess
import sys

import nbformat

from tests.lab_support import ROOT

MAKEFILE = (ROOT / "Makefile").read_text()


def make_variable(name: str) -> int:
    return int(re.search(rf"^{name} \?= (\d+)$", MAKEFILE, re.M).group(1))


def test_make_test_gives_a_fast_profile_cell_minutes_and_a_full_profile_cell_an_hour():
    fast, full = make_variable("FAST_CELL_TIMEOUT"), make_variable("FULL_CELL_TIMEOUT")
    assert 60 <= fast <= 300 < full
    test_recipe = MAKEFILE.split("\ntest: setup", 1)[1].split("\n\n", 1)[0]
    assert "--nbval-cell-timeout=$(FAST_CELL_TIMEOUT)" in test_recipe


def test_a_cell_that_hangs_and_ignores_interrupts_fails_fast_and_is_named(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import signal, time\n"
                                          "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                          "time.sleep(600)"),
                nbformat.v4.new_code_cell("print('never reached')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, tmp_path / "hangs.ipynb")
    # without the cell timeout this would run for 600 s and hit the subprocess's limit
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "--nbval-lax", "--nbval-current-env", "--nbval-cell-timeout=5", "hangs.ipynb"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "FAILED hangs.ipynb::Cell 0" in result.stdout, result.stdout[-2000:]
