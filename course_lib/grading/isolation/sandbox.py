"""Run a submission's notebook isolated, with bubblewrap (``bwrap``).

The sandbox sees, read-only, only what Python needs: the system's libraries, the Python
installation, the grading environment (``sys.prefix``), ``course_lib`` and the grader's staged
copy of the submission's folder (at ``/course-staged``). The one writable place is an in-memory
file system of capped size at ``/submission`` (also HOME and TMPDIR), into which the runner
copies the staged folder; ``/dev/shm`` is capped the same way, so nothing a submission writes
reaches the grader's disk. Everything else is absent: ``solutions/`` with the hidden tests, the
grading workspace and its database, other students' work, the gradebook. ``--unshare-all``
removes the network (loopback stays, for the kernel) and gives the sandbox its own pid
namespace, whose first process is the runner (``--as-pid-1``); ``--cap-drop ALL`` leaves the
sandbox no capability, so the kernel cannot read the runner's ``/proc`` entries.

Memory and processes are limited for the whole sandbox
(:mod:`course_lib.grading.isolation.budget`), the runner's answer is read with a hard size limit,
and the whole run has one deadline.

Without bwrap, untrusted code runs only when the caller passes ``unsafe=True``.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Integer, Unicode

import course_lib
from course_lib.grading.config import DEFAULT_CELL_TIMEOUT_S, DEFAULT_MEMORY_GB
from course_lib.grading.hidden import GRADING_DIR_VARIABLE
from course_lib.grading.isolation import budget as budgets
from course_lib.grading.runner import GRADING_FOLDER
from course_lib.grading.verdicts.trusted import grade_notebook, write_verdicts

MOUNT_POINT = "/submission"
STAGED_MOUNT = "/course-staged"
SHM_BYTES = 64 * 2**20
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
                "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts",
                "/etc/ssl", "/etc/alternatives", "/etc/fonts", "/etc/matplotlibrc")
MAX_ANSWER_BYTES = 96 * 2**20  # the runner's answer: the notebook's outputs and the results
MAX_LOG_BYTES = 64 * 2**10


class SandboxUnavailable(RuntimeError):
    """No working sandbox tool, and untrusted code was not allowed to run without one."""


@functools.lru_cache(maxsize=1)
def sandbox_available() -> bool:
    """True when ``bwrap`` exists and can create namespaces here."""
    if shutil.which("bwrap") is None:
        return False
    probe = subprocess.run(["bwrap", "--unshare-all", "--cap-drop", "ALL", "--as-pid-1",
                            "--ro-bind", "/", "/", "true"], capture_output=True, timeout=30)
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


def bwrap_command(staged: Path, disk_bytes: int) -> list[str]:
    command = ["bwrap", "--unshare-all", "--cap-drop", "ALL", "--as-pid-1", "--die-with-parent",
               "--new-session", "--proc", "/proc", "--dev", "/dev",
               "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
    for path in readable_paths():
        command += ["--ro-bind", path, path]
    command += ["--ro-bind", str(staged), STAGED_MOUNT,
                "--size", str(disk_bytes), "--tmpfs", MOUNT_POINT,
                "--remount-ro", "/", "--chdir", MOUNT_POINT]
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


def failed_notebook(nb, reason: str):
    """``nb`` with every code cell given an error output: nothing in it can pass."""
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))  # a copy
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("error", ename="SandboxError", evalue=reason,
                                                   traceback=[f"SandboxError: {reason}"])]
    return nb


@dataclass
class Returned:
    """What came back from one sandbox run: the executed notebook, each exercise's sealed
    observation (bytes, unparsed), what the runner saw arrive out of turn, and whether the
    memory budget killed a process."""

    notebook: nbformat.NotebookNode
    results: dict[str, bytes] = field(default_factory=dict)
    out_of_memory: bool = False
    tampering: list[str] = field(default_factory=list)


@dataclass
class Finished:
    returncode: int | None
    stdout: bytes
    stderr: bytes
    overflow: bool = False
    timed_out: bool = False


def run_bounded(command: list[str], stdin: bytes, *, timeout: float, max_stdout: int,
                preexec_fn=None, **popen) -> Finished:
    """Run ``command``; keep at most ``max_stdout`` bytes of stdout (more ends the run) and
    ``MAX_LOG_BYTES`` of stderr, so the caller's memory is bounded whatever the child writes."""
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, preexec_fn=preexec_fn,  # noqa: PLW1509
                               start_new_session=True, **popen)
    kept = {"out": bytearray(), "err": bytearray()}
    overflow = threading.Event()

    def drain(stream, name, limit, stop_when_full):
        while chunk := stream.read(1 << 16):
            room = limit - len(kept[name])
            kept[name] += chunk[:max(room, 0)]
            if len(chunk) > room and stop_when_full:
                overflow.set()
                _kill(process)
        stream.close()

    def feed():
        try:
            process.stdin.write(stdin)
        except (BrokenPipeError, OSError):
            pass
        finally:
            try:
                process.stdin.close()
            except OSError:
                pass

    threads = [threading.Thread(target=drain, args=(process.stdout, "out", max_stdout, True)),
               threading.Thread(target=drain, args=(process.stderr, "err", MAX_LOG_BYTES, False)),
               threading.Thread(target=feed)]
    for thread in threads:
        thread.daemon = True
        thread.start()
    timed_out = False
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill(process)
        process.wait()
    for thread in threads:
        thread.join(timeout=10)
    return Finished(process.returncode, bytes(kept["out"]), bytes(kept["err"]),
                    overflow.is_set(), timed_out)


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def execute_isolated(nb, staged: Path, *, tests: dict[str, tuple[str, bytes]] | None = None,
                     cell_timeout: int = DEFAULT_CELL_TIMEOUT_S,
                     memory_gb: float = DEFAULT_MEMORY_GB, unsafe: bool = False,
                     threads: int | None = None, deadline: float | None = None) -> Returned:
    """Execute ``nb`` on a copy of the ``staged`` folder; return what came back.

    ``tests`` maps each test cell's id to its (grade_id, inputs file bytes): the runner hands
    the inputs to that cell alone, as it starts, and seals its observation as it ends.

    With bwrap, the notebook runs in the sandbox; without it, only if ``unsafe`` (a plain
    subprocess with the same limits, in a scratch copy of ``staged``). The notebook never lands
    in the sandbox's folder: the runner gets it on stdin, so code under test cannot read the
    hidden tests from disk. ``deadline`` (seconds for the whole run) defaults to the cell
    timeout for every code cell of ``nb``.
    """
    isolated = sandbox_available()
    if not isolated and not unsafe:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not available, so submissions cannot be isolated; install it "
            "(Debian/Ubuntu: apt-get install bubblewrap) or pass --unsafe to run untrusted code "
            "without a sandbox")
    staged = Path(staged).resolve()
    deadline = deadline if deadline is not None else budgets.notebook_deadline(nb, cell_timeout)
    budget = budgets.Budget(memory_bytes=int(memory_gb * 2**30))
    with tempfile.TemporaryDirectory(prefix="course-run-") as scratch:
        if isolated:
            home, source = MOUNT_POINT, STAGED_MOUNT
            prefix = bwrap_command(staged, budget.disk_bytes)
        else:
            home, source, prefix = str(Path(scratch) / "submission"), str(staged), []
        runner = [sys.executable, "-I", "-m", "course_lib.grading.runner",
                  "--timeout", str(cell_timeout), "--source", source, "--workdir", home]
        request = {"notebook": nbformat.writes(nb), "tests": {
            cell_id: {"grade_id": grade_id, "inputs": base64.b64encode(data).decode("ascii")}
            for cell_id, (grade_id, data) in (tests or {}).items()}}
        with budgets.confinement(budget) as group:
            finished = run_bounded(
                prefix + runner, json.dumps(request).encode("utf-8"), timeout=deadline,
                max_stdout=MAX_ANSWER_BYTES, cwd=scratch,
                env=sandbox_environment(home, threads),
                preexec_fn=lambda: budgets.limit_process(budget, group))
            out_of_memory = group is not None and group.out_of_memory_kills() > 0
    return read_answer(nb, finished, deadline, out_of_memory)


