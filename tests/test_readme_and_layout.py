"""The repository has the course's required top-level layout, and README.md tells the truth."""

import re
import subprocess
from pathlib import Path

from course_lib.course.syllabus import LESSONS, course_map

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_top_level_layout():
    for folder in ("notebooks", "course_lib", "exercises", "solutions", "tests"):
        assert (ROOT / folder).is_dir(), folder
    for file in ("environment.yml", "pyproject.toml", "README.md", "Makefile", ".ci/run"):
        assert (ROOT / file).is_file(), file


def test_readme_syllabus_marks_exactly_the_lessons_that_exist():
    rows = re.findall(r"^\|\s*(\d\d)\s*\|(.*)\|\s*(available|coming)\s*\|\s*$", README, re.M)
    assert [number for number, _, _ in rows] == [lesson.number for lesson in LESSONS]
    for (number, title, status), lesson in zip(rows, LESSONS, strict=True):
        assert lesson.title in title, f"lesson {number}: README says {title.strip()!r}"
        assert status == ("available" if lesson.exists(ROOT) else "coming"), (
            f"README marks lesson {number} {status!r} but {lesson.notebook} "
            f"{'exists' if lesson.exists(ROOT) else 'does not exist'}")


def test_readme_marks_exactly_the_optional_lessons():
    rows = dict(re.findall(r"^\|\s*(\d\d)\s*\|([^|]*)\|", README, re.M))
    for lesson in LESSONS:
        assert ("(optional)" in rows[lesson.number]) == lesson.optional, lesson.number


def test_every_notebook_is_in_the_syllabus():
    expected = {lesson.notebook for lesson in LESSONS}
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        assert str(path.relative_to(ROOT)) in expected, f"{path.name} is not in syllabus.LESSONS"


def test_readme_gives_the_two_commands_and_ci_runs_the_test_one():
    assert "make lab" in README and "make test" in README
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^\s*make test\s*$", ci, re.M)


def test_makefile_targets_exist():
    makefile = (ROOT / "Makefile").read_text()
    for target in ("lab:", "test:", "setup:"):
        assert re.search(rf"^{target}", makefile, re.M), target


def test_readme_states_the_study_time_the_lessons_add_up_to():
    hours = float(re.search(r"about ([\d.]+) hours for the twelve lessons", README).group(1))
    total = course_map().minutes.sum() / 60
    assert abs(hours - total) <= 0.25, f"README says {hours} h, the lessons add up to {total:.2f} h"


def test_readme_gives_the_page_make_lab_opens():
    start = re.search(r"^LAB_START := (\S+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert f"http://127.0.0.1:8888{start}?token=" in README


def test_agents_md_tells_assistants_to_hint_and_not_to_solve_the_graded_exercises():
    guide = (ROOT / "AGENTS.md").read_text()
    assert "(AGENTS.md)" in (ROOT / "README.md").read_text(), "README does not link AGENTS.md"
    for needed in ("exercises/", "solutions/", "# YOUR CODE HERE", "hint", "Do not write"):
        assert needed in guide, f"AGENTS.md does not say {needed!r}"
    marker = "# YOUR CODE HERE"
    exercises = sorted((ROOT / "exercises").glob("*/*.ipynb"))
    assert exercises and all(marker in p.read_text() for p in exercises), \
        "the exercises no longer mark answers as AGENTS.md says"


def test_the_errata_page_is_linked_and_names_commits_that_exist():
    errata = (ROOT / "docs" / "errata.md").read_text()
    assert "(docs/errata.md)" in (ROOT / "README.md").read_text()
    from course_lib.course.site import DOC_PAGES

    assert "errata" in DOC_PAGES, "the site does not publish docs/errata.md"
    commits = set(re.findall(r"\(commits? ([0-9a-f]{7,40})\)", errata))
    entries = re.findall(r"^(?:- (?:lesson|exercise) \d\d|\| \d\d)", errata, re.M)
    assert len(commits) >= 3 and len(entries) >= 40, (commits, len(entries))
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT,
                             capture_output=True, text=True).stdout.strip()
    if shallow == "false":  # a full clone holds every commit the page names
        for commit in commits:
            found = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT,
                                   capture_output=True)
            assert found.returncode == 0, f"docs/errata.md names commit {commit}, not in git"
