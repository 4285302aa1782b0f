"""Each grading run's nonce, recorded beside the gradebook: fresh inputs on every run, and any
run repeated exactly.

A run draws every hidden test's inputs from the secret key *and* a nonce of its own, so the
inputs one run used say nothing about the next: a student who learns them (the hidden tests are
public, and a submission can print whatever it is given) gains nothing on a regrade. The nonce
is written to ``<gradebook>.runs.jsonl`` (readable by its owner only, never inside the
sandbox), one line per run::

    {"run": "20261207T041502-3fa2", "nonce": "…", "started": "2026-12-07T04:15:02+00:00"}

``course grade … --replay RUN`` draws that run's inputs again, so an instructor can repeat a run
exactly (the same gradebook and feedback, byte for byte).
"""

from __future__ import annotations

import datetime
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from course_lib.grading.config import GradingError


@dataclass(frozen=True)
class Run:
    """One grading run: its id and its nonce (hex)."""

    run_id: str
    nonce: str


def runs_file_for(out: Path) -> Path:
    """Where the runs of the gradebook ``out`` are recorded: beside it."""
    return out.with_name(out.stem + ".runs.jsonl")


def new_run(path: Path) -> Run:
    """A fresh run, recorded in ``path`` before anything is graded."""
    now = datetime.datetime.now(datetime.timezone.utc)
    run = Run(f"{now:%Y%m%dT%H%M%S}-{secrets.token_hex(2)}", secrets.token_hex(16))
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(handle, "a", encoding="utf-8") as file:
        file.write(json.dumps({"run": run.run_id, "nonce": run.nonce,
                               "started": now.isoformat(timespec="seconds")}) + "\n")
    return run


def recorded_runs(path: Path) -> list[Run]:
    """Every run recorded in ``path``, oldest first (none if it does not exist)."""
    if not path.is_file():
        return []
    runs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            runs.append(Run(str(record["run"]), str(bytes.fromhex(record["nonce"]).hex())))
        except (ValueError, KeyError, TypeError) as error:
            raise GradingError(f"{path}, line {number}, is not a run record ({error})") from None
    return runs


def find_run(path: Path, run_id: str) -> Run:
    """The run ``run_id`` recorded in ``path``; a clear error naming the runs there if absent."""
    runs = recorded_runs(path)
    for run in runs:
        if run.run_id == run_id:
            return run
    known = ", ".join(r.run_id for r in runs[-5:]) or "none"
    raise GradingError(f"no run {run_id!r} is recorded in {path} (the latest: {known})")


def latest_run(path: Path) -> Run:
    """The run recorded last in ``path``."""
    runs = recorded_runs(path)
    if not runs:
        raise GradingError(f"no run is recorded in {path}")
    return runs[-1]
