"""Reading a submission before anything runs, and turning an autograded notebook's error
outputs into the reasons a student reads.

A submission is only what is in its folder: a link anywhere in it (the lesson folder itself
included) is refused, as is anything that is not a plain file or folder, and what is copied for
the sandbox is capped in bytes (by each file's apparent size, so a sparse file is refused,
never expanded), in files and in depth.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import nbformat

from course_lib.grading.verdicts.verdict import error_outputs, is_test_cell, short_name

MAX_NOTEBOOK_BYTES = 20 * 2**20
MAX_FILES_BYTES = 64 * 2**20  # the other files of one lesson folder, together
MAX_FILES = 500
MAX_DEPTH = 8
SKIPPED = (".ipynb_checkpoints",)
# The error names the runner, the grader and the self-checks raise, in the words a status uses.
PLAIN_WORDS = {"NotExecuted": "not run", "SandboxError": "not run", "KernelDied": "not run",
               "SelfCheckFailed": "self-check failed", "WrongAnswer": "wrong answer",
               "NoResults": "no result", "Tampered": "tampered"}


class Refused(Exception):
    """The submission folder cannot be graded as it is; the message says why."""


def plain_files(folder: Path) -> list[tuple[Path, int]]:
    """The files of a submission folder to copy for the sandbox (relative path, size): every
    plain file except notebooks. Raises :class:`Refused` for a link, a special file, or a folder
    over the caps; never follows a link and never reads a file."""
    if folder.is_symlink():
        raise Refused("the lesson folder is a symbolic link")
    found, total, pending = [], 0, [(folder, 0)]
    try:
        while pending:
            current, depth = pending.pop()
            with os.scandir(current) as entries:
                for entry in sorted(entries, key=lambda e: e.name):
                    path = Path(entry.path)
                    relative = path.relative_to(folder)
                    mode = entry.stat(follow_symlinks=False).st_mode
                    if stat.S_ISLNK(mode):
                        raise Refused(f"{_shown(relative)} is a symbolic link")
                    if entry.name in SKIPPED:
                        continue
                    if stat.S_ISDIR(mode):
                        if depth + 1 >= MAX_DEPTH:
                            raise Refused(f"folders are nested more than {MAX_DEPTH} deep")
                        pending.append((path, depth + 1))
                    elif not stat.S_ISREG(mode):
                        raise Refused(f"{_shown(relative)} is not a plain file")
                    elif entry.name.endswith(".ipynb"):
                        continue
                    else:
                        size = entry.stat(follow_symlinks=False).st_size
                        total += size
                        found.append((relative, size))
                        if len(found) > MAX_FILES:
                            raise Refused(f"more than {MAX_FILES} files")
                        if total > MAX_FILES_BYTES:
                            raise Refused(f"its files hold more than {MAX_FILES_BYTES >> 20} MiB")
    except OSError as error:
        raise Refused(f"the folder could not be read ({type(error).__name__}: "
                      f"{error.strerror or error})") from error
    return found


def stage_files(folder: Path, target: Path) -> Path:
    """Copy :func:`plain_files` of ``folder`` into ``target`` (made fresh), each file read through
    a descriptor that follows no link, and never more bytes than were counted."""
    files = plain_files(folder)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    try:
        for relative, size in files:
            destination = target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            handle = os.open(folder / relative, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(handle, "rb") as source, open(destination, "wb") as copy:
                if not stat.S_ISREG(os.fstat(source.fileno()).st_mode):
                    raise Refused(f"{_shown(relative)} is not a plain file")
                copy.write(source.read(size))
    except OSError as error:
        raise Refused(f"the folder could not be copied ({type(error).__name__}: "
                      f"{error.strerror or error})") from error
    return target


def _shown(relative: Path) -> str:
    text = str(relative)
    return repr(text if len(text) <= 60 else "…" + text[-59:])


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
    if name in PLAIN_WORDS:
        return f"{PLAIN_WORDS[name]}: {value}"
    shown = short_name(name)
    return f"raised {shown}: {value}" if value else f"raised {shown}"


def reasons_by_grade_id(nb, timeout: int, memory_gb: float) -> dict[str, str]:
    """For each test cell present: '' if it ran clean, else why it failed.

    An error in the exercise's own code (the cells since the previous test cell) is reported
    in preference to the error it then caused in the test.
    """
    reasons, own_code_error = {}, ""
    for cell in nb.cells:
        errors = error_outputs(cell)
        if is_test_cell(cell):
            test_error = explain_error(errors[-1], timeout, memory_gb) if errors else ""
            reasons[cell.metadata["nbgrader"]["grade_id"]] = \
                (own_code_error or test_error) if errors else ""
            own_code_error = ""
        elif errors and cell.cell_type == "code":
            own_code_error = explain_error(errors[0], timeout, memory_gb)
    return reasons
