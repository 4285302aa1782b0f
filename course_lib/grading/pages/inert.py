"""What a student wrote or printed, made inert for a page an instructor opens.

- :class:`SanitizeOutputs` keeps only inert output data (text, PNG and JPEG checked by their
  signatures), drops output metadata (nbconvert writes some of it into ``<img>`` unquoted),
  widget state and markdown attachments;
- :func:`safe_markdown_html` renders markdown with raw HTML escaped, then keeps only a strict
  allow-list of tags, with no attribute but an ``http(s)`` or relative ``a href``.

Rendering markdown can take time that grows faster than the text (some inputs, such as many
unclosed ``\\begin{...}``, are quadratic), so a page renders at most
:data:`MARKDOWN_CELL_CHARACTERS` of one cell and :data:`MARKDOWN_PAGE_CHARACTERS` in all;
past that, a cell is shown as escaped plain text, in time linear in its size.
"""

from __future__ import annotations

import base64
import binascii
import html
import re

import bleach
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode
from traitlets import Bool

MARKDOWN_CELL_CHARACTERS = 10_000
MARKDOWN_PAGE_CHARACTERS = 100_000
PLAIN_TEXT_MARK = "\x00course-plain-text\x00"
"""Put before a markdown cell's text by :class:`SanitizeOutputs` when the page's budget is spent:
:func:`safe_markdown_html` then shows that cell as plain text (a student who writes the mark
only gets plain text, the safe direction)."""

INERT_MIME_TYPES = ("image/png", "image/jpeg", "text/plain")
"""The only output data a feedback page shows, in display priority order."""

# Outputs


def _text(value) -> str:
    """nbformat text: a string, or a list of strings on disk."""
    if isinstance(value, list):
        return "".join(str(part) for part in value)
    return "" if value is None else str(value)


_IMAGE_SIGNATURES = {"image/png": b"\x89PNG\r\n\x1a\n", "image/jpeg": b"\xff\xd8\xff"}


def valid_image_base64(data, mime: str) -> str | None:
    """The base64 text of a PNG or JPEG (whitespace removed), or None unless it decodes strictly
    and starts with that format's signature."""
    if not isinstance(data, str):
        return None
    compact = re.sub(r"\s+", "", data)
    try:
        raw = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return None
    return compact if raw.startswith(_IMAGE_SIGNATURES[mime]) else None


def not_shown_note(kinds) -> str:
    """The text left where nothing of an output can be shown."""
    kinds = ", ".join(kinds) or "unknown"
    kinds = re.sub(r"[\x00-\x1f\x7f]+", " ", kinds)[:200]
    return f"(an output of type {kinds} is not shown in feedback)"


def sanitize_data(data) -> tuple[dict, list[str]]:
    """The inert part of a display bundle (text/plain, checked PNG/JPEG) and the dropped types."""
    data = data if isinstance(data, dict) else {}
    kept, dropped = {}, []
    for mime, value in data.items():
        if mime == "text/plain":
            kept[mime] = _text(value)
        elif mime in _IMAGE_SIGNATURES and (image := valid_image_base64(value, mime)):
            kept[mime] = image
        else:
            dropped.append(str(mime))
    return kept, dropped


def sanitize_output(output) -> NotebookNode:
    """A new output holding only inert data: stream and error as text; display_data and
    execute_result with text/plain, PNG, JPEG; no output metadata. What cannot be shown becomes a
    short text/plain note."""
    kind = output.get("output_type")
    if kind == "stream":
        name = output.get("name") if output.get("name") in ("stdout", "stderr") else "stdout"
        return NotebookNode(output_type="stream", name=name, text=_text(output.get("text")))
    if kind == "error":
        traceback = output.get("traceback")
        traceback = [str(t) for t in traceback] if isinstance(traceback, list) else []
        return NotebookNode(output_type="error", ename=_text(output.get("ename")),
                            evalue=_text(output.get("evalue")), traceback=traceback)
    if kind in ("display_data", "execute_result"):
        data, dropped = sanitize_data(output.get("data"))
        if not data:
            data = {"text/plain": not_shown_note(dropped)}
        clean = NotebookNode(output_type=kind, data=NotebookNode(data), metadata=NotebookNode())
        if kind == "execute_result":
            count = output.get("execution_count")
            clean.execution_count = count if isinstance(count, int) else None
        return clean
    return NotebookNode(output_type="display_data", metadata=NotebookNode(),
                        data=NotebookNode({"text/plain": not_shown_note([f"{kind}"])}))


