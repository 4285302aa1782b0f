"""Run a submission's notebook isolated, with bubblewrap (``bwrap``).

The sandbox sees, read-only, only what Python needs: the system's libraries, the Python
installation, the grading environment (``sys.prefix``) and ``course_lib``. The one writable
place is a temporary copy of the submission's own folder, mounted at ``/submission`` (also
HOME and TMPDIR). Everything else is absent: ``solutions/`` with the hidden tests, the grading
workspace and its database, other students' work, the gradebook. ``--unshare-all`` removes the
network (loopback stays, for the kernel). Memory (address space) and file sizes are capped with
rlimits; cells time out one by one and the whole run has a deadline.

Without bwrap, untrusted code runs only when the caller passes ``unsafe=True``.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Integer, Unicode

import course_lib
from course_lib.grading.config import DEFAULT_CELL_TIMEOUT_S, DEFAULT_MEMORY_GB
from course_lib.grading.hidden import GRADING_DIR_VARIABLE
from course_lib.grading.trusted import GRADING_FOLDER, grade_notebook, write_verdicts

MOUNT_POINT = "/submission"
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
                "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts",
                "/etc/ssl", "/etc/alternatives", "/etc/fonts", "/etc/matplotlibrc")
MAX_FILE_BYTES = 256 * 2**20


class SandboxUnavailable(RuntimeError):
    """No working sandbox tool, and untrusted code was not allowed to run without one."""


@functools.lru_cache(maxsize=1)
def sandbox_available() -> bool:
    """True when ``bwrap`` exists and can create namespaces here."""
    if shutil.which("bwrap") is None:
        return False
    probe = subprocess.run(["bwrap", "--unshare-all", "--ro-bind", "/", "/", "true"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


def readable_paths() -> list[str]:
    """What the sandbox may read: system libraries, Python, the environment, course_lib."""
    paths = [p for p in SYSTEM_DIRS if os.path.exists(p)]
    paths += [p for p in SYSTEM_FILES if os.path.exists(p)]
    package = str(Path(course_lib.__file__).resolve().parent)
    for path in (sys.base_prefix, sys.prefix, sys.exec_prefix, package):
        real = os.path.realpath(path)
        paths += [path] + ([real] if real != path else [])
    return list(dict.fromkeys(paths))


def bwrap_command(workdir: Path) -> list[str]:
    command = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
               "--proc", "/proc", "--dev", "/dev"]
    for path in readable_paths():
        command += ["--ro-bind", path, path]
    command += ["--bind", str(workdir), MOUNT_POINT, "--remount-ro", "/", "--chdir", MOUNT_POINT]
    return command


def sandbox_environment(home: str, threads: int | None = None) -> dict[str, str]:
    """A minimal environment: no secrets or settings of the grader leak in.

    ``threads`` caps the kernel's math libraries (OpenMP, MKL, OpenBLAS), so that kernels
    graded side by side share the cores instead of fighting over them.
    """
    caps = {} if threads is None else {
        name: str(threads) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                        "OPENBLAS_NUM_THREADS")}
    return caps | {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": f"{home}/tmp",
        "JUPYTER_RUNTIME_DIR": f"{home}/runtime",
        "MPLBACKEND": "Agg",
        "COURSE_PROFILE": "fast",
        "COURSE_DEVICE": "cpu",
        # where the grader leaves the hidden tests' inputs and the kernel returns its data
        GRADING_DIR_VARIABLE: f"{home}/{GRADING_FOLDER}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "LANG": "C.UTF-8",
    }


def _limit_resources(memory_bytes: int) -> None:  # runs in the child, before exec
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def failed_notebook(nb, reason: str):
    """``nb`` with every code cell given an error output: nothing in it can pass."""
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))  # a copy
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("error", ename="SandboxError", evalue=reason,
                                                   traceback=[f"SandboxError: {reason}"])]
    return nb


def execute_isolated(nb, workdir: Path, *, cell_timeout: int = DEFAULT_CELL_TIMEOUT_S,
                     memory_gb: float = DEFAULT_MEMORY_GB, unsafe: bool = False,
                     threads: int | None = None):
    """Execute ``nb`` with ``workdir`` as its (writable) folder; return the executed notebook.

    With bwrap, the notebook runs in the sandbox; without it, only if ``unsafe`` (a plain
    subprocess with the same limits). The notebook never lands in ``workdir``: the runner gets
    it on stdin, so code under test cannot read the hidden tests from disk.
    """
    isolated = sandbox_available()
    if not isolated and not unsafe:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not available, so submissions cannot be isolated; install it "
            "(Debian/Ubuntu: apt-get install bubblewrap) or pass --unsafe to run untrusted code "
            "without a sandbox")
    workdir = Path(workdir).resolve()
    home = MOUNT_POINT if isolated else str(workdir)
    for sub in ("tmp", "runtime"):
        (workdir / sub).mkdir(exist_ok=True)
    runner = [sys.executable, "-m", "course_lib.grading.runner", "--timeout", str(cell_timeout)]
    command = bwrap_command(workdir) + runner if isolated else runner
    code_cells = sum(cell.cell_type == "code" for cell in nb.cells)
    deadline = code_cells * (cell_timeout + 10) + 120
    memory_bytes = int(memory_gb * 2**30)
    try:
        done = subprocess.run(
            command, input=nbformat.writes(nb).encode("utf-8"), capture_output=True,
            timeout=deadline, cwd=workdir, env=sandbox_environment(home, threads),
            preexec_fn=lambda: _limit_resources(memory_bytes),  # noqa: PLW1509 - no threads here
        )
    except subprocess.TimeoutExpired:
        return failed_notebook(nb, f"the whole notebook ran past its {deadline} s deadline")
    try:
        result = json.loads(done.stdout.decode("utf-8"))
        executed = nbformat.from_dict(result["notebook"])
    except (ValueError, KeyError, UnicodeDecodeError):
        reason = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no output"])[-1]
        return failed_notebook(nb, f"the grading sandbox failed (exit {done.returncode}): "
                                   f"{reason[:300]}")
    return executed


def copy_without_notebooks(source: Path, target: Path) -> Path:
    """Copy a submission folder's plain files (no notebooks, no links) into ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    for path in source.rglob("*"):
        relative = path.relative_to(source)
        if path.is_symlink() or path.suffix == ".ipynb" or ".ipynb_checkpoints" in relative.parts:
            continue
        if path.is_dir():
            (target / relative).mkdir(parents=True, exist_ok=True)
        elif path.is_file():
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target / relative)
    return target


