"""docs/api.md is what course_lib.course.api_doc generates from the notebooks, and every name a
lesson imports from course_lib exists."""

import importlib
import importlib.util
from pathlib import Path

import pytest

from course_lib.course.api_doc import (
    API_DOC,
    REGENERATE,
    WHOLE_MODULE,
    api_markdown,
    lesson_imports,
    main,
    source_imports,
)

ROOT = Path(__file__).resolve().parent.parent
LESSON_IMPORTS = [(lesson, imports) for lesson, imports in lesson_imports(ROOT) if imports]


def test_committed_page_matches_the_notebooks():
    committed = (ROOT / API_DOC).read_text(encoding="utf-8")
    assert committed == api_markdown(ROOT), (
        f"{API_DOC} is out of date with notebooks/: run `{REGENERATE}` and commit the result")


def test_every_existing_lesson_is_on_the_page():
    assert LESSON_IMPORTS, "no lesson notebook imports anything from course_lib"
    text = api_markdown(ROOT)
    for lesson, _ in LESSON_IMPORTS:
        assert f"## {lesson.number} {lesson.title}" in text


def missing_names(imports):
    """What of ``imports`` (module -> names) cannot be imported, one line each."""
    missing = []
    for module_name, names in imports.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            missing.append(f"module {module_name} does not import ({error})")
            continue
        for name in names:
            if name == WHOLE_MODULE or hasattr(module, name):
                continue
            # `from package import submodule` imports the submodule if need be.
            is_package = hasattr(module, "__path__")
            if not is_package or importlib.util.find_spec(f"{module_name}.{name}") is None:
                missing.append(f"{module_name} has no {name!r}")
    return missing


@pytest.mark.parametrize(("lesson", "imports"), LESSON_IMPORTS,
                         ids=[lesson.number for lesson, _ in LESSON_IMPORTS])
def test_every_imported_name_exists(lesson, imports):
    missing = missing_names(imports)
    assert not missing, f"{lesson.notebook} imports what does not exist: {missing}"


def test_missing_names_finds_moved_names_and_modules():
    assert missing_names({"course_lib.nn": ["attention"], "course_lib.profile": [WHOLE_MODULE],
                          "course_lib.nn.attention": ["masked_softmax"]}) == []
    assert missing_names({"course_lib.nn.attention": ["no_such_name"],
                          "course_lib.device": ["attention"],
                          "course_lib.no_such_module": ["x"]}) == [
        "course_lib.nn.attention has no 'no_such_name'",
        "course_lib.device has no 'attention'",
        "module course_lib.no_such_module does not import (No module named "
        "'course_lib.no_such_module')",
    ]


def test_source_imports_reads_every_form_and_skips_magics():
    source = "\n".join([
        "%matplotlib inline",
        "!pip list",
        "import torch",
        "import course_lib.nn.attention as attn",
        "from course_lib.device import get_device",
        "from course_lib.nn.attention import (masked_softmax,",
        "                                     attention_context)",
        "def helper():",
        "    from course_lib.viz import plot_attention",
        "from coursework import nothing",
    ])
    assert source_imports(source) == {
        "course_lib.nn.attention": {WHOLE_MODULE, "masked_softmax", "attention_context"},
        "course_lib.device": {"get_device"},
        "course_lib.viz": {"plot_attention"},
    }
    assert source_imports("x = !ls\nfrom course_lib.device import get_device") == {}


def test_main_writes_and_checks(tmp_path, capsys):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        (notebooks / path.name).write_bytes(path.read_bytes())
    assert main(["--root", str(tmp_path), "--check"]) == 1
    assert main(["--root", str(tmp_path)]) == 0
    assert (tmp_path / API_DOC).read_text(encoding="utf-8") == api_markdown(ROOT)
    assert main(["--root", str(tmp_path), "--check"]) == 0
    capsys.readouterr()