def read_answer(nb, finished: Finished, deadline: float, out_of_memory: bool) -> Returned:
    """The runner's answer, checked: a notebook and base64 results, or a failed notebook."""
    if finished.timed_out:
        return Returned(failed_notebook(nb, f"the whole notebook ran past its {deadline:g} s "
                                            f"deadline"), out_of_memory=out_of_memory)
    if finished.overflow:
        return Returned(failed_notebook(nb, f"the sandbox answered with more than "
                                            f"{MAX_ANSWER_BYTES >> 20} MiB"))
    try:
        answer = json.loads(finished.stdout.decode("utf-8"))
        if not isinstance(answer.get("notebook"), dict):
            raise ValueError("the answer holds no notebook")
        executed = nbformat.from_dict(answer["notebook"])
        results = {str(k): base64.b64decode(v, validate=True)
                   for k, v in dict(answer.get("results") or {}).items()}
        tampering = [str(t)[:300] for t in list(answer.get("tampering") or [])[:20]]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, AttributeError):
        reason = (finished.stderr.decode("utf-8", "replace").strip().splitlines()
                  or ["no output"])[-1]
        if out_of_memory:
            reason = "out of memory"
        return Returned(failed_notebook(nb, f"the grading sandbox failed (exit "
                                            f"{finished.returncode}): {reason[:300]}"),
                        out_of_memory=out_of_memory)
    return Returned(executed, results, out_of_memory, tampering)