class SandboxedExecute(NbGraderPreprocessor):
    """nbgrader's Execute step, moved into the sandbox (``Autograde.autograde_preprocessors``),
    with every exercise's verdict decided outside it (:func:`grade_notebook`)."""

    timeout = Integer(DEFAULT_CELL_TIMEOUT_S, help="seconds each cell may run").tag(config=True)
    memory_gb = Float(DEFAULT_MEMORY_GB, help="address-space limit of the run").tag(config=True)
    unsafe = Bool(False, help="run without a sandbox when bwrap is missing").tag(config=True)
    threads = Integer(None, allow_none=True,
                      help="math-library threads of the kernel (None: the libraries' default)"
                      ).tag(config=True)
    source_root = Unicode(help="the grader's copy of the source notebooks, by lesson"
                          ).tag(config=True)
    key = Unicode(help="the secret key (hex) the hidden tests' inputs are drawn from"
                  ).tag(config=True)
    verdict_root = Unicode(help="where each notebook's verdicts and flags are written"
                           ).tag(config=True)

    def preprocess(self, nb, resources):
        names = tuple(resources["nbgrader"][k] for k in ("student", "assignment", "notebook"))
        student, lesson, notebook = names
        folder = Path(resources["metadata"]["path"])

        def execute(notebook_to_run, workdir):
            return execute_isolated(notebook_to_run, workdir, cell_timeout=self.timeout,
                                    memory_gb=self.memory_gb, unsafe=self.unsafe,
                                    threads=self.threads)

        with tempfile.TemporaryDirectory(prefix="course-sandbox-") as scratch:
            workdir = copy_without_notebooks(folder, Path(scratch) / "submission")
            executed, verdicts = grade_notebook(
                nb, workdir, source=Path(self.source_root) / lesson / f"{notebook}.ipynb",
                key=bytes.fromhex(self.key), names=names, execute=execute)
        write_verdicts(Path(self.verdict_root) / student / lesson / f"{notebook}.json", verdicts)
        return executed, resources
