"""Executes one notebook inside the grading sandbox: ``python -I -m course_lib.grading.runner``.

Protocol: one JSON object arrives on stdin, ``{"notebook": JSON text, "tests": {cell id:
{"grade_id": str, "inputs": base64 bytes}}}``; one JSON object leaves on the original stdout:
``{"notebook": ..., "error": str | null, "results": {grade_id: base64 bytes}, "tampering":
[str]}``.

Observations are sealed as they are made (:class:`Sealer`): each test cell's inputs file appears
only while that cell runs, and its observation is taken from the results folder the moment the
cell ends, before the next cell starts; nothing a later cell does can change it. An observation
found at any other moment (before its test cell, after it, from another cell, or after the last
cell) is reported as tampering.

The runner is the grader's agent inside the sandbox, so the submission must not reach it:

- it starts isolated (``-I``: no current folder on ``sys.path``, no ``PYTHON*`` variables, no
  user site), so a ``course_lib/``, ``torch.py`` or ``sitecustomize.py`` shipped in the
  submission is never what it imports;
- before anything of the submission exists it makes itself non-dumpable, so that the kernel,
  running as the same user without capabilities, cannot open its ``/proc/<pid>/fd``, ``mem``
  or ``environ``; it ignores the signals a process may send it, and in the sandbox it is the pid
  namespace's first process (``bwrap --as-pid-1``), which the kernel cannot kill;
- it moves its stdout to a private descriptor and points fds 1 and 2 at /dev/null;
- it copies the staged submission (read-only) into the writable folder, then starts the kernel
  from a fixed kernel spec (``-I``, the working folder not on ``sys.path``, IPython and Jupyter
  settings from fresh folders of its own), whatever the notebook's metadata names;
- when the cells have run it ends every other process of the sandbox and only then looks at
  the results folder a last time (regular files, bounded sizes, no links followed).

Cells run with :class:`~course_lib.grading.execution.GradingClient`, set as nbgrader's
``Execute`` (per-cell timeout, errors recorded, execution continues);
if the kernel dies, every cell that did not run gets an error output, so it can never count as
passed.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import stat
import sys
from pathlib import Path

RESULTS_TOTAL_BYTES = 64 * 2**20
RESULT_FILE_BYTES = 32 * 2**20
GRADING_FOLDER = ".grading"  # the hidden tests' inputs/ and results/; COURSE_GRADING_DIR
GRADER_FOLDER = ".grader"  # the kernel's IPython and Jupyter settings, made fresh by the runner


def inputs_file(folder: Path, grade_id: str) -> Path:
    """Where, in the grading folder, a test cell finds its inputs while it runs."""
    return folder / "inputs" / f"{grade_id}.pt"


def results_file(folder: Path, grade_id: str) -> Path:
    """Where, in the grading folder, a test cell leaves its observation."""
    return folder / "results" / f"{grade_id}.pt"


def become_unreachable() -> None:
    """Non-dumpable (``/proc/<pid>`` closed to same-user processes without CAP_SYS_PTRACE),
    deaf to the signals a submission could send."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_dumpable = 4
        if libc.prctl(pr_set_dumpable, 0, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGPIPE"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)


def mark_unexecuted(nb, reason: str) -> None:
    """Give every code cell that did not run an error output (so nbgrader scores it 0)."""
    import nbformat

    for cell in nb.cells:
        if cell.cell_type == "code" and cell.get("execution_count") is None and not cell.outputs:
            cell.outputs = [nbformat.v4.new_output(
                "error", ename="NotExecuted", evalue=reason, traceback=[f"NotExecuted: {reason}"])]


def prepare_folder(source: Path, workdir: Path) -> dict[str, str]:
    """Copy the staged submission into ``workdir``; make the runner's own folders fresh
    (whatever the submission shipped under those names is removed).

    Returns the environment the kernel gets for its settings.
    """
    if source != workdir:
        shutil.copytree(source, workdir, symlinks=True, dirs_exist_ok=True)
    grader = workdir / GRADER_FOLDER
    for path in (grader, workdir / GRADING_FOLDER):
        _remove(path)
    folders = {name: grader / name for name in ("ipython", "config", "data", "mpl")}
    grading = workdir / GRADING_FOLDER
    for folder in [*folders.values(), inputs_file(grading, "").parent,
                   results_file(grading, "").parent]:
        folder.mkdir(parents=True)
    for sub in ("tmp", "runtime"):
        path = workdir / sub
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            path.unlink()
        path.mkdir(exist_ok=True)
    return {"IPYTHONDIR": str(folders["ipython"]), "JUPYTER_CONFIG_DIR": str(folders["config"]),
            "JUPYTER_DATA_DIR": str(folders["data"]), "MPLCONFIGDIR": str(folders["mpl"]),
            "JUPYTER_PATH": "", "JUPYTER_CONFIG_PATH": ""}


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


class Sealer:
    """Hands each test cell its inputs as it starts and seals its observation as it ends.

    ``tests`` maps a test cell's id to ``(grade_id, inputs bytes)``. :meth:`before` and
    :meth:`after` run around every cell; :meth:`finish` once the kernel is gone. Whatever is in
    the results folder at those moments is taken out of it; only the file of the test cell that
    just ended, the first time, is sealed (:attr:`sealed`); anything else is noted in
    :attr:`tampering`.
    """

    def __init__(self, folder: Path, tests: dict[str, tuple[str, bytes]]):
        self.folder, self.tests = folder, tests
        self.sealed: dict[str, bytes] = {}
        self.tampering: list[str] = []
        self.running: str | None = None  # the grade_id of the test cell running now
        self.total = 0

    def before(self, cell, index: int) -> None:
        self._unexpected(self._take(), f"before cell {index + 1} ran")
        test = self.tests.get(cell.get("id"))
        if test is not None:
            grade_id, inputs = test
            self.running = grade_id
            _write_fresh(inputs_file(self.folder, grade_id), inputs)

    def after(self, cell, index: int) -> None:
        found = self._take()
        if self.running is not None:
            self._seal(found, self.running)
            _remove(inputs_file(self.folder, self.running))
            self.running = None
        self._unexpected(found, f"from cell {index + 1}, which is not its test cell")

    def finish(self) -> None:
        found = self._take()
        if self.running is not None:  # the run broke off in a test cell: it is still its own
            self._seal(found, self.running)
            self.running = None
        self._unexpected(found, "after the last cell ran")

    def _seal(self, found: dict[str, bytes | None], grade_id: str) -> None:
        data = found.pop(results_file(self.folder, grade_id).name, None)
        if data is None:
            return
        if grade_id in self.sealed:
            self.tampering.append(f"a second observation of {grade_id} arrived")
        else:
            self.sealed[grade_id] = data

    def _unexpected(self, found: dict[str, bytes | None], when: str) -> None:
        for name in sorted(found):
            self.tampering.append(f"an observation ({name[:60]!r}) arrived {when}")

    def _take(self) -> dict[str, bytes | None]:
        """Empty the results folder: {name: bytes, or None for what is not a plain file of
        bounded size}. A results folder that is no longer a plain folder is made anew."""
        folder = results_file(self.folder, "").parent
        if folder.is_symlink() or not folder.is_dir():
            _remove(folder)
            folder.mkdir(parents=True)
            return {"(the results folder itself)": None}
        found = {}
        with os.scandir(folder) as entries:
            for entry in entries:
                found[entry.name] = self._read(Path(entry.path))
                _remove(Path(entry.path))
        return found

    def _read(self, path: Path) -> bytes | None:
        try:
            handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        with os.fdopen(handle, "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > RESULT_FILE_BYTES \
                    or self.total + info.st_size > RESULTS_TOTAL_BYTES:
                return None
            data = file.read(RESULT_FILE_BYTES + 1)[:RESULT_FILE_BYTES]
        self.total += len(data)
        return data


def _write_fresh(path: Path, data: bytes) -> None:
    """Write ``path`` anew, replacing whatever the kernel left there."""
    _remove(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as file:
        file.write(data)


def kernel_manager_class():
    """A kernel manager that always starts the grading kernel, isolated, whatever the notebook's
    metadata or any kernel spec on the path says."""
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpec

    spec = KernelSpec(
        argv=[sys.executable, "-I", "-m", "course_lib.grading.kernel", "-f",
              "{connection_file}", "--IPKernelApp.ignore_cwd=True"],
        display_name="Python (grading)", language="python", resource_dir="")

    class GradingKernelManager(AsyncKernelManager):
        @property
        def kernel_spec(self):
            return spec

    return GradingKernelManager


def execute(nb, cell_timeout: int, workdir: Path, sealer: Sealer | None = None):
    from course_lib.grading.execution import GradingClient, coalesce_streams, limit_outputs

    nbformat = import_nbformat()
    client = GradingClient(nb, cell_timeout=cell_timeout, workdir=workdir,
                           kernel_manager_class=kernel_manager_class(),
                           before=sealer.before if sealer else None,
                           after=sealer.after if sealer else None)
    error = None
    try:
        nb = client.run()
    except Exception as failure:  # DeadKernelError and friends: keep what ran
        error = f"{type(failure).__name__}: {failure}".strip()
        if client.running is not None:
            reason = f"the kernel died while this cell ran ({error})"
            nb.cells[client.running].outputs.append(nbformat.v4.new_output(
                "error", ename="KernelDied", evalue=reason, traceback=[f"KernelDied: {reason}"]))
        mark_unexecuted(nb, f"the kernel stopped before this cell ran ({error[:200]})")
    # Merged streams: grading the same submission twice gives the same notebook and feedback.
    return limit_outputs(coalesce_streams(nb)), error


def end_other_processes() -> None:
    """As the pid namespace's first process, end every other process in it (the kernel and
    whatever it started), so nothing can change the results while they are read."""
    if os.getpid() == 1:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        while True:  # reap: the first process adopts every orphan
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break


def import_nbformat():
    """nbformat, without the grammar for IRI checks that jsonschema (which nbformat imports)
    builds at import when the optional ``rfc3987-syntax`` is installed: a second of CPU in every
    graded notebook's sandbox, for a format that nbformat's schemas never use (and nbformat
    validates with fastjsonschema)."""
    sys.modules.setdefault("rfc3987_syntax", None)  # None: its import fails, the check is skipped
    import nbformat

    return nbformat


def main() -> int:
    become_unreachable()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=int, required=True, help="seconds per cell")
    parser.add_argument("--source", type=Path, required=True, help="the staged submission")
    parser.add_argument("--workdir", type=Path, required=True, help="the writable folder")
    args = parser.parse_args()

    result = os.fdopen(os.dup(1), "w", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as we do

    nbformat = import_nbformat()
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    nb = nbformat.reads(request["notebook"], as_version=4)
    tests = {str(cell_id): (str(test["grade_id"]), base64.b64decode(test["inputs"]))
             for cell_id, test in dict(request.get("tests") or {}).items()}
    workdir = args.workdir
    sealer = Sealer(workdir / GRADING_FOLDER, tests)
    try:
        os.environ.update(prepare_folder(args.source, workdir))
        os.chdir(workdir)
        nb, error = execute(nb, args.timeout, workdir, sealer)
    except Exception as failure:  # anything else: report, never hang
        error = f"{type(failure).__name__}: {failure}"
        mark_unexecuted(nb, error[:200])
    end_other_processes()
    try:
        sealer.finish()
    except OSError as failure:
        sealer.tampering.append(f"the results folder could not be read ({failure.strerror})")
    results = {g: base64.b64encode(data).decode("ascii") for g, data in sealer.sealed.items()}
    json.dump({"notebook": nb, "error": error, "results": results,
               "tampering": sealer.tampering[:20]}, result)
    result.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