class SandboxedExecute(NbGraderPreprocessor):
    """nbgrader's Execute step, moved into the sandbox (``Autograde.autograde_preprocessors``),
    with every exercise's verdict decided outside it (:func:`grade_notebook`)."""

    timeout = Integer(DEFAULT_CELL_TIMEOUT_S, help="seconds each cell may run").tag(config=True)
    memory_gb = Float(DEFAULT_MEMORY_GB, help="memory limit of the run").tag(config=True)
    unsafe = Bool(False, help="run without a sandbox when bwrap is missing").tag(config=True)
    threads = Integer(None, allow_none=True,
                      help="math-library threads of the kernel (None: the libraries' default)"
                      ).tag(config=True)
    source_root = Unicode(help="the grader's copy of the source notebooks, by lesson"
                          ).tag(config=True)
    key = Unicode(help="the secret key (hex) the hidden tests' inputs are drawn from"
                  ).tag(config=True)
    nonce = Unicode(help="this run's nonce (hex), mixed into the key: fresh inputs every run"
                    ).tag(config=True)
    verdict_root = Unicode(help="where each notebook's verdicts and flags are written"
                           ).tag(config=True)
    files_root = Unicode(help="the staged files of each submission, by student and lesson"
                         ).tag(config=True)

    def preprocess(self, nb, resources):
        names = tuple(resources["nbgrader"][k] for k in ("student", "assignment", "notebook"))
        student, lesson, notebook = names
        source = Path(self.source_root) / lesson / f"{notebook}.ipynb"
        deadline = budgets.source_deadline(source, self.timeout)

        def execute(notebook_to_run, staged, tests):
            return execute_isolated(notebook_to_run, staged, tests=tests,
                                    cell_timeout=self.timeout,
                                    memory_gb=self.memory_gb, unsafe=self.unsafe,
                                    threads=self.threads, deadline=deadline)

        staged = Path(self.files_root) / student / lesson  # stage_files made it
        staged.mkdir(parents=True, exist_ok=True)
        executed, verdicts = grade_notebook(nb, staged, source=source, key=bytes.fromhex(self.key),
                                            nonce=self.nonce, names=names, execute=execute)
        write_verdicts(Path(self.verdict_root) / student / lesson / f"{notebook}.json", verdicts)
        return executed, resources
