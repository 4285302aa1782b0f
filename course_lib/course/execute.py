"""Run a lesson notebook headless and keep the executed copy, so a site or a deck reuses it.

An executed copy is kept under a key made of the notebook's code cells and the profile. A
rebuild re-executes only the notebooks whose code changed (prose and tags are taken from the
notebook as it is now, ``with_outputs``); ``rerun=True`` executes every one again
(after a change to ``course_lib`` that alters outputs, for example).

The kernel talks to this process over Unix sockets where the system has them rather than over
TCP ports, so two kernels started one after the other can never be handed the same port.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import nbformat

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

from course_lib.widgets import controls

KERNEL_NAME = "attention-course"
# Longest a single cell may run: the full profile trains models inside some lessons.
CELL_TIMEOUT_S = {"fast": 600, "full": 3600}


@dataclass(frozen=True)
class Executed:
    source: Path
    executed: Path
    seconds: float | None  # None when the executed copy came from the cache


def cells_key(notebook: Path, profile: str) -> str:
    """A hash of what execution depends on: the code cells, the kernel and the profile. Prose,
    tags and outputs do not count; ``with_outputs`` puts the current prose around the outputs."""
    nb = json.loads(notebook.read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    payload = json.dumps({"cells": cells, "profile": profile,
                          "kernel": nb["metadata"].get("kernelspec", {}).get("name")})
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def _kernel_manager(kernel_name: str):
    """A manager for the lesson's kernel; the course's own kernel runs this Python (the
    checkout's environment), whatever another checkout registered under its name."""
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import KernelManager

    class ThisEnvironment(KernelSpecManager):
        def get_kernel_spec(self, name: str) -> KernelSpec:
            if name == KERNEL_NAME:
                return KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f",
                                        "{connection_file}"], display_name=KERNEL_NAME,
                                  language="python")
            return super().get_kernel_spec(name)

    manager = KernelManager(kernel_name=kernel_name, kernel_spec_manager=ThisEnvironment())
    if os.name != "nt":
        manager.transport = "ipc"
        # the kernel's sockets are files named <ip>-<n>; the manager removes them at shutdown
        manager.ip = str(Path(tempfile.gettempdir()) / f"course-kernel-{uuid.uuid4().hex[:12]}")
    return manager


def kernel_environment(profile: str, extra: dict | None = None) -> dict:
    """The kernel's environment: this process's, with the profile set and without a forced
    matplotlib backend (a headless ``MPLBACKEND=Agg`` would leave every figure out)."""
    env = {key: value for key, value in os.environ.items() if key != "MPLBACKEND"}
    return {**env, "COURSE_PROFILE": profile, **(extra or {})}


def execute(notebook: Path, target: Path, profile: str, *, env: dict | None = None) -> float:
    """Execute ``notebook`` in its own folder with ``COURSE_PROFILE=profile``; write it to
    ``target`` with outputs and the widget state; return the seconds it took. A cell that
    raises fails the run with ``nbclient.exceptions.CellExecutionError``."""
    from nbclient import NotebookClient

    from course_lib.arguments import check_choice  # not at the top: it imports torch

    check_choice("profile", profile, CELL_TIMEOUT_S)
    nb = nbformat.read(notebook, as_version=4)
    manager = _kernel_manager(nb.metadata.get("kernelspec", {}).get("name", KERNEL_NAME))
    start = time.perf_counter()
    try:
        client = NotebookClient(nb, km=manager, timeout=CELL_TIMEOUT_S[profile],
                                store_widget_state=True,
                                resources={"metadata": {"path": str(notebook.parent)}})
        client.execute(env=kernel_environment(profile, env))
    finally:
        if manager.has_kernel:  # a client given a manager leaves the kernel running
            manager.shutdown_kernel(now=True)
    seconds = time.perf_counter() - start
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    return seconds


# The site and the slides execute lessons with each ``interact`` saving its outputs for every
# value of its controls, at most this many per call (course_lib/widgets/controls.py). The fast
# profile (tests and quick checks) saves fewer: the fewest at which every lesson's controls still
# respond, two positions per slider beside lesson 10's fifteen combinations of choices.
SITE_CONTROL_BUDGET = {"fast": 30, "full": 48}
# The most positions the site saves of one slider, where a profile caps them: two in the fast
# profile (the default and one other, enough for a control to respond), as many as the budget
# allows in the full one.
SITE_SLIDER_POSITIONS = {"fast": 2}


def site_env(profile: str) -> dict[str, str]:
    """The environment in which the site executes a lesson in ``profile``."""
    env = {controls.SITE_ENV: str(SITE_CONTROL_BUDGET[profile])}
    if profile in SITE_SLIDER_POSITIONS:
        env[controls.SLIDER_ENV] = str(SITE_SLIDER_POSITIONS[profile])
    return env


def execute_cached(notebook: Path, cache: Path, profile: str, *, rerun: bool = False) -> Executed:
    """The executed copy of ``notebook`` from ``cache`` (run for the site, :func:`site_env`),
    executing it first when its cells or the profile changed since the copy was made (or when
    ``rerun``). Processes that share ``cache`` take turns on a notebook, so a lesson one of
    them is executing is reused by the others, not executed twice."""
    key = cells_key(notebook, profile + json.dumps(site_env(profile)))
    target = cache / profile / f"{notebook.stem}-{key}.ipynb"
    with one_at_a_time(cache / profile / f"{notebook.stem}.lock"):
        if target.is_file() and not rerun:
            return Executed(notebook, target, None)
        for stale in (cache / profile).glob(f"{notebook.stem}-*.ipynb"):
            stale.unlink()
        seconds = execute(notebook, target, profile, env=site_env(profile))
    return Executed(notebook, target, seconds)


@contextlib.contextmanager
def one_at_a_time(lock: Path):
    """Hold an exclusive lock on the file ``lock`` (made if missing) while the block runs: a
    second process waits for the first. Where the system has no ``fcntl``, nothing is held."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
        yield


# Where the site and the decks keep executed lessons: build/site/<profile>/executed, or the
# folder this variable names (the test suite shares one folder between its workers for a
# session, so the lessons its tests run are the ones its site and decks are built from).
EXECUTED_CACHE_VARIABLE = "COURSE_EXECUTED_CACHE"


def executed_cache(default: Path) -> Path:
    """The folder of executed lessons: ``$COURSE_EXECUTED_CACHE`` where set, else ``default``."""
    named = os.environ.get(EXECUTED_CACHE_VARIABLE)
    return Path(named) if named else default


def with_outputs(current: dict, executed: dict) -> dict:
    """``current`` (a notebook as JSON) with the outputs, execution counts and widget state of
    ``executed``, its executed copy: code cells are matched by id, in order."""
    done = {cell.get("id"): cell for cell in executed["cells"] if cell["cell_type"] == "code"}
    merged = json.loads(json.dumps(current))
    for cell in merged["cells"]:
        if cell["cell_type"] == "code":
            source = done.get(cell.get("id"), {})
            cell["outputs"] = source.get("outputs", [])
            cell["execution_count"] = source.get("execution_count")
    if "widgets" in executed.get("metadata", {}):
        merged["metadata"]["widgets"] = executed["metadata"]["widgets"]
    return merged
