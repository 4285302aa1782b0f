"""Start JupyterLab the way a learner does, with `make lab`, and find the URL it prints.

Used by the API test of `make lab` (tests/test_make_lab.py) and by the browser tests of the live
lab (tests/test_browser.py), so both exercise the same command.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START_PAGE = "lab/tree/notebooks/00_start_here.ipynb"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Lab:
    """A running `make lab`: its process group, the URL it printed and the token in it."""

    process: subprocess.Popen
    url: str  # as printed, token included
    base: str  # http://127.0.0.1:PORT/
    token: str
    output: list[str]

    def get(self, path: str):
        """GET ``path`` from the server's REST API with the token; the decoded JSON."""
        request = urllib.request.Request(self.base + path.lstrip("/"),
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)


def start_make_lab(root: Path | None = None, options: str = "", env: dict | None = None,
                   timeout: float = 180) -> Lab:
    """Run `make lab` on a free port (serving ``root``, the repository when None) and return
    once the printed URL answers. Fails with the command's last lines when it does not start."""
    port = free_port()
    command = ["make", "lab", f"PORT={port}", f"LAB_OPTIONS={options}"]
    if root is not None:
        command.append(f"LAB_ROOT={root}")
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True,
                               env=env)
    seen: list[str] = []
    pattern = re.compile(rf"(http://127\.0\.0\.1:{port}/\S*\?token=(\w+))")
    deadline = time.monotonic() + timeout
    found = None
    while found is None and time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        seen.append(line)
        found = pattern.search(line)
    if found is None:
        os.killpg(process.pid, signal.SIGKILL)
        raise AssertionError("`make lab` printed no URL:\n" + "".join(seen[-30:]))
    # keep reading the server's log so a full pipe never blocks it
    threading.Thread(target=lambda: seen.extend(process.stdout), daemon=True).start()
    lab = Lab(process, found.group(1), f"http://127.0.0.1:{port}/", found.group(2), seen)
    while True:  # the URL can be printed a moment before the port answers
        try:
            lab.get("api/status")
            return lab
        except OSError as error:
            if process.poll() is not None or time.monotonic() > deadline:
                lab.stop()
                raise AssertionError("`make lab` did not answer:\n"
                                     + "".join(seen[-30:])) from error
            time.sleep(0.5)
