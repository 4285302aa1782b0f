"""Reading a submitted notebook before anything runs, and turning an autograded notebook's
error outputs into the reasons a student reads."""

from __future__ import annotations

from pathlib import Path

import nbformat

MAX_NOTEBOOK_BYTES = 20 * 2**20


def read_submission(path: Path) -> tuple[nbformat.NotebookNode | None, str]:
    """``(notebook, "")`` for a usable submission, else ``(None, reason)``."""
    if not path.exists() and not path.is_symlink():
        return None, f"notebook missing from the submission (expected {path.name})"
    if path.is_symlink() or not path.is_file():
        return None, f"{path.name} is not a regular file"
    size = path.stat().st_size
    if size == 0:
        return None, f"{path.name} is an empty file, not a notebook"
    if size > MAX_NOTEBOOK_BYTES:
        return None, (f"{path.name} is {size / 2**20:.0f} MiB, over the "
                      f"{MAX_NOTEBOOK_BYTES >> 20} MiB limit")
    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except Exception as error:  # JSON, schema and encoding errors all mean the same here
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return None, f"{path.name} is not a valid notebook: {first_line[:200]}"
    return nb, ""


def _error_outputs(cell) -> list:
    return [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def explain_error(output, timeout: int, memory_gb: float) -> str:
    name, value = output.get("ename", "Error"), str(output.get("evalue", "")).strip()
    value = value.splitlines()[0][:200] if value else ""
    if name in ("CellTimeoutError", "KeyboardInterrupt"):
        return f"timed out: a cell ran longer than {timeout} s"
    if name == "MemoryError" or "can't allocate memory" in value:
        return f"out of memory: a cell needed more than the {memory_gb:g} GiB limit"
    if name == "NotImplementedError" and not value:  # the stub; a library's own has a message
        return "not attempted (the cell still raises NotImplementedError)"
    if name in ("SyntaxError", "IndentationError", "TabError"):
        return f"syntax error in the code: {value}"
    if name in ("NotExecuted", "SandboxError", "KernelDied"):
        return f"not run: {value}"
    return f"{name}: {value}" if value else name


def reasons_by_grade_id(nb, timeout: int, memory_gb: float) -> dict[str, str]:
    """For each test cell present: '' if it ran clean, else why it failed.

    An error in the exercise's own code (the cells since the previous test cell) is reported
    in preference to the error it then caused in the test.
    """
    reasons, own_code_error = {}, ""
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        errors = _error_outputs(cell)
        if meta.get("grade") and not meta.get("solution") and cell.cell_type == "code":
            test_error = explain_error(errors[-1], timeout, memory_gb) if errors else ""
            reasons[meta["grade_id"]] = (own_code_error or test_error) if errors else ""
            own_code_error = ""
        elif errors and cell.cell_type == "code":
            own_code_error = explain_error(errors[0], timeout, memory_gb)
    return reasons
