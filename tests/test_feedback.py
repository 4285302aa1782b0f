"""Feedback pages (course_lib.grading.pages.feedback): inert, offline, and saying what the
gradebook says.

The attacks come first: a submission's outputs and markdown try to run script (``<script>``,
event handlers, ``javascript:`` links, SVG, widgets, MathJax's ``\\href``), to make the
instructor's browser fetch something, or to hide a test cell's verdict behind a bare
``NotImplementedError:``. Each preprocessor is checked on crafted notebooks; then a page is
exported the way nbgrader's ``GenerateFeedback`` does it with :func:`configure_feedback`, and
opened in headless Chromium, offline, by ``file://`` URL.

:func:`check_feedback_page_in_browser` is reusable: ``course grade``'s own tests call it on real
output, each page in a fresh context of the module's one Chromium (the ``browser`` fixture).
Where Chromium or Playwright is missing the fixture skips (with the command that installs it),
except in CI, where that is a failure (as in tests/test_browser.py).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import html
import io
import json
import re
import sys
import time
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup
from nbconvert import HTMLExporter
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbformat.v4 import (
    new_code_cell,
    new_markdown_cell,
    new_notebook,
    new_output,
    new_raw_cell,
)
from nbgrader.converters import GenerateFeedback
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import GetGrades
from PIL import Image
from traitlets.config import Config

from course_lib.course.syllabus import COURSE_ROOT
from course_lib.grading.pages import feedback
from course_lib.grading.pages.feedback import (
    CONTENT_SECURITY_POLICY,
    MATHJAX_CONFIG_SCRIPT,
    MATHJAX_FILE,
    MATHJAX_FOLDER,
    MATHJAX_SAFE_FILE,
    MATHJAX_URL,
    RedactHiddenTests,
    StatusInTestCells,
    configure_feedback,
    install_mathjax,
    placeholder_page,
    script_hash,
    status_line,
)
from course_lib.grading.pages.inert import (
    MARKDOWN_CELL_CHARACTERS,
    MARKDOWN_PAGE_CHARACTERS,
    SanitizeOutputs,
    safe_markdown_html,
    sanitize_output,
)


def _image(fmt: str) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 3), (200, 30, 30)).save(buffer, fmt)
    return base64.b64encode(buffer.getvalue()).decode()


PNG, JPEG = _image("PNG"), _image("JPEG")  # small real images, as a kernel sends them

# What a student's outputs may hold: each would set window.__pwned or the title, or fetch.
HTML_ATTACK = ("<script>window.__pwned = 'html'; document.title = 'pwned'</script>"
               "<img src=x onerror=\"window.__pwned = 'img'\">"
               "<iframe src=\"javascript:parent.__pwned='iframe'\"></iframe>"
               "<img src=\"https://example.com/beacon.png\">")
JS_ATTACK = "window.__pwned = 'javascript'; alert('javascript')"
SVG_ATTACK = ("<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"window.__pwned='svg'\">"
              "<script>window.__pwned = 'svg script'</script></svg>")
WIDGET_VIEW = {"model_id": "0123", "version_major": 2, "version_minor": 0}
MARKDOWN_ATTACKS = [
    "<script>window.__pwned = 'md script'; alert(1)</script>",
    "<img src=x onerror=\"window.__pwned = 'md img'\">",
    "<a href=\"javascript:window.__pwned = 'md a'\">click me</a>",
    "[a markdown link](javascript:window.__pwned='md link')",
    "[entity link](jav&#x61;script:window.__pwned='md entity')",
    "<javascript:window.__pwned='autolink'>",
    "<svg><animate onbegin=\"window.__pwned='md svg'\" attributeName=x dur=1s></animate></svg>",
    "![tracker](https://example.com/pixel.png)",
    "![attached](attachment:evil.png)",
    "<style>body { background: url(https://example.com/style.png) }</style>",
    "```mermaid\n<img src=x onerror=\"window.__pwned = 'mermaid'\">\n```",
]
MATH_ATTACKS = [
    r"$\href{javascript:window.__pwned='tex href'}{\text{click}}$",
    r"$\class{x}{\cssId{y}{z}}$",
    r"$\style{background-image: url(https://example.com/tex-style.png)}{s}$",
    r"$\bbox[background-image: url(https://example.com/tex-bbox.png)]{b}$",
    r"$\require{../../evil}$",
    r"$\unicode{x41}$",
]
# nbconvert's math delimiters in markdown: $...$, $$...$$, \\(...\\), \\[...\\], environments
COURSE_MATH = (r"Softmax: $\alpha_i = e^{x_i} / \sum_j e^{x_j}$, inline \\(\beta\\), and $y_{<t}$"
               " with `<eos>`;\n\n$$\\gamma = \\frac{1}{2}$$\n\n\\\\[\\delta + 1\\\\]\n\n"
               "\\begin{align}a &= b\\\\ c &< d\\end{align}\n")


# ---- crafted notebooks -----------------------------------------------------------------------

def nbgrader_meta(grade_id: str, *, grade=False, solution=False, locked=True, points=None,
                  **graded) -> dict:
    """nbgrader cell metadata as in solutions/*/*.ipynb (plus what GetGrades adds: ``graded``)."""
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    meta.update(graded)
    return {"nbgrader": meta}


def grading_cell(grade_id: str, outputs, course_grade=None):
    cell = new_code_cell(f"# Self-check: {grade_id}\ncheck()", outputs=outputs,
                         metadata=nbgrader_meta(grade_id, grade=True, points=2, score=0.0))
    if course_grade is not None:
        cell.metadata["course_grade"] = course_grade
    return cell


def not_implemented():
    return new_output("error", ename="NotImplementedError", evalue="",
                      traceback=["\x1b[0;31mTraceback\x1b[0m", "  hidden_test_line()",
                                 "NotImplementedError: "])


def attack_notebook():
    """A submission that tries everything, beside the course's own markdown and test cells."""
    outputs = [
        new_output("display_data", data={"text/html": HTML_ATTACK}),
        new_output("display_data", data={"application/javascript": JS_ATTACK,
                                         "text/plain": "<IPython.core.display.Javascript>"}),
        new_output("display_data", data={"image/svg+xml": SVG_ATTACK}),
        new_output("display_data", data={
            "application/vnd.jupyter.widget-view+json": WIDGET_VIEW}),
        new_output("display_data", data={"text/markdown": MARKDOWN_ATTACKS[1],
                                         "text/latex": r"$\href{javascript:x}{y}$"}),
        new_output("execute_result", execution_count=3,
                   data={"text/html": "<table onmouseover=\"window.__pwned='df'\"></table>",
                         "text/plain": "   a\n0  1"}),
        new_output("display_data", data={"image/png": PNG, "text/plain": "<Figure>"},
                   metadata={"image/png": {"width": "1 onerror=window.__pwned='w'"},
                             "filenames": {"image/png": "javascript:window.__pwned='f'"}}),
        new_output("display_data", data={"image/png": "not base64 \"><script>x</script>"}),
        new_output("display_data", data={"image/jpeg": JPEG}),
        new_output("stream", name="stdout", text="<script>window.__pwned='stream'</script>\n"),
    ]
    nb = new_notebook(cells=[
        new_markdown_cell("## Exercise 1 · A stable softmax (2 points)\n\n" + COURSE_MATH,
                          metadata=nbgrader_meta("ex1_text")),
        new_code_cell("def stable_softmax(x):\n    return x", outputs=outputs,
                      metadata=nbgrader_meta("ex1_code", solution=True, locked=False,
                                             comment=None)),
        grading_cell("ex1_stable_softmax", [
            new_output("stream", name="stdout", text="✓ graded: shape (2, 3)\n"),
            not_implemented()],
            course_grade={"points": 0, "max_points": 2, "status":
                          "not attempted (the cell still raises NotImplementedError)"}),
        new_markdown_cell("\n\n".join(MARKDOWN_ATTACKS + MATH_ATTACKS),
                          attachments={"evil.png": {"image/png": PNG}}),
        new_markdown_cell("My answer: $\\lambda$ is small.",
                          metadata=nbgrader_meta("ex2_text", grade=True, solution=True,
                                                 locked=False, points=1, score=1.0,
                                                 comment="Good: see $\\mu$ <script>"
                                                         "window.__pwned='comment'</script>")),
        new_code_cell("x = 2", metadata=nbgrader_meta("ex3_code", solution=True, locked=False,
                                                      comment="   ")),
        new_code_cell("y = 3", metadata={
            **nbgrader_meta("x\" onmouseover=\"window.__pwned='grade_id'", solution=True,
                            locked=False, comment=""),
            "tags": ["a\" onclick=\"window.__pwned='tag'"]}),
        grading_cell("ex3_check", [new_output("stream", name="stdout", text="✓ graded: x\n")],
                  course_grade={"points": 2, "max_points": 2, "status": "ok"}),
        new_raw_cell("<script>window.__pwned = 'raw'</script>",
                     metadata={"raw_mimetype": "text/html"}),
    ])
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {}, "version_major": 2, "version_minor": 0}}
    nb.metadata["title"] = "<script>window.__pwned='title'</script>"
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def run(preprocessor, nb):
    nb, _ = preprocessor().preprocess(copy.deepcopy(nb), {})
    return nb


# ---- SanitizeOutputs -------------------------------------------------------------------------

ALLOWED_OUTPUT_KEYS = {
    "stream": {"output_type", "name", "text"},
    "error": {"output_type", "ename", "evalue", "traceback"},
    "display_data": {"output_type", "data", "metadata"},
    "execute_result": {"output_type", "data", "metadata", "execution_count"},
}


def test_sanitize_outputs_keeps_only_inert_data():
    nb = run(SanitizeOutputs, attack_notebook())
    outputs = nb.cells[1].outputs
    assert len(outputs) == 10
    for output in outputs:
        assert set(output) <= ALLOWED_OUTPUT_KEYS[output.output_type], output
        assert not output.get("metadata")
        assert set(output.get("data", {})) <= {"text/plain", "image/png", "image/jpeg"}
    notes = [o.data.get("text/plain") for o in outputs[:5]]
    assert notes[0] == "(an output of type text/html is not shown in feedback)"
    assert outputs[1].data == {"text/plain": "<IPython.core.display.Javascript>"}
    assert notes[2] == "(an output of type image/svg+xml is not shown in feedback)"
    assert "application/vnd.jupyter.widget-view+json" in notes[3]
    assert "text/markdown" in notes[4] and "text/latex" in notes[4]
    assert outputs[5].output_type == "execute_result" and outputs[5].execution_count == 3
    assert outputs[5].data == {"text/plain": "   a\n0  1"}
    assert outputs[6].data == {"image/png": PNG, "text/plain": "<Figure>"}
    assert outputs[7].data == {
        "text/plain": "(an output of type image/png is not shown in feedback)"}
    assert outputs[8].data == {"image/jpeg": JPEG}
    assert outputs[9].text == "<script>window.__pwned='stream'</script>\n"  # text, shown as text
    assert "widgets" not in nb.metadata
    assert all(json.dumps(o).count("javascript:") == 0 for o in outputs)


@pytest.mark.parametrize("data", [
    "iVBORw0KGgo=<script>",  # not base64
    base64.b64encode(b"<svg onload=alert(1)>").decode(),  # base64, but not a PNG
    12345,
])
def test_image_data_that_is_not_a_real_png_is_dropped(data):
    output = {"output_type": "display_data", "data": {"image/png": data}, "metadata": {}}
    assert sanitize_output(output).data == {
        "text/plain": "(an output of type image/png is not shown in feedback)"}


def test_an_unknown_output_type_becomes_a_note():
    clean = sanitize_output({"output_type": "weird", "data": {"text/html": "<b>?</b>"}})
    assert clean.data == {"text/plain": "(an output of type weird is not shown in feedback)"}


def test_base64_with_line_breaks_is_kept_compact():
    wrapped = "\n".join(PNG[i:i + 20] for i in range(0, len(PNG), 20))
    clean = sanitize_output(new_output("display_data", data={"image/png": wrapped}))
    assert clean.data == {"image/png": PNG}


def test_reference_links_to_attachments_go_nowhere_too():
    cell = new_markdown_cell("![x][ref]\n\n[ref]: attachment:evil.png\n",
                             attachments={"evil.png": {"image/png": PNG}})
    nb = run(SanitizeOutputs, new_notebook(cells=[cell]))
    assert "attachment:" not in nb.cells[0].source


def test_markdown_attachments_are_dropped_and_their_links_go_nowhere():
    nb = run(SanitizeOutputs, attack_notebook())
    cell = nb.cells[3]
    assert "attachments" not in cell
    assert "attachment:" not in cell.source and "#removed-attachment-evil.png" in cell.source
    assert nb.cells[8].metadata == {}  # a raw cell keeps no mime type to be rendered as


# ---- markdown --------------------------------------------------------------------------------

def active_parts(fragment: str) -> list[str]:
    """Everything in an HTML fragment that could run or fetch: script-like elements, event
    handlers, non-http(s) URLs, images."""
    soup = BeautifulSoup(fragment, "html.parser")
    found = [tag.name for tag in soup.find_all(
        ["script", "iframe", "object", "embed", "svg", "img", "style", "link", "form", "input",
         "animate", "meta", "base"])]
    for tag in soup.find_all(True):
        for name, value in tag.attrs.items():
            if name.startswith("on") or name in ("style", "src", "srcdoc", "class", "id"):
                found.append(f"{tag.name}[{name}]")
            if name == "href" and not re.match(r"(https?:|#|[^:]*$)", str(value)):
                found.append(f"href={value}")
    return found


@pytest.mark.parametrize("attack", MARKDOWN_ATTACKS, ids=range(len(MARKDOWN_ATTACKS)))
def test_markdown_renders_inert(attack):
    rendered = safe_markdown_html(attack)
    assert active_parts(rendered) == [], rendered
    assert not re.search(r"href\s*=\s*[\"']?\s*(javascript|data|vbscript)", rendered), rendered


def test_raw_html_in_markdown_shows_as_text():
    rendered = safe_markdown_html("Look: <script>alert(1)</script> and <b>bold</b>")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in rendered
    assert "<b>" not in rendered


def test_markdown_keeps_math_code_and_links_for_mathjax():
    rendered = safe_markdown_html(COURSE_MATH + "\n[docs](https://example.org/a) [up](../x.html)")
    assert r"$\alpha_i = e^{x_i} / \sum_j e^{x_j}$" in rendered
    assert "$y_{&lt;t}$" in rendered  # the text MathJax reads is y_{<t}
    assert "<code>&lt;eos&gt;</code>" in rendered
    assert "$$\\gamma = \\frac{1}{2}$$" in rendered
    assert "$\\beta$" in rendered and "$$\\delta + 1$$" in rendered  # \\( and \\[ as nbconvert
    assert "\\begin{align}a &amp;= b\\\\ c &amp;&lt; d\\end{align}" in rendered
    assert '<a href="https://example.org/a">docs</a>' in rendered
    assert '<a href="../x.html">up</a>' in rendered


def visible_text(fragment: str) -> str:
    soup = BeautifulSoup(fragment, "html.parser")
    for anchor in soup.select("a.anchor-link"):
        anchor.decompose()
    return " ".join(soup.get_text(" ").split())


def test_the_course_exercise_markdown_renders_as_with_nbconvert():
    """Every markdown cell of solutions/ reads the same (text, math, code) as nbconvert's own
    rendering: the safe renderer costs the course's exercises nothing."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    sources = sorted((COURSE_ROOT / "solutions").glob("*/*.ipynb"))
    assert sources
    for path in sources:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "markdown":
                ours, theirs = safe_markdown_html(cell.source), markdown2html_mistune(cell.source)
                assert visible_text(ours) == visible_text(theirs), (path.name, cell.source[:80])
                assert active_parts(ours) == []


