"""One notebook graded with trusted verdicts: inputs in, observations out, judged here.

:func:`grade_notebook` is the step between nbgrader restoring a submission's test cells and
nbgrader scoring them. It decides which cells are the test cells from the grader's source
notebook (their text), draws each exercise's inputs from the key and this run's nonce, sends the
notebook and the inputs into the sandbox (where the runner hands each test cell its inputs as it
starts and seals its observation as it ends), and trusts nothing of what comes back but
observations:

- the returned cells are matched to the grader's own copy of what it sent, by cell id (ids the
  grader gave them); only their outputs are copied back, so sources, metadata and points are
  the grader's. Missing, extra or altered cells, or an observation that arrived out of its test
  cell's turn, mark the notebook tampered: every exercise of it fails, flagged;
- each exercise's results file is parsed here
  (:func:`course_lib.grading.verdicts.verdict.parse_results`) and judged against the solution's
  observations (:func:`course_lib.grading.verdicts.verdict.judge`);
- each test cell's outputs are rewritten so that nbgrader's scoring (an error output means
  zero) says exactly what the verdict says: a passing exercise loses any error the kernel
  printed, a failing one gains the verdict's error, and no test cell keeps an
  ``execute_result`` (nbgrader would read it as partial credit that the kernel chose).
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import torch

from course_lib.grading.config import read_source_notebook
from course_lib.grading.verdicts.static_check import cell_roles, notebook_findings
from course_lib.grading.verdicts.verdict import (
    UnusableResults,
    Verdict,
    draw_inputs,
    expected_records,
    judge,
    load_reference,
    parse_results,
    seed_for,
)

OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")


def grade_notebook(nb, staged: Path, *, source: Path, key: bytes, nonce: str,
                   names: tuple[str, str, str], execute: Callable
                   ) -> tuple[nbformat.NotebookNode, NotebookVerdicts]:
    """Run ``nb`` with ``execute(nb, staged, tests)`` and judge it against the source notebook.

    ``execute`` returns a :class:`course_lib.grading.isolation.sandbox.Returned`; ``tests`` maps
    each test cell's id to (grade_id, inputs bytes). ``names`` = (student, lesson, notebook) seeds
    the inputs together with ``key`` and ``nonce``.
    """
    reference = load_reference(source)
    source_nb = read_source_notebook(source)
    sent = with_grader_ids(nb)
    test_cells = {sent.cells[role.index]["id"]: role.test
                  for role in cell_roles(sent, source_nb)
                  if role.test in reference.tests}
    inputs = {grade_id: draw_inputs(test, seed_for(key, nonce, *names, grade_id))
              for grade_id, test in reference.tests.items()}
    returned = execute(sent, staged, {
        cell_id: (grade_id, inputs_bytes(inputs[grade_id], reference.functions[grade_id]))
        for cell_id, grade_id in test_cells.items()})
    executed, tampering = merge_outputs(sent, returned.notebook)
    tampering = "; ".join(filter(None, [tampering, *returned.tampering[:3]]))
    verdicts = NotebookVerdicts(out_of_memory=returned.out_of_memory, tampered=tampering)
    static = notebook_findings(nb, source_nb, {grade_id: test.reimplements
                                               for grade_id, test in reference.tests.items()})
    for cell in executed.cells:
        grade_id = test_cells.get(cell.get("id"))
        if grade_id is None or grade_id in verdicts.exercises:
            continue
        test = reference.tests[grade_id]
        expected = expected_records(test, inputs[grade_id])
        if tampering:
            verdict = Verdict(False, len(expected), ("Tampered", tampering))
        else:
            try:
                results = parse_results(returned.results[grade_id])
            except (KeyError, UnusableResults):
                results = None
            failed = any(o.get("output_type") == "error" for o in cell.get("outputs", []))
            verdict = judge(test, expected, results, failed)
            called = results["reference_calls"] if results else []
            verdict.flags += [f"called {name} while graded" for name in called
                              if isinstance(name, str)
                              and set(name.split(" or ")) <= set(test.reimplements)]
        verdict.flags = static[grade_id].flags + verdict.flags
        verdict.withheld = static[grade_id].withheld
        verdicts.exercises[grade_id] = verdict
    apply_verdicts(executed, verdicts.exercises, test_cells)
    return executed, verdicts


def inputs_bytes(inputs, functions: tuple[str, ...]) -> bytes:
    """The inputs file a test cell reads: its inputs and the functions whose calls are noted."""
    buffer = io.BytesIO()
    torch.save({"inputs": inputs, "functions": list(functions)}, buffer)
    return buffer.getvalue()


# What came back


def with_grader_ids(nb) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose cells carry ids the grader chose (unique, in order)."""
    sent = copy.deepcopy(nb)
    sent.nbformat, sent.nbformat_minor = 4, max(5, int(sent.get("nbformat_minor", 0)))
    for index, cell in enumerate(sent.cells):
        cell["id"] = f"graded-{index}"
    return sent


