"""Feedback pages that are safe to open: what ``course grade`` shows students and instructors.

nbgrader's ``GenerateFeedback`` turns each autograded notebook into an HTML page. Out of the box
that page loads MathJax from a CDN (offline, every equation stays raw LaTeX) and renders whatever
the submission holds as live HTML: a student's ``display(HTML('<script>...'))``, JavaScript,
SVG and widget outputs, and raw HTML or ``javascript:`` links in markdown would all run in the
instructor's browser when the page is opened. This module makes the page inert and self-contained:

- :class:`RedactHiddenTests` removes the hidden test block from the test cells, and only from
  them (a student's cell that holds the markers is text like any other), and shortens a test
  cell's tracebacks to their last line (hidden test code is never shown);
- :class:`SanitizeOutputs` keeps only inert output data (text, checked PNG/JPEG), drops output
  metadata, widget state and markdown attachments;
- :class:`StatusInTestCells` replaces a test cell's error with the gradebook's words for it
  (``0 / 2 points: not attempted (...)``), shown as plain text;
- :func:`safe_markdown_html` renders markdown (cells and grader comments) with raw HTML escaped,
  then keeps only a strict allow-list of tags (no attributes but an ``http(s)``/relative href);
- the ``feedback`` template (``templates/feedback``, found before nbgrader's own, since
  nbgrader's API asks for that name) extends nbgrader's, loads MathJax from a *relative* URL
  (:func:`install_mathjax` copies it beside the pages) with its ``ui/safe`` filter and without
  the TeX packages that can link, style or load code, sets a Content-Security-Policy that allows
  only that script and the inline MathJax configuration, and lists a grader comment only when
  there is one;
- :func:`placeholder_page` is the static page for a submission that could not be graded.

:func:`configure_feedback` puts these into the traitlets ``Config`` that ``course grade`` hands to
nbgrader. Nothing here downloads anything.
"""

from __future__ import annotations

import base64
import hashlib
import html
import importlib.resources
import json
import re
import shutil
from pathlib import Path

import jinja2
import jinja2.bccache
import nbgrader
from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor, Preprocessor
from nbformat import NotebookNode
from nbgrader.preprocessors import GetGrades
from traitlets import Bool

from course_lib.grading.pages.inert import INERT_MIME_TYPES, SanitizeOutputs, safe_markdown_html
from course_lib.grading.verdicts.verdict import (
    HIDDEN_BEGIN,
    HIDDEN_END,
    error_outputs,
    is_test_cell,
)

MATHJAX_FOLDER = "_mathjax"
"""The folder, directly under ``feedback/``, that :func:`install_mathjax` fills."""

MATHJAX_FILE = "tex-svg-full.js"
"""MathJax 3's TeX-to-SVG build with every TeX extension inside: it needs no font files, so it
works from ``file://``, and it never has to load a TeX extension at run time."""

MATHJAX_SAFE_FILE = "ui/safe.js"
"""MathJax's ``ui/safe`` extension (filters URLs, classes, ids and styles that TeX produces). The
loader fetches it relative to :data:`MATHJAX_FILE`, so it keeps this path under the folder."""

MATHJAX_URL = f"../../{MATHJAX_FOLDER}/{MATHJAX_FILE}"
"""Pages are ``feedback/<student>/<lesson>/<notebook>.html``: two levels below ``feedback/``."""

TEMPLATE_NAME = "feedback"  # the name nbgrader's API forces; ours comes first on the path
TEMPLATE_FILE = "course_feedback.html.j2"
"""Not ``index.html.j2``: it extends that name, which then finds nbgrader's ``feedback`` one (the
next folder on the template path; nbgrader resets ``extra_template_paths``, so the folder that
holds ``feedback/`` cannot be put on the path)."""
TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"

_NBGRADER_FORMGRADER = Path(nbgrader.__file__).resolve().parent / "server_extensions/formgrader"
NBGRADER_TEMPLATES_DIR = _NBGRADER_FORMGRADER / "templates"
"""Holds nbgrader's ``feedback`` template, which ours extends."""
NBGRADER_BOOTSTRAP_CSS_DIR = _NBGRADER_FORMGRADER / "static/node_modules/bootstrap/dist/css"
"""Where nbgrader's template finds ``bootstrap.min.css`` (inlined into the page)."""

# Test cells


class RedactHiddenTests(Preprocessor):
    """For feedback: hidden test code leaves the test cells, and tracebacks shrink to their last
    line, so students learn what failed without seeing the hidden tests. Only test cells are
    touched: a student's text that happens to hold the markers stays as the student wrote it
    (nbgrader's own ``ClearHiddenTests`` reads every cell and fails the page on such text)."""

    enabled = Bool(True)

    def preprocess_cell(self, cell, resources, index):
        if is_test_cell(cell):
            cell.source = without_hidden_tests(cell.source)
            for output in error_outputs(cell):
                output["traceback"] = [f"{output.get('ename')}: {output.get('evalue')}"]
        return cell, resources