# ---- test cells ------------------------------------------------------------------------------

def test_redact_hidden_tests_keeps_only_the_last_line():
    nb = run(RedactHiddenTests, attack_notebook())
    error = nb.cells[2].outputs[1]
    assert error.traceback == ["NotImplementedError: "]


def test_hidden_tests_leave_test_cells_and_only_test_cells():
    test = new_code_cell("check()\n### BEGIN HIDDEN TESTS\nsecret()\n### END HIDDEN TESTS\n")
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "ex1"}
    student = new_code_cell("# my notes\n### BEGIN HIDDEN TESTS\nprint('not hidden')\n")
    unclosed = new_code_cell("check()\n### BEGIN HIDDEN TESTS\nsecret()\n")
    unclosed.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "ex2"}
    nb = run(RedactHiddenTests, new_notebook(cells=[test, student, unclosed]))
    assert [c.source for c in nb.cells] == ["check()", student.source, "check()"]


def _timed_markdown(text):
    nb = run(SanitizeOutputs, new_notebook(cells=[new_markdown_cell(text)]))
    start = time.perf_counter()
    page = safe_markdown_html(nb.cells[0].source)
    return page, time.perf_counter() - start


def test_quadratic_markdown_is_shown_as_text_past_its_limit():
    # Each unclosed \begin makes the renderer search the rest of the cell: quadratic. Past
    # the cell's limit the text is shown as it is, in linear time.
    stall = "\\begin{a}" * (312 * 1024 // 9)
    page, seconds = _timed_markdown(stall)
    assert page.startswith("<pre>") and "\\begin{a}" in page and "<script" not in page
    assert seconds < 1.0
    small, _ = _timed_markdown("\\begin{a}" * (MARKDOWN_CELL_CHARACTERS // 20))
    assert not small.startswith("<pre>")  # under the limit it still renders as markdown


def test_the_page_renders_a_bounded_amount_of_markdown():
    size = MARKDOWN_CELL_CHARACTERS // 2
    cells = [new_markdown_cell("*a" * (size // 2)) for _ in range(
        2 * MARKDOWN_PAGE_CHARACTERS // size)]
    nb = run(SanitizeOutputs, new_notebook(cells=cells))
    shown = [safe_markdown_html(c.source).startswith("<pre>") for c in nb.cells]
    rendered = sum(not plain for plain in shown) * size
    assert rendered <= MARKDOWN_PAGE_CHARACTERS and shown[-1]
    assert safe_markdown_html(nb.cells[-1].source) == "<pre>" + "*a" * (size // 2) + "</pre>\n"


def test_status_replaces_the_error_of_a_test_cell():
    nb = run(StatusInTestCells, run(RedactHiddenTests, attack_notebook()))
    outputs = nb.cells[2].outputs
    assert [o.output_type for o in outputs] == ["stream", "stream"]
    assert outputs[0].text == "✓ graded: shape (2, 3)\n"
    assert outputs[1] == {"output_type": "stream", "name": "stdout", "text":
                          "0 / 2 points: not attempted (the cell still raises "
                          "NotImplementedError)\n"}
    assert [o.text for o in nb.cells[7].outputs] == ["✓ graded: x\n", "2 / 2 points: ok\n"]


def test_status_goes_where_the_error_was():
    cell = grading_cell("t", [new_output("stream", name="stdout", text="before\n"),
                           not_implemented(), not_implemented(),
                           new_output("stream", name="stdout", text="⚑ flagged for the "
                                      "instructor: x\n")],
                     course_grade={"points": 0.5, "max_points": 2, "status": "wrong\nvalue"})
    nb = run(StatusInTestCells, new_notebook(cells=[cell]))
    assert [o.text for o in nb.cells[0].outputs] == [
        "before\n", "0.5 / 2 points: wrong value\n", "⚑ flagged for the instructor: x\n"]


def test_a_cell_without_a_verdict_is_left_alone():
    plain = grading_cell("t", [not_implemented()])
    solution = new_code_cell("x", outputs=[not_implemented()], metadata=nbgrader_meta(
        "s", solution=True, locked=False))
    solution.metadata["course_grade"] = {"points": 0, "max_points": 2, "status": "x"}
    broken = grading_cell("b", [not_implemented()], course_grade={"points": "many"})
    nb = new_notebook(cells=[plain, solution, broken])
    assert run(StatusInTestCells, nb) == nb
    assert status_line({"points": 1, "max_points": 2, "status": "<b>x</b>"}) == (
        "1 / 2 points: <b>x</b>")  # text: the page escapes it


# ---- the page --------------------------------------------------------------------------------

def feedback_exporter(config: Config) -> HTMLExporter:
    """The exporter nbgrader's GenerateFeedback builds from ``config`` (BaseConverter.start),
    with every configured preprocessor but GetGrades, which reads the gradebook database: the
    tests put what it would put into the notebook and resources themselves."""
    converter = GenerateFeedback(coursedir=CourseDirectory(config=config), config=config)
    exporter = converter.exporter_class(parent=converter, config=converter.config)
    for preprocessor in converter.preprocessors:
        if preprocessor is not GetGrades:
            exporter.register_preprocessor(preprocessor)
    return exporter


def as_get_grades_would(nb):
    """Scores, points and comments in the cells, as GetGrades copies them from the gradebook."""
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            meta.setdefault("score", 0.0)
            meta.setdefault("points", 0.0)
        if meta.get("solution") or meta.get("task"):
            meta.setdefault("comment", None)
    return nb


def grades_resources(notebook: str) -> dict:
    """What GenerateFeedback and GetGrades put in ``resources["nbgrader"]``."""
    return {"nbgrader": {"notebook": notebook, "assignment": "00_start_here",
                         "student": "alice", "db_url": "sqlite:///unused.db",
                         "score": 3.0, "max_score": 5.0, "late_penalty": 0}}


def test_configure_feedback_sets_up_generate_feedback():
    config = Config()
    configure_feedback(config)
    assert config.GenerateFeedback.preprocessors == [
        GetGrades, RedactHiddenTests, SanitizeOutputs, StatusInTestCells,
        CSSHTMLHeaderPreprocessor]
    converter = GenerateFeedback(coursedir=CourseDirectory(config=config), config=config)
    assert converter.config.HTMLExporter.template_name == "feedback"  # not reset
    assert converter.config.HTMLExporter.mathjax_url == MATHJAX_URL == (
        "../../_mathjax/tex-svg-full.js")


def test_feedback_pages_compile_their_templates_once_per_process():
    """nbgrader makes a new exporter for every feedback run; the templates compiled for the
    first page serve the next, which comes out the same."""
    config = Config()
    configure_feedback(config)
    converter = GenerateFeedback(coursedir=CourseDirectory(config=config), config=config)
    assert converter.exporter_class is feedback.FeedbackExporter
    assert issubclass(feedback.FeedbackExporter, HTMLExporter)
    nb = attack_notebook()
    first, _ = feedback_exporter(config).from_notebook_node(
        copy.deepcopy(nb), resources=grades_resources("nb"))
    compiled = dict(feedback._TEMPLATES.compiled)
    assert compiled, "no template went through the cache"
    second, _ = feedback_exporter(config).from_notebook_node(
        copy.deepcopy(nb), resources=grades_resources("nb"))
    assert second == first
    assert feedback._TEMPLATES.compiled == compiled  # nothing compiled again


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """The attack notebook's feedback page at feedback/alice/00_start_here/nb.html, with
    MathJax installed beside it."""
    root = tmp_path_factory.mktemp("grading") / "feedback"
    config = Config()
    configure_feedback(config)
    body, _ = feedback_exporter(config).from_notebook_node(
        attack_notebook(), resources=grades_resources("nb"))
    page = root / "alice" / "00_start_here" / "nb.html"
    page.parent.mkdir(parents=True)
    page.write_text(body, encoding="utf-8")
    install_mathjax(root)
    return page


def test_install_mathjax_copies_the_svg_build(exported):
    folder = exported.parents[2] / MATHJAX_FOLDER
    assert (folder / MATHJAX_FILE).stat().st_size > 1_000_000
    assert (folder / MATHJAX_SAFE_FILE).is_file()
    assert (exported.parent / MATHJAX_URL).resolve() == (folder / MATHJAX_FILE).resolve()
    assert 'VERSION="3.2.2"' in (folder / MATHJAX_FILE).read_text(encoding="utf-8")


def test_the_page_loads_nothing_from_the_network(exported):
    soup = BeautifulSoup(exported.read_text(encoding="utf-8"), "html.parser")
    sources = [tag.get("src") or tag.get("href") for tag in soup.find_all(
        ["script", "link", "img", "iframe", "source", "embed", "object"])]
    assert all(s is None or not re.match(r"\s*(https?:)?//", s) for s in sources), sources
    assert [s.get("src") for s in soup.find_all("script")] == [None, MATHJAX_URL]
    for needle in ("cdnjs", "unpkg", "jsdelivr", "require.min.js", "jquery"):
        assert needle not in exported.read_text(encoding="utf-8")


def test_the_page_has_no_script_but_mathjax(exported):
    soup = BeautifulSoup(exported.read_text(encoding="utf-8"), "html.parser")
    inline = [s.string for s in soup.find_all("script") if not s.get("src")]
    assert inline == [MATHJAX_CONFIG_SCRIPT]
    meta = soup.find("meta", attrs={"http-equiv": "Content-Security-Policy"})
    assert meta["content"] == CONTENT_SECURITY_POLICY
    assert script_hash(inline[0]) in meta["content"]
    assert "'unsafe-inline'" not in meta["content"].split("script-src")[1].split(";")[0]
    head = soup.head.find_all(["meta", "script"])
    assert head[1] is meta  # before any script: charset, then the policy
    assert soup.body.find_all(["script", "iframe", "object", "embed", "svg", "form"]) == []
    for tag in soup.body.find_all(True):
        for name, value in tag.attrs.items():
            assert not name.startswith("on"), (tag.name, name)
            assert "javascript:" not in str(value).lower(), (tag.name, name, value)
    images = [img["src"][:22] for img in soup.body.find_all("img")]
    assert images == ["data:image/png;base64,", "data:image/jpeg;base64"]


def test_the_page_shows_attacks_as_text(exported):
    text = BeautifulSoup(exported.read_text(encoding="utf-8"), "html.parser").body.get_text()
    assert "<script>window.__pwned='stream'</script>" in text  # the stream, as text
    assert "<script>window.__pwned = 'md script'; alert(1)</script>" in text
    assert "<script>window.__pwned = 'raw'</script>" in text  # the raw cell, as text
    assert "(an output of type text/html is not shown in feedback)" in text


def test_the_test_cell_says_what_the_gradebook_says(exported):
    soup = BeautifulSoup(exported.read_text(encoding="utf-8"), "html.parser")
    text = soup.body.get_text()
    assert "0 / 2 points: not attempted (the cell still raises NotImplementedError)" in text
    assert "2 / 2 points: ok" in text
    assert "✓ graded: shape (2, 3)" in text
    assert "hidden_test_line" not in text
    assert not soup.select(".output_error")  # no bare "NotImplementedError:"


def test_only_real_comments_are_listed(exported):
    soup = BeautifulSoup(exported.read_text(encoding="utf-8"), "html.parser")
    toc = [a.get_text() for a in soup.select("#toc a")]
    assert toc.count("Comment") == 1, toc  # ex1_code: None, ex3_code: blank, ex2_text: real
    assert soup.select("#toc a[href='#comment-ex2_text']")
    footers = soup.select(".panel-footer")
    assert len(footers) == 1 and "Good: see $\\mu$" in footers[0].get_text()
    assert not footers[0].find("script")


def test_the_template_is_package_data():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    data = tomllib.loads((COURSE_ROOT / "pyproject.toml").read_text())
    patterns = data["tool"]["setuptools"]["package-data"]["course_lib.grading.pages"]
    folder = COURSE_ROOT / "course_lib" / "grading" / "pages"
    shipped = {p for pattern in patterns for p in folder.glob(pattern)}
    assert set((folder / "templates").rglob("*.*")) <= shipped


# ---- a page for a submission that could not be graded --------------------------------------

PLACEHOLDER_REASONS = [("ex1", 0.0, 2.0, "not a notebook: <script>window.__pwned=1</script>"),
                       ("ex2", 0, 2, "missing")]


def test_placeholder_page_is_static_and_escaped():
    page = placeholder_page("bob<script>", "00_start_here", "nb", PLACEHOLDER_REASONS)
    soup = BeautifulSoup(page, "html.parser")
    assert soup.find("script") is None and active_parts(str(soup.body)) == []
    assert "bob<script>" in soup.title.get_text()
    rows = [[td.get_text() for td in tr.find_all("td")] for tr in soup.tbody.find_all("tr")]
    assert rows == [["ex1", "0", "2", "not a notebook: <script>window.__pwned=1</script>"],
                    ["ex2", "0", "2", "missing"]]
    assert [th.get_text() for th in soup.tfoot.find_all("th")] == ["Total", "0", "4", ""]
    assert "https:" not in page and "http:" not in page


@pytest.mark.browser
def test_placeholder_page_in_a_browser(browser, tmp_path):
    path = tmp_path / "feedback" / "bob" / "00_start_here" / "nb.html"
    path.parent.mkdir(parents=True)
    path.write_text(placeholder_page("bob", "00_start_here", "nb", PLACEHOLDER_REASONS),
                    encoding="utf-8")
    check_feedback_page_in_browser(browser, path, expect_math=False)


# ---- in a browser ----------------------------------------------------------------------------

ACTIVE_IN_DOM = """() => {
  const found = [];
  for (const el of document.querySelectorAll('*')) {
    const tag = el.tagName.toLowerCase();
    if (['iframe', 'frame', 'object', 'embed', 'form', 'base', 'link', 'portal'].includes(tag))
      found.push(tag);
    if (tag === 'meta' && (el.getAttribute('http-equiv') || '').toLowerCase() === 'refresh')
      found.push('meta refresh');
    for (const attr of el.attributes) {
      const value = attr.value.replace(/[\\s\\u0000-\\u001f]/g, '').toLowerCase();
      if (attr.name.toLowerCase().startsWith('on')) found.push(`${tag}[${attr.name}]`);
      if (attr.name.toLowerCase() === 'srcdoc') found.push(`${tag}[srcdoc]`);
      if (/^(javascript|vbscript|data:text\\/html)/.test(value)) found.push(`${tag}[${attr.name}]`);
    }
  }
  return found;
}"""

SCRIPTS = """() => Array.from(document.scripts)
    .map(s => ({src: s.src, text: s.src ? '' : s.text}))"""

RAW_TEX = re.compile(r"\$\$?[^$\s][^$]*\$|\\[A-Za-z]{2,}|\\[(\[]")
"""TeX that MathJax would have replaced: $...$, a macro such as \\alpha, \\( or \\[."""


def check_feedback_page_in_browser(browser, page: Path, *,
                                   expect_math: bool = True) -> dict:
    """Open a feedback page in a fresh context of the headless Chromium ``browser`` (the
    ``browser`` fixture) by ``file://`` URL with the network off and assert that it is inert
    and complete:

    (a) with ``expect_math``, MathJax typeset the equations (``mjx-container`` elements, and no
        raw ``$...$``, ``\\(``, ``\\[`` left in the text of markdown cells);
    (b) no student script ran: ``window.__pwned`` is unset, the title is the page's own, no
        dialog opened, no page error; every script element is MathJax (its files under
        ``_mathjax/`` or its inline configuration); no event handler, ``javascript:`` URL,
        frame, object or form is in the DOM; the Content-Security-Policy refused nothing;
    (c) no request other than ``file://`` (or ``data:``) was attempted.

    Returns what it saw (``{"math": count, "title": ...}``) for further checks."""
    page = Path(page).resolve()
    title = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser").title
    title = title.get_text() if title else ""
    outside, dialogs, errors, refused = [], [], [], []

    def route(request_route):
        if request_route.request.url.startswith(("file:", "data:")):
            request_route.continue_()
        else:
            outside.append(request_route.request.url)
            request_route.abort()

    context = browser.new_context()  # its own cookies, storage and routes: nothing shared
    try:
        context.set_offline(True)
        context.route("**/*", route)
        tab = context.new_page()
        tab.on("request", lambda r: not r.url.startswith(("file:", "data:"))
               and outside.append(r.url))
        tab.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        tab.on("pageerror", lambda e: errors.append(str(e)))
        tab.on("console", lambda m: m.type in ("error", "warning") and (
            "Content Security Policy" in m.text or "Refused" in m.text)
            and refused.append(m.text))
        tab.goto(page.as_uri(), wait_until="load")
        tab.evaluate("() => window.MathJax && MathJax.startup && MathJax.startup.promise ? "
                     "MathJax.startup.promise.then(() => true) : true")
        tab.wait_for_timeout(300)  # anything a handler or timer would do, it has done
        seen = tab.evaluate("""() => ({
            pwned: window.__pwned === undefined ? null : String(window.__pwned),
            title: document.title,
            math: document.querySelectorAll('mjx-container').length,
            mathErrors: document.querySelectorAll('mjx-merror').length,
            mathjax: !!(window.MathJax && MathJax.startup && MathJax.version),
            brokenImages: Array.from(document.images)
                .filter(i => !i.complete || i.naturalWidth === 0)
                .map(i => i.src.slice(0, 60)),
            markdown: Array.from(document.querySelectorAll('.text_cell_render'))
                .map(e => { const c = e.cloneNode(true);
                            c.querySelectorAll('mjx-container, code, pre')
                             .forEach(x => x.remove());
                            return c.textContent; }),
        })""")
        seen["active"] = tab.evaluate(ACTIVE_IN_DOM)
        seen["scripts"] = tab.evaluate(SCRIPTS)
    finally:
        context.close()

    assert seen["pwned"] is None, f"a student's script ran: {seen['pwned']}"
    assert seen["title"] == title, f"the title changed to {seen['title']!r}"
    assert dialogs == [] and errors == [], (dialogs, errors)
    assert refused == [], f"the Content-Security-Policy refused: {refused}"
    assert seen["active"] == [], f"active content in the page: {seen['active']}"
    mathjax_dir = (page.parents[2] / MATHJAX_FOLDER).as_uri() + "/"
    for script in seen["scripts"]:
        if script["src"]:
            assert script["src"].startswith(mathjax_dir), script
        else:
            assert script["text"] == MATHJAX_CONFIG_SCRIPT, script
    assert outside == [], f"requests beyond file://: {outside}"
    assert seen["brokenImages"] == [], f"images that did not load: {seen['brokenImages']}"
    if expect_math:
        assert seen["mathjax"], "MathJax did not load (is feedback/_mathjax installed?)"
        assert seen["math"] > 0, "MathJax typeset nothing"
        raw = [m.group() for text in seen["markdown"] for m in RAW_TEX.finditer(text)]
        assert raw == [], f"TeX left untypeset: {raw}"
    return seen


@pytest.mark.browser
def test_the_page_is_inert_and_typeset_offline_in_a_browser(browser, exported):
    seen = check_feedback_page_in_browser(browser, exported)
    # the course's markdown (4 inline/display in the exercise text, lambda, mu in the comment)
    # and the student's TeX attacks, each typeset; none a TeX error
    assert seen["math"] >= 8
    assert seen["mathErrors"] == 0


SOURCE_NOTEBOOKS = sorted((COURSE_ROOT / "solutions").glob("*/*.ipynb"))


@pytest.mark.browser
@pytest.mark.parametrize("source", SOURCE_NOTEBOOKS, ids=[p.parent.name for p in SOURCE_NOTEBOOKS])
def test_an_exercise_notebook_typesets_completely_offline(browser, tmp_path, source):
    """The course's own exercise markdown on a feedback page: every equation typeset, no TeX
    error, nothing left raw."""
    config = Config()
    configure_feedback(config)
    body, _ = feedback_exporter(config).from_notebook_node(
        as_get_grades_would(nbformat.read(source, as_version=4)),
        resources=grades_resources(source.stem))
    page = tmp_path / "feedback" / "alice" / source.parent.name / f"{source.stem}.html"
    page.parent.mkdir(parents=True)
    page.write_text(body, encoding="utf-8")
    install_mathjax(tmp_path / "feedback")
    seen = check_feedback_page_in_browser(browser, page)
    assert seen["mathErrors"] == 0


@pytest.mark.browser
def test_the_browser_check_catches_a_script_and_missing_mathjax(browser, tmp_path,
                                                                exported):
    """The check can fail: a page that runs a script, and one without MathJax, do not pass."""
    root = tmp_path / "feedback"
    page = root / "alice" / "00_start_here" / "nb.html"
    page.parent.mkdir(parents=True)
    text = exported.read_text(encoding="utf-8")
    page.write_text(text, encoding="utf-8")
    with pytest.raises(AssertionError, match="MathJax did not load"):
        check_feedback_page_in_browser(browser, page)
    install_mathjax(root)
    unsafe = text.replace(CONTENT_SECURITY_POLICY, "script-src * 'unsafe-inline'").replace(
        "</body>", "<script>window.__pwned = 'test'</script></body>")
    page.write_text(unsafe, encoding="utf-8")
    with pytest.raises(AssertionError, match="a student's script ran"):
        check_feedback_page_in_browser(browser, page)
    fetching = text.replace("</body>", f"<img src=\"{html.escape('https://example.com/x.png')}"
                            "\"></body>").replace("img-src data:", "img-src data: *")
    page.write_text(fetching, encoding="utf-8")
    with pytest.raises(AssertionError, match="requests beyond file://"):
        check_feedback_page_in_browser(browser, page)


@pytest.mark.browser
def test_the_policy_blocks_an_injected_script_from_file_urls(browser, tmp_path, exported):
    """The CSP is a second layer: were HTML to slip through, its script would not run."""
    root = tmp_path / "feedback"
    page = root / "alice" / "00_start_here" / "nb.html"
    page.parent.mkdir(parents=True)
    install_mathjax(root)
    injected = exported.read_text(encoding="utf-8").replace(
        "</body>", "<script>window.__pwned = 'inline'</script>"
        "<img src=x onerror=\"window.__pwned = 'handler'\"></body>")
    page.write_text(injected, encoding="utf-8")
    with pytest.raises(AssertionError, match="Content-Security-Policy refused"):
        check_feedback_page_in_browser(browser, page)
    digest = hashlib.sha256(MATHJAX_CONFIG_SCRIPT.encode()).digest()
    assert base64.b64encode(digest).decode() in CONTENT_SECURITY_POLICY


def test_the_instructors_guide_states_the_feedback_limits():
    from course_lib.grading.isolation import budget

    guide = (COURSE_ROOT / "docs" / "instructors.md").read_text()
    for stated in (f"at most {MARKDOWN_CELL_CHARACTERS:,} characters of one",
                   f"{MARKDOWN_PAGE_CHARACTERS:,} of a page",
                   f"({budget.FEEDBACK_SECONDS_PER_CELL} s per cell of the source, plus "
                   f"{budget.FEEDBACK_MARGIN_S} s)"):
        assert stated in " ".join(guide.split()), stated


def test_the_feedback_step_is_stopped_at_its_budget(monkeypatch, tmp_path):
    from course_lib.grading.workflow import unit

    class SlowApi:
        def generate_feedback(self, lesson, student, force):
            time.sleep(30)
            return {"success": True}

    monkeypatch.setattr(unit, "feedback_deadline", lambda source: 1)
    start = time.perf_counter()
    problem = unit.make_feedback(SlowApi(), tmp_path, "00", "alice", ["nb"])
    assert problem == "it took longer than its 1 s budget"
    assert time.perf_counter() - start < 10

    class FailingApi:
        def generate_feedback(self, lesson, student, force):
            return {"success": False, "error": "Traceback ...\nValueError: a broken page"}

    assert unit.make_feedback(FailingApi(), tmp_path, "00", "alice", ["nb"]) == (
        "nbgrader: ValueError: a broken page")