def merge_outputs(sent, returned) -> tuple[nbformat.NotebookNode, str]:
    """``sent`` with the outputs of the matching returned cells, and what was wrong ('' if
    nothing): a cell that was not sent, sent once and returned twice, missing, or altered."""
    merged = copy.deepcopy(sent)
    mine = {cell["id"]: cell for cell in merged.cells}
    problems, seen = [], set()
    cells = returned.get("cells") if isinstance(returned, dict) else None
    if not isinstance(cells, list):
        return merged, "no cells came back"
    for cell in cells:
        cell_id = cell.get("id") if isinstance(cell, dict) else None
        if cell_id not in mine or cell_id in seen:
            problems.append(f"a cell came back that was not sent ({str(cell_id)[:40]!r})")
            continue
        seen.add(cell_id)
        ours = mine[cell_id]
        if cell.get("cell_type") != ours.cell_type or cell.get("source") != ours.source:
            problems.append(f"cell {cell_id} came back altered")
            continue
        if ours.cell_type == "code":
            outputs = cell.get("outputs", [])
            if not _plain_outputs(outputs):
                problems.append(f"cell {cell_id} came back with malformed outputs")
                continue
            ours.outputs = [nbformat.from_dict(o) for o in outputs]
            count = cell.get("execution_count")
            ours.execution_count = count if isinstance(count, int) \
                and not isinstance(count, bool) else None
    problems += [f"cell {cell_id} did not come back" for cell_id in mine if cell_id not in seen]
    if not problems:
        try:
            nbformat.validate(merged)
        except Exception as error:  # noqa: BLE001 - any schema error means the same
            problems.append(f"the outputs are not valid ({type(error).__name__})")
    return merged, "; ".join(problems[:3]) + ("; …" if len(problems) > 3 else "")


def _plain_outputs(outputs) -> bool:
    return isinstance(outputs, list) and all(
        isinstance(o, dict) and o.get("output_type") in OUTPUT_TYPES for o in outputs)


# Verdicts into the notebook, and beside it for the gradebook


@dataclass
class NotebookVerdicts:
    """Every exercise's verdict in one notebook, and what the run as a whole showed."""

    exercises: dict[str, Verdict] = field(default_factory=dict)
    out_of_memory: bool = False
    tampered: str = ""


def apply_verdicts(nb, verdicts: dict[str, Verdict], test_cells: dict[str, str]) -> None:
    """Make each judged test cell's outputs say its verdict (see the module docstring);
    ``test_cells`` maps the test cells' ids to their grade_ids."""
    for cell in nb.cells:
        verdict = verdicts.get(test_cells.get(cell.get("id")))
        if verdict is None:
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
        if verdict.flags or verdict.withheld:
            outputs.append(nbformat.v4.new_output(
                "stream", name="stdout",
                text="⚑ flagged for the instructor: "
                     + "; ".join(verdict.withheld + verdict.flags) + "\n"))
        cell.outputs = outputs


def _as_stdout(output):
    if output.get("output_type") == "stream" and output.get("name") == "stderr":
        output = nbformat.from_dict(dict(output))
        output["name"] = "stdout"
    return output


def write_verdicts(path: Path, verdicts: NotebookVerdicts) -> None:
    """Each exercise's verdict and flags, for the gradebook."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "out_of_memory": verdicts.out_of_memory, "tampered": verdicts.tampered,
        "exercises": {g: {"passed": v.passed, "flags": v.flags, "withheld": v.withheld}
                      for g, v in verdicts.exercises.items()}}, indent=1))


def read_verdicts(path: Path) -> NotebookVerdicts:
    """What :func:`write_verdicts` wrote; no verdicts where the notebook never got that far."""
    if not path.is_file():
        return NotebookVerdicts()
    data = json.loads(path.read_text())
    return NotebookVerdicts(
        {g: Verdict(r["passed"], flags=r["flags"], withheld=r["withheld"])
         for g, r in data["exercises"].items()}, data["out_of_memory"], data["tampered"])
