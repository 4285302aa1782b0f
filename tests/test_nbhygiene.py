"""Committed notebooks follow course_lib.nbhygiene's policy (fix with
`course clean-notebooks`)."""

from pathlib import Path

import nbformat
import pytest

from course_lib.nbhygiene import KERNELSPEC, clean, clean_files, notebook_paths, problems

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = notebook_paths([ROOT / d for d in ("notebooks", "solutions", "exercises")
                            if (ROOT / d).exists()])


def test_there_are_notebooks():
    assert any(p.parent.name == "notebooks" for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_notebook_is_clean(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    found = problems(nb)
    assert not found, f"{path.name}: {found}; run `course clean-notebooks`"


def dirty_notebook():
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                  "language": "python"},
                   "language_info": {"name": "python", "version": "3.11.7"},
                   "widgets": {"state": {}}}
    code = nbformat.v4.new_code_cell("print(1)", execution_count=3,
                                     outputs=[nbformat.v4.new_output("stream", text="1\n")])
    code.metadata = {"scrolled": True, "tags": ["keep"]}
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"), code, nbformat.v4.new_code_cell("  ")]
    return nb


def test_policy_catches_every_kind_of_dirt():
    found = " | ".join(problems(dirty_notebook()))
    for expected in ("stray keys ['widgets']", "kernelspec is", "language_info",
                     "stray metadata ['scrolled']", "has outputs", "execution count", "is empty"):
        assert expected in found


def test_clean_fixes_everything_and_keeps_what_matters(tmp_path):
    nb = clean(dirty_notebook())
    assert problems(nb) == []
    assert nb.metadata.kernelspec == KERNELSPEC
    assert nb.cells[1].metadata == {"tags": ["keep"]}
    assert [c.source for c in nb.cells] == ["# Title", "print(1)"]

    path = tmp_path / "dirty.ipynb"
    nbformat.write(dirty_notebook(), path)
    assert clean_files([tmp_path]) == [path]
    assert clean_files([tmp_path]) == []  # idempotent
    assert problems(nbformat.read(path, as_version=4)) == []


def test_checkpoint_copies_are_ignored(tmp_path):
    (tmp_path / ".ipynb_checkpoints").mkdir()
    nbformat.write(dirty_notebook(), tmp_path / ".ipynb_checkpoints" / "a-checkpoint.ipynb")
    assert notebook_paths([tmp_path]) == []
