"""`make lab` really starts JupyterLab on notebooks/ with the course kernel, and prints the URL."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.skipif(sys.platform == "win32", reason="make and process groups are POSIX")
def test_make_lab_serves_the_notebooks_with_the_course_kernel():
    if not (ROOT / ".venv" / "bin" / "jupyter").exists():
        pytest.skip("no .venv made by `make lab`/`make test` in this checkout")
    port = free_port()
    process = subprocess.Popen(
        ["make", "lab", f"PORT={port}"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        url, seen, deadline = None, [], time.monotonic() + 120
        while url is None and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line and process.poll() is not None:
                break
            seen.append(line)
            found = re.search(rf"(http://127\.0\.0\.1:{port}/lab\?token=\w+)", line)
            url = found.group(1) if found else None
        assert url, "no URL printed:\n" + "".join(seen[-30:])
        token = url.split("token=")[1]

        def get(path):
            request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                             headers={"Authorization": f"token {token}"})
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.load(response)

        for _ in range(60):  # the URL can be printed a moment before the port answers
            try:
                get("/api/status")
                break
            except OSError:
                time.sleep(0.5)
        contents = {item["name"] for item in get("/api/contents")["content"]}
        assert "00_start_here.ipynb" in contents  # served from notebooks/
        assert "attention-course" in get("/api/kernelspecs")["kernelspecs"]
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