def without_hidden_tests(source: str) -> str:
    """``source`` without its hidden test blocks (an unclosed block runs to the end)."""
    kept, hiding = [], False
    for line in str(source).splitlines(keepends=True):
        if line.strip() == HIDDEN_BEGIN:
            hiding = True
        elif hiding and line.strip() == HIDDEN_END:
            hiding = False
        elif not hiding:
            kept.append(line)
    return "".join(kept).rstrip("\n")


def status_line(grade) -> str | None:
    """``"0 / 2 points: not attempted (...)"`` from a cell's ``course_grade`` metadata, or None
    where that metadata is missing or malformed. One line of plain text, no control characters."""
    if not isinstance(grade, dict):
        return None
    try:
        points, max_points = float(grade["points"]), float(grade["max_points"])
    except (KeyError, TypeError, ValueError):
        return None
    status = re.sub(r"[\x00-\x1f\x7f]+", " ", str(grade.get("status") or "")).strip()
    return f"{points:g} / {max_points:g} points: {status or 'no status'}"


class StatusInTestCells(Preprocessor):
    """A test cell with ``course_grade`` metadata (``points``, ``max_points``, ``status``, as the
    gradebook has them) shows that verdict instead of its error: its error outputs give way to one
    stdout line; its other stream outputs (self-check and flag messages) stay."""

    enabled = Bool(True)

    def preprocess_cell(self, cell, resources, index):
        line = status_line(cell.metadata.get("course_grade")) if is_test_cell(cell) else None
        if line is None:
            return cell, resources
        outputs = list(cell.get("outputs", []))
        kinds = [o.get("output_type") for o in outputs]
        where = kinds.index("error") if "error" in kinds else len(outputs)  # the first error
        kept = [o for o in outputs if o.get("output_type") != "error"]
        kept.insert(where, NotebookNode(output_type="stream", name="stdout", text=line + "\n"))
        cell.outputs = kept
        return cell, resources


# MathJax and the page head

MATHJAX_CONFIG = {
    "loader": {"load": ["ui/safe"]},
    "tex": {
        "inlineMath": [["$", "$"], ["\\(", "\\)"]],
        "displayMath": [["$$", "$$"], ["\\[", "\\]"]],
        "processEscapes": True,
        "processEnvironments": True,
        # html: \href \class \style \cssId \data; require/autoload: load code at run time
        "packages": {"[-]": ["html", "require", "autoload"]},
    },
    "options": {
        "enableMenu": False,
        "safeOptions": {
            "allow": {"URLs": "safe", "classes": "safe", "cssIDs": "safe", "styles": "safe"},
            "safeProtocols": {"http": True, "https": True, "file": False, "javascript": False,
                              "data": False},
        },
    },
}
"""MathJax 3 settings: the delimiters nbconvert uses, the ``ui/safe`` filter on, and no TeX
package that can make links, set classes, ids or styles, or load further code."""

MATHJAX_CONFIG_SCRIPT = "window.MathJax = " + json.dumps(MATHJAX_CONFIG, sort_keys=True) + ";"