_ATTACHMENT_LINK = re.compile(r"(\]\(\s*<?|^ {0,3}\[[^\]]+\]:\s*<?)attachment:",
                              re.IGNORECASE | re.MULTILINE)


def drop_attachments(cell) -> None:
    """Remove a markdown cell's attachments, and point its ``attachment:`` links nowhere (so
    rendering neither embeds them nor fails on the missing attachment)."""
    cell.pop("attachments", None)
    cell.source = _ATTACHMENT_LINK.sub(r"\1#removed-attachment-", _text(cell.get("source")))


class SanitizeOutputs(Preprocessor):
    """Leave nothing active in the notebook: each code cell's outputs keep only inert data (see
    :func:`sanitize_output`); markdown cells lose their attachments; raw cells lose their
    mime type; the notebook loses its widget state.

    Markdown *text* stays as written: raw HTML in it is made inert where it is rendered, by
    :func:`safe_markdown_html` (which :func:`configure_feedback` installs as ``markdown2html``),
    because only the markdown parser knows what is math, code or HTML."""

    enabled = Bool(True)

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        self.rendered = 0  # markdown characters the page renders so far
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code":
            cell.outputs = [sanitize_output(o) for o in cell.get("outputs", [])]
        elif cell.cell_type == "markdown":
            drop_attachments(cell)
            size = len(cell.source)
            if size > MARKDOWN_CELL_CHARACTERS or \
                    self.rendered + size > MARKDOWN_PAGE_CHARACTERS:
                cell.source = PLAIN_TEXT_MARK + cell.source
            else:
                self.rendered += size
        elif cell.cell_type == "raw":
            for key in ("raw_mimetype", "format"):
                cell.metadata.pop(key, None)
        return cell, resources


# Markdown

MARKDOWN_TAGS = frozenset({
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "em", "strong", "del", "code", "pre",
    "blockquote", "ul", "ol", "li", "dl", "dt", "dd", "a", "table", "thead", "tbody", "tr",
    "th", "td", "span", "div",
})
"""The tags rendered markdown may keep; none of them may carry attributes but ``a``'s href."""

LINK_PROTOCOLS = frozenset({"http", "https"})
"""Schemes an href may have; relative links (no scheme) are allowed too."""


class _SafeRenderer(IPythonRenderer):
    """nbconvert's renderer with raw HTML escaped, harmful link schemes refused, images shown as
    their alternative text (a remote image would be a request), mermaid as plain code."""

    def __init__(self):
        super().__init__(escape=True, allow_harmful_protocols=False, exclude_anchor_links=True)

    def image(self, text: str, url: str, title: str | None = None) -> str:
        return f"[image: {text}]" if text else "[image]"

    def block_mermaidjs(self, code: str) -> str:
        return "<pre><code>" + html.escape(code) + "</code></pre>\n"


def clean_markdown_html(fragment: str) -> str:
    """Keep only :data:`MARKDOWN_TAGS`, no attributes but an http(s) or relative ``a href``."""
    return bleach.clean(fragment, tags=MARKDOWN_TAGS, attributes={"a": ["href"]},
                        protocols=LINK_PROTOCOLS, strip=True, strip_comments=True)


def safe_markdown_html(source) -> str:
    """Markdown (with ``$...$`` math kept for MathJax) as inert HTML: raw HTML shows as text,
    ``javascript:`` and other non-http(s) links lose their href, images their source. Text
    marked by :class:`SanitizeOutputs`, or longer than :data:`MARKDOWN_CELL_CHARACTERS`, is
    shown as plain text instead, in time linear in its size."""
    text = _text(source)
    if text.startswith(PLAIN_TEXT_MARK) or len(text) > MARKDOWN_CELL_CHARACTERS:
        return "<pre>" + html.escape(text.removeprefix(PLAIN_TEXT_MARK)) + "</pre>\n"
    rendered = MarkdownWithMath(renderer=_SafeRenderer()).render(text)
    return clean_markdown_html(rendered)
