"""Running `course reproduce EXPERIMENT ...` in a subprocess, fast profile, CPU (shared by the
tests of every `course reproduce` experiment), and `course` commands refusing bad arguments in
this process."""

import os
import subprocess
import sys
from pathlib import Path

# What a run measures rather than decides (durations, timings and what is derived from them):
# they differ between two runs of the same seed; everything else must not.
TIMES = {"wall_s", "train_s", "time_s", "created", "step_time_by_length",
         "transformer_wall_s_to_bahdanau_bleu", "bahdanau_wall_s"}


def without_times(value):
    """``value`` (a result, a history) with every measured duration left out, at any depth."""
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def run_reproduce(experiment: str, *args: str, out_dir) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "course_lib", "reproduce", experiment, *args,
         "--out-dir", str(out_dir)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "COURSE_PROFILE": "fast", "COURSE_DEVICE": "cpu"})


def refusal(argv: list[str], capsys) -> str:
    """What `course ARGV` writes to stderr when it refuses its arguments, run in this process
    (the command refuses before it imports or trains anything heavy, so no subprocess is
    needed). Fails unless it exits with status 2."""
    from course_lib.course.cli import main

    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    assert code == 2, f"`course {' '.join(argv)}` exited with {code}"
    return capsys.readouterr().err


def refused(experiment: str, *args: str, out_dir, capsys, monkeypatch) -> str:
    """:func:`refusal` of `course reproduce EXPERIMENT ARGS` in the fast profile, which must
    write nothing."""
    monkeypatch.setenv("COURSE_PROFILE", "fast")
    said = refusal(["reproduce", experiment, *args, "--out-dir", str(out_dir)], capsys)
    assert not any(Path(out_dir).iterdir())
    return said


def full_profile_result(reproduce, seed: int, out_dir) -> dict:
    """``reproduce(seed=...)``'s result in the full profile (``make test-full``), written to
    ``out_dir``; the test is skipped in any other profile."""
    import pytest

    if os.environ.get("COURSE_PROFILE") != "full":
        pytest.skip("the targets are for the full profile (make test-full)")
    return reproduce(seed=seed, progress=False, out_dir=out_dir).result
