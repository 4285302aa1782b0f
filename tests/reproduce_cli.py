"""Running `course reproduce EXPERIMENT ...` in a subprocess, fast profile, CPU (shared by the
tests of every `course reproduce` experiment)."""

import os
import subprocess
import sys


def run_reproduce(experiment: str, *args: str, out_dir) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "course_lib", "reproduce", experiment, *args,
         "--out-dir", str(out_dir)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "COURSE_PROFILE": "fast", "COURSE_DEVICE": "cpu"})
