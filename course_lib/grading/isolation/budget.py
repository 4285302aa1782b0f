"""One submission's budget: memory, processes, disk and time, for all of its processes together.

A submission runs as several processes (the runner, the kernel, whatever the student starts), so
per-process limits alone let it take a multiple of its share. Where the machine lets the grader
make control groups, the whole sandbox goes into one group with a memory and a process limit:

- cgroup v2 (``/sys/fs/cgroup`` unified, the grader's own group writable, ``memory`` and
  ``pids`` controllers delegated): ``memory.max``, ``memory.swap.max`` = 0, ``pids.max``;
- cgroup v1 (separate ``memory`` and ``pids`` hierarchies, writable): ``memory.limit_in_bytes``
  (and ``memory.memsw.limit_in_bytes`` where swap is accounted), ``pids.max``.

Elsewhere (a laptop without delegated cgroups, macOS) the limits are per process: an
address-space rlimit for every process and ``RLIMIT_NPROC`` (which does not bind root).
Disk is bounded in both cases by the sandbox itself: the submission's only writable places are
size-capped in-memory file systems (:mod:`course_lib.grading.isolation.sandbox`), and every file by
``RLIMIT_FSIZE``. Time is the cell timeout and one deadline for the whole notebook, set from the
source notebook (:func:`notebook_deadline`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from course_lib.grading.config import read_source_notebook

CGROUP_ROOT = Path("/sys/fs/cgroup")
MAX_PROCESSES = 64  # kernel, runner, a few workers of a math library; a fork bomb stops here
DISK_BYTES = 512 * 2**20  # the sandbox's writable folder, its /tmp and /dev/shm together
MAX_FILE_BYTES = 256 * 2**20


@dataclass(frozen=True)
class Budget:
    """What one submission may use, all of its processes together."""

    memory_bytes: int
    processes: int = MAX_PROCESSES
    disk_bytes: int = DISK_BYTES


def notebook_deadline(source_nb, cell_timeout: int) -> int:
    """Seconds the whole notebook may run: every code cell of the *source* notebook its timeout,
    plus a margin for the kernel's start. Cells a student adds share this budget."""
    code_cells = sum(cell.cell_type == "code" for cell in source_nb.cells)
    return code_cells * (cell_timeout + 10) + 120


def source_deadline(source: Path, cell_timeout: int) -> int:
    return notebook_deadline(read_source_notebook(source), cell_timeout)


FEEDBACK_SECONDS_PER_CELL = 2
FEEDBACK_MARGIN_S = 30


def feedback_deadline(source: Path) -> int:
    """Seconds the feedback page of one notebook may take to make, counted like the notebook's
    deadline: from the cells of the *source* notebook, whatever the submission adds (a page
    takes a second or two; its markdown and outputs are bounded, :mod:`.inert`)."""
    cells = len(read_source_notebook(source).cells)
    return cells * FEEDBACK_SECONDS_PER_CELL + FEEDBACK_MARGIN_S


# Control groups


def _own_group(controller: str | None) -> str | None:
    """This process's group path for ``controller`` (None: the v2 unified group)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        if controller is None and names == "":
            return path
        if controller is not None and controller in names.split(","):
            return path
    return None


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


class Group:
    """A control group (v1: one folder per controller; v2: one folder) made for one sandbox."""

    def __init__(self, folders: dict[str, Path], version: int):
        self.folders, self.version = folders, version

    @property
    def description(self) -> str:
        return f"cgroup v{self.version}"

    def limit(self, budget: Budget) -> None:
        if self.version == 2:
            folder = self.folders["memory"]
            _write(folder / "memory.max", budget.memory_bytes)
            _write(folder / "memory.swap.max", 0, optional=True)
            _write(folder / "pids.max", budget.processes)
        else:
            memory = self.folders["memory"]
            _write(memory / "memory.limit_in_bytes", budget.memory_bytes)
            _write(memory / "memory.memsw.limit_in_bytes", budget.memory_bytes, optional=True)
            _write(self.folders["pids"] / "pids.max", budget.processes)

    def join(self) -> None:
        """Move the calling process into the group (run in the child before exec)."""
        pid = str(os.getpid())
        for folder in dict.fromkeys(self.folders.values()):
            (folder / "cgroup.procs").write_text(pid)

    def out_of_memory_kills(self) -> int:
        """How many processes the kernel killed for exceeding the memory limit."""
        memory = self.folders["memory"]
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        with contextlib.suppress(OSError):
            for line in (memory / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def remove(self) -> None:
        """Kill whatever is left in the group, then remove it."""
        for folder in dict.fromkeys(self.folders.values()):
            for _ in range(50):
                with contextlib.suppress(OSError):
                    pids = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
                    for pid in pids:
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    folder.rmdir()
                    break
                time.sleep(0.02)


def _write(path: Path, value: int, optional: bool = False) -> None:
    try:
        path.write_text(str(value))
    except OSError:
        if not optional:
            raise


def make_group(prefix: str = "course-grade") -> Group | None:
    """A fresh control group below this process's own, or None where none can be made."""
    name = f"{prefix}-{secrets.token_hex(6)}"
    unified = _own_group(None)
    if unified is not None and (CGROUP_ROOT / "cgroup.controllers").is_file():
        parent = CGROUP_ROOT / unified.lstrip("/")
        controllers = (parent / "cgroup.subtree_control")
        with contextlib.suppress(OSError):
            if {"memory", "pids"} <= set(controllers.read_text().split()) and \
                    _writable_dir(parent):
                folder = parent / name
                folder.mkdir()
                return Group({"memory": folder, "pids": folder}, 2)
    folders = {}
    for controller in ("memory", "pids"):
        own = _own_group(controller)
        parent = CGROUP_ROOT / controller / (own or "/").lstrip("/")
        if own is None or not _writable_dir(parent):
            break
        with contextlib.suppress(OSError):
            (parent / name).mkdir()
            folders[controller] = parent / name
    if len(folders) == 2:
        return Group(folders, 1)
    for folder in folders.values():
        with contextlib.suppress(OSError):
            folder.rmdir()
    return None


@contextlib.contextmanager
def confinement(budget: Budget):
    """A group limited to ``budget`` for one sandbox run, removed afterwards; None where the
    machine has no usable cgroups (the per-process rlimits then stand alone)."""
    group = make_group()
    if group is not None:
        try:
            group.limit(budget)
        except OSError:
            group.remove()
            group = None
    try:
        yield group
    finally:
        if group is not None:
            group.remove()


def limit_process(budget: Budget, group: Group | None) -> None:
    """Run in the sandbox's first process before exec: join the group, set the rlimits."""
    import resource

    if group is not None:
        group.join()
    memory = budget.memory_bytes  # every process, on top of the group's limit for all together
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if group is None and os.geteuid() != 0:  # root is exempt from RLIMIT_NPROC
        running = len([p for p in os.listdir("/proc") if p.isdigit()]) \
            if os.path.isdir("/proc") else 0
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NPROC, (running + budget.processes,) * 2)