def script_hash(script: str) -> str:
    """A CSP source that allows exactly this inline script."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'none'",
    # 'self' is how Chromium matches file:// scripts; file: for browsers that give each file
    # its own opaque origin. Neither admits inline script or event handlers.
    f"script-src 'self' file: {script_hash(MATHJAX_CONFIG_SCRIPT)}",
    "style-src 'unsafe-inline'",
    "img-src data:",
    "font-src data:",
    "base-uri 'none'",
    "form-action 'none'",
])
"""Scripts: only files from the page's own origin (``file://``: MathJax beside the pages) and
the MathJax configuration, by hash; no connections, frames, objects or remote images."""


def feedback_head(mathjax_url: str) -> str:
    """The start of a feedback page's ``<head>`` (template filter): the CSP, the MathJax
    configuration and the MathJax script."""
    return (
        f'<meta http-equiv="Content-Security-Policy" '
        f'content="{html.escape(CONTENT_SECURITY_POLICY)}">\n'
        f"<script>{MATHJAX_CONFIG_SCRIPT}</script>\n"
        f'<script defer src="{html.escape(mathjax_url)}"></script>\n'
    )


_FONT_FACE_OR_IMPORT = re.compile(r"@font-face\s*\{[^}]*\}|@import[^;]*;", re.IGNORECASE)


def inert_css(css) -> str:
    """Style sheet text without ``@font-face`` and ``@import`` rules (template filter): the
    inlined Bootstrap names icon fonts that are not beside the page, and Chromium would try to
    load them."""
    return _FONT_FACE_OR_IMPORT.sub("", str(css))


def _mathjax_source(name: str) -> Path:
    found = importlib.resources.files("mathjax") / "static/mathjax/es5" / name
    with importlib.resources.as_file(found) as path:
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing; pip install 'django-static-mathjax>=3.2'")
        return path


def install_mathjax(feedback_root: Path) -> Path:
    """Copy MathJax (:data:`MATHJAX_FILE` and :data:`MATHJAX_SAFE_FILE`, from the
    ``django-static-mathjax`` package) to ``feedback_root / MATHJAX_FOLDER``; return that
    folder. The pages load it from there by the relative :data:`MATHJAX_URL`."""
    folder = Path(feedback_root) / MATHJAX_FOLDER
    for name in (MATHJAX_FILE, MATHJAX_SAFE_FILE):
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_mathjax_source(name), target)
    return folder


# Configuration

FEEDBACK_PREPROCESSORS = [GetGrades, RedactHiddenTests, SanitizeOutputs,
                          StatusInTestCells, CSSHTMLHeaderPreprocessor]


class _CompiledTemplates(jinja2.BytecodeCache):
    """Compiled templates kept in memory for the process. nbconvert builds a new Jinja
    environment for every exporter, and nbgrader a new exporter for every feedback run, so each
    page would otherwise compile the same templates again (about half of its time); a template
    whose source changes is compiled anew (Jinja checks each bucket's checksum)."""

    def __init__(self) -> None:
        self.compiled: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if bucket.key in self.compiled:
            bucket.bytecode_from_string(self.compiled[bucket.key])

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self.compiled[bucket.key] = bucket.bytecode_to_string()


_TEMPLATES = _CompiledTemplates()


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTML exporter with its compiled templates kept between pages."""

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = _TEMPLATES
        return environment


def configure_feedback(config) -> None:
    """Set up nbgrader's ``GenerateFeedback`` in ``config`` (a traitlets ``Config``) for safe,
    offline pages: the preprocessors above, our template, MathJax by relative URL, and
    :func:`safe_markdown_html` for all markdown."""
    config.GenerateFeedback.preprocessors = list(FEEDBACK_PREPROCESSORS)
    config.GenerateFeedback.exporter_class = _dotted(FeedbackExporter)
    exporter = config.HTMLExporter
    exporter.template_name = TEMPLATE_NAME
    exporter.template_file = TEMPLATE_FILE
    exporter.extra_template_basedirs = [str(TEMPLATES_DIR), str(NBGRADER_TEMPLATES_DIR)]
    exporter.extra_template_paths = [str(NBGRADER_BOOTSTRAP_CSS_DIR)]
    exporter.mathjax_url = MATHJAX_URL
    exporter.sanitize_html = True  # nbconvert's own layer, for any block our template inherits
    exporter.raw_mimetypes = []  # raw cells are shown as text, never as HTML
    exporter.filters = {  # by dotted path, which nbconvert imports
        "markdown2html": _dotted(safe_markdown_html),
        "feedback_head": _dotted(feedback_head),
        "inert_css": _dotted(inert_css),
    }
    # only inert data is ever rendered, even if an output escaped SanitizeOutputs
    config.DataTypeFilter.display_data_priority = list(INERT_MIME_TYPES)


def _dotted(function) -> str:
    return f"{function.__module__}.{function.__qualname__}"


# A page for a submission that could not be graded


def placeholder_page(student: str, lesson: str, notebook: str,
                     reasons: list[tuple[str, float, float, str]]) -> str:
    """A complete static page (no script) for a notebook that could not be graded (missing,
    empty, not a notebook, refused): a title and a table of (exercise, points, max_points,
    status)."""
    e = html.escape
    title = f"{notebook} ({lesson}, {student}): not graded"
    rows = "\n".join(
        f"<tr><td><code>{e(str(exercise))}</code></td><td>{float(points):g}</td>"
        f"<td>{float(max_points):g}</td><td>{e(str(status))}</td></tr>"
        for exercise, points, max_points, status in reasons)
    total = sum(float(r[1]) for r in reasons)
    maximum = sum(float(r[2]) for r in reasons)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{e(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid #ccc; padding: 0.3em 0.8em; text-align: left; }}
</style>
</head>
<body>
<h1>{e(notebook)}: not graded</h1>
<p>Student <b>{e(student)}</b>, lesson <b>{e(lesson)}</b>. This notebook could not be graded,
so it has no feedback page of its own; each exercise's status says why.</p>
<table>
<thead><tr><th>Exercise</th><th>Points</th><th>Max points</th><th>Status</th></tr></thead>
<tbody>
{rows}
</tbody>
<tfoot><tr><th>Total</th><th>{total:g}</th><th>{maximum:g}</th><th></th></tr></tfoot>
</table>
</body>
</html>
"""
