"""Every lesson runs from top to bottom with no error in the fast profile, in a kernel of the
course's environment, executed as the site executes it (``course_lib/course/execute.py``: each
``interact`` saving its outputs as well).

The executed copies go to the session's folder (``COURSE_EXECUTED_CACHE``, set in
``tests/conftest.py``), where the site and decks that the browser tests build find them: each
lesson runs once per session. One class per lesson, so that pytest-xdist (``--dist loadscope``)
spreads the lessons over its workers; a lesson another worker is executing is waited for and
reused (``execute_cached`` takes turns on each notebook).
"""

import json

from course_lib.course.execute import EXECUTED_CACHE_VARIABLE, execute_cached, executed_cache
from course_lib.course.site import site_folder
from course_lib.course.syllabus import COURSE_ROOT, LESSONS
from course_lib.widgets.controls import LAB_ONLY_NOTE

PROFILE = "fast"


def errors_in(executed: dict) -> list[str]:
    """The error outputs of an executed notebook, as ``cell N: Name: message``."""
    return [f"cell {index}: {output['ename']}: {output['evalue']}"
            for index, cell in enumerate(executed["cells"])
            for output in cell.get("outputs", []) if output.get("output_type") == "error"]


def _lesson_class(lesson):
    def test_runs_with_no_error(self):
        cache = executed_cache(site_folder(PROFILE) / "executed")
        done = execute_cached(COURSE_ROOT / lesson.notebook, cache, PROFILE)  # raises on error
        text = done.executed.read_text()
        executed = json.loads(text)
        assert not errors_in(executed)
        code = [cell for cell in executed["cells"] if cell["cell_type"] == "code"]
        assert code and all(cell.get("execution_count") for cell in code), \
            f"lesson {lesson.number}: a code cell did not run"
        assert LAB_ONLY_NOTE not in text, \
            f"lesson {lesson.number}: a control moves only in the lab, not on the site"

    name = f"TestLesson{lesson.number}"
    return type(name, (), {"test_runs_with_no_error": test_runs_with_no_error,
                           "__doc__": f"Lesson {lesson.number}, {lesson.notebook}."})


# Last lesson first: the site build executes them from the first, so that a worker running
# these classes and a worker building the site meet in the middle instead of queueing.
for _lesson in reversed(LESSONS):
    globals()[f"TestLesson{_lesson.number}"] = _lesson_class(_lesson)


def test_the_session_shares_one_folder_of_executed_lessons(monkeypatch, tmp_path):
    default = site_folder(PROFILE) / "executed"
    assert executed_cache(default) != default  # conftest gave the session its own folder
    monkeypatch.setenv(EXECUTED_CACHE_VARIABLE, str(tmp_path))
    assert executed_cache(default) == tmp_path
    monkeypatch.delenv(EXECUTED_CACHE_VARIABLE)
    assert executed_cache(default) == default
