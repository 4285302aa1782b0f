"""`make lab` serves the whole course (lessons, exercises, solutions, docs) with the course
kernel, and the URL it prints opens lesson 00."""

import sys

import pytest

from tests.lab_support import ROOT, START_PAGE, start_make_lab


@pytest.mark.skipif(sys.platform == "win32", reason="make and process groups are POSIX")
def test_make_lab_serves_the_whole_course_and_opens_lesson_00():
    if not (ROOT / ".venv" / "bin" / "jupyter").exists():
        pytest.skip("no .venv made by `make lab`/`make test` in this checkout")
    lab = start_make_lab()
    try:
        assert lab.url.startswith(lab.base + START_PAGE + "?token="), lab.url
        top = {item["name"] for item in lab.get("api/contents")["content"]}
        assert {"notebooks", "exercises", "solutions", "docs", "README.md"} <= top, top
        lesson = lab.get("api/contents/notebooks/00_start_here.ipynb?content=0")
        assert lesson["type"] == "notebook"
        exercises = {item["name"] for item in lab.get("api/contents/exercises")["content"]}
        assert "04_bahdanau" in exercises
        assert lab.get("api/contents/docs/notation.md?content=0")["type"] == "file"
        assert "attention-course" in lab.get("api/kernelspecs")["kernelspecs"]
    finally:
        lab.stop()
