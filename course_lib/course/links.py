"""Relative links that must work: in the lab (the Markdown of lessons, exercises and docs, read
from the repository) and on the site (the built HTML).

A link is broken when its file does not exist, when it leaves the folder that is served (the
repository for `make lab`, the HTML folder for the site), or when its ``#anchor`` names no heading
of the target (GitHub's and MyST's slug of the heading, which is what ``myst_heading_anchors``
gives the site).
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from markdown_it import MarkdownIt

# the pages with links a reader follows: lessons, exercise sets and their sources, the docs
MARKDOWN_SOURCES = ("README.md", "docs/*.md", "notebooks/*.ipynb", "exercises/README.md",
                    "exercises/*/*.ipynb", "solutions/README.md", "solutions/*/*.ipynb")


def markdown_of(path: Path) -> str:
    """The Markdown a reader sees in ``path``: a notebook's Markdown cells, or the file."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        return "\n\n".join("".join(cell["source"]) for cell in cells
                           if cell["cell_type"] == "markdown")
    return path.read_text(encoding="utf-8")


def _tokens(markdown: str):
    for token in MarkdownIt("commonmark").enable("table").parse(markdown):
        yield token
        yield from token.children or ()


def markdown_links(markdown: str) -> list[str]:
    """Every link and image target in ``markdown``, in order (code spans and blocks excluded)."""
    found = []
    for token in _tokens(markdown):
        if token.type == "link_open":
            found.append(str(token.attrs.get("href", "")))
        elif token.type == "image":
            found.append(str(token.attrs.get("src", "")))
        elif token.type in ("html_inline", "html_block"):
            found += re.findall(r"""\b(?:href|src)\s*=\s*["']([^"']+)["']""", token.content)
    return found


def slug(heading: str) -> str:
    """The anchor GitHub and MyST give a heading: lower case, punctuation dropped, spaces as
    hyphens (``"Layers of `course_lib`"`` → ``"layers-of-course_lib"``)."""
    text = re.sub(r"[`*]", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def heading_anchors(markdown: str, depth: int = 3) -> set[str]:
    """The anchors of ``markdown``'s headings down to level ``depth``."""
    anchors, tokens = set(), list(MarkdownIt("commonmark").parse(markdown))
    for token, inline in zip(tokens, tokens[1:], strict=False):
        if token.type == "heading_open" and int(token.tag[1]) <= depth:
            anchors.add(slug(inline.content))
    return anchors


def is_relative(target: str) -> bool:
    parts = urlsplit(target)
    return not (parts.scheme or parts.netloc or target.startswith(("//", "mailto:")))


def broken_markdown_links(root: Path, patterns=MARKDOWN_SOURCES) -> list[str]:
    """``"page: target (why)"`` for every relative link under ``root`` that the lab cannot
    follow. Links resolve from the page's folder, as JupyterLab resolves them."""
    root = root.resolve()
    broken = []
    for pattern in patterns:
        for page in sorted(root.glob(pattern)):
            markdown = markdown_of(page)
            for target in markdown_links(markdown):
                if not is_relative(target):
                    continue
                why = _why_broken(root, page, target, markdown)
                if why:
                    broken.append(f"{page.relative_to(root)}: {target} ({why})")
    return broken


def _why_broken(root: Path, page: Path, target: str, markdown: str) -> str | None:
    parts = urlsplit(target)
    path = (page.parent / unquote(parts.path)).resolve() if parts.path else page
    if not path.is_relative_to(root):
        return "outside the course"
    if not path.exists():
        return "no such file"
    if parts.fragment and path.suffix in (".md", ".ipynb"):
        text = markdown if path == page else markdown_of(path)
        if parts.fragment not in heading_anchors(text):
            return f"no heading #{parts.fragment}"
    return None


class _Page(HTMLParser):
    """The link targets and element ids of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.targets: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs) -> None:
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.targets.append(attrs["href"])


def _parsed(path: Path, cache: dict) -> _Page:
    if path not in cache:
        page = _Page()
        page.feed(path.read_text(encoding="utf-8", errors="replace"))
        cache[path] = page
    return cache[path]


def broken_html_links(html: Path) -> list[str]:
    """``"page: target (why)"`` for every relative ``<a href>`` of the built site whose file is
    missing or outside the site, or whose ``#anchor`` is no id of the target page."""
    html, cache, broken = html.resolve(), {}, []
    for page in sorted(html.rglob("*.html")):
        for target in _parsed(page, cache).targets:
            parts = urlsplit(target)
            if not is_relative(target) or parts.scheme == "javascript":
                continue
            path = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if path.is_dir():
                path = path / "index.html"
            why = None
            if not path.is_relative_to(html):
                why = "outside the site"
            elif not path.exists():
                why = "no such file"
            elif parts.fragment and path.suffix == ".html" \
                    and unquote(parts.fragment) not in _parsed(path, cache).ids:
                why = f"no element #{parts.fragment}"
            if why:
                broken.append(f"{page.relative_to(html)}: {target} ({why})")
    return broken
