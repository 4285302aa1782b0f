"""One notebook graded with trusted verdicts: inputs in, data out, judged here.

:func:`grade_notebook` is the step between nbgrader restoring a submission's test cells and
nbgrader scoring them: it writes each exercise's secret inputs into the sandbox's folder, runs
the notebook there, judges what came back (:mod:`course_lib.grading.verdict`), and rewrites each
test cell's outputs so that nbgrader's scoring (an error output means zero) says exactly what the
verdict says: a passing exercise loses any error the kernel printed, a failing one gains the
verdict's error, and no test cell keeps an ``execute_result`` (nbgrader would read it as partial
credit that the kernel chose).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import nbformat
import torch

from course_lib.grading import hidden
from course_lib.grading.verdict import (
    Reference,
    UnusableResults,
    Verdict,
    draw_inputs,
    expected_records,
    is_test_cell,
    judge,
    load_reference,
    read_results,
    seed_for,
    static_flags,
)

GRADING_FOLDER = ".grading"  # inside the sandbox's writable folder; COURSE_GRADING_DIR points here


def grade_notebook(nb, workdir: Path, *, source: Path, key: bytes, names: tuple[str, str, str],
                   execute: Callable) -> tuple[nbformat.NotebookNode, dict[str, Verdict]]:
    """Run ``nb`` with ``execute(nb, workdir)`` and judge it against the source notebook.

    ``names`` = (student, lesson, notebook) seeds the inputs together with ``key``.
    """
    reference = load_reference(source)
    folder = fresh_folder(Path(workdir) / GRADING_FOLDER)
    inputs = write_inputs(reference, folder, key, names)
    executed = execute(nb, workdir)
    verdicts = {}
    for cell in executed.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if not is_test_cell(cell) or grade_id not in reference.tests or grade_id in verdicts:
            continue
        test = reference.tests[grade_id]
        try:
            results = read_results_inside(folder, grade_id)
        except UnusableResults:
            results = None
        failed = any(o.get("output_type") == "error" for o in cell.get("outputs", []))
        verdict = judge(test, expected_records(test, inputs[grade_id]), results, failed)
        called = results["reference_calls"] if results else []
        verdict.flags = static_flags(nb, grade_id, test.reimplements) + [
            f"called {name} while graded" for name in called if isinstance(name, str)
            and set(name.split(" or ")) <= set(test.reimplements)]
        verdicts[grade_id] = verdict
    apply_verdicts(executed, verdicts)
    return executed, verdicts


def fresh_folder(folder: Path) -> Path:
    """An empty ``folder`` with ``inputs/`` and ``results/``, whatever the submission put there."""
    if folder.is_symlink() or folder.is_file():
        folder.unlink()
    elif folder.exists():
        shutil.rmtree(folder)
    (folder / "inputs").mkdir(parents=True)
    (folder / "results").mkdir()
    return folder


def write_inputs(reference: Reference, folder: Path, key: bytes,
                 names: tuple[str, str, str]) -> dict:
    """Draw and write every exercise's inputs; returns them by grade_id."""
    inputs = {}
    for grade_id, test in reference.tests.items():
        inputs[grade_id] = draw_inputs(test, seed_for(key, *names, grade_id))
        torch.save({"inputs": inputs[grade_id], "functions": list(reference.functions[grade_id])},
                   hidden.inputs_file(folder, grade_id))
    return inputs


def read_results_inside(folder: Path, grade_id: str) -> dict:
    """Read ``results/<grade_id>.pt`` below ``folder``, following no link the sandbox may have
    put in the way (``O_NOFOLLOW`` on every step; ``O_DIRECTORY`` for the folders)."""
    result = hidden.results_file(Path(folder), grade_id)
    opened = []
    try:
        for path in (result.parent.parent, result.parent):
            opened.append(os.open(path.name if opened else path,
                                  os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                  dir_fd=opened[-1] if opened else None))
    except OSError as error:
        raise UnusableResults("no results came back") from error
    else:
        return read_results(result.name, dir_fd=opened[-1])
    finally:
        for handle in opened:
            os.close(handle)


def apply_verdicts(nb, verdicts: dict[str, Verdict]) -> None:
    """Make each judged test cell's outputs say its verdict (see the module docstring)."""
    for cell in nb.cells:
        verdict = verdicts.get(cell.metadata.get("nbgrader", {}).get("grade_id"))
        if verdict is None or not is_test_cell(cell):
            continue
        outputs = [o for o in cell.get("outputs", []) if o.get("output_type") != "execute_result"]
        if verdict.passed:
            outputs = [_as_stdout(o) for o in outputs if o.get("output_type") != "error"]
            outputs.append(nbformat.v4.new_output(
                "stream", name="stdout",
                text=f"✓ graded: all {verdict.cases} of the grader's cases agree with the "
                     f"solution\n"))
        elif verdict.error is not None:
            ename, evalue = verdict.error
            outputs.append(nbformat.v4.new_output("error", ename=ename, evalue=evalue,
                                                  traceback=[f"{ename}: {evalue}"]))
        if verdict.flags:
            outputs.append(nbformat.v4.new_output(
                "stream", name="stdout",
                text="⚑ flagged for the instructor: " + "; ".join(verdict.flags) + "\n"))
        cell.outputs = outputs


def _as_stdout(output):
    if output.get("output_type") == "stream" and output.get("name") == "stderr":
        output = nbformat.from_dict(dict(output))
        output["name"] = "stdout"
    return output


def write_verdicts(path: Path, verdicts: dict[str, Verdict]) -> None:
    """The flags of each exercise, for the gradebook's status column."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({g: {"passed": v.passed, "flags": v.flags}
                                for g, v in verdicts.items()}, indent=1))


def read_flags(path: Path) -> dict[str, list[str]]:
    if not path.is_file():
        return {}
    return {g: record["flags"] for g, record in json.loads(path.read_text()).items()}
