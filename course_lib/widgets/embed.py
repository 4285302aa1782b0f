"""One widget, two places: a live anywidget in the lab, a static copy on the site.

``EmbeddedWidget`` is an anywidget whose state is one JSON-able ``data`` dictionary. Its output
holds two representations:

- ``application/vnd.jupyter.widget-view+json``: JupyterLab draws it with the widget's ES module
  (``js/<name>.js``), which reads ``model.get("data")``;
- ``text/html``: ``<div data-course-embed="<name>">`` holding the same data as JSON. The site
  renders this one (its notebook renderer is told to prefer HTML), and ``site_script`` draws it
  with the same ES module, given a stand-in model that answers ``get("data")``.

JupyterLab prefers the widget view, so the lab never shows the static copy.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import anywidget
import traitlets
from markdown_it import MarkdownIt

JS = Path(__file__).parent / "js"
WIDGET_NAMES = ("explorer", "quiz", "control")
EMBED_ATTRIBUTE = "data-course-embed"
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table")


def markdown_html(text: str) -> str:
    """``text`` (Markdown, tables included, raw HTML escaped) as HTML."""
    return _MARKDOWN.render(text).strip()


def with_static_copy(bundle, copy: str | None):
    """A ``_repr_mimebundle_`` result with ``copy`` added as its ``text/html`` (the site prefers
    it; JupyterLab prefers the live view)."""
    data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
    if data is not None and copy is not None:
        data = {**data, "text/html": copy}
    return data, metadata


def embedded_html(name: str, data: dict) -> str:
    """The static copy: a container the site script finds, with ``data`` as inert JSON."""
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False)
    payload = payload.replace("<", "\\u003c")  # no "</script>" can close the block early
    return (f'<div {EMBED_ATTRIBUTE}="{html.escape(name)}" class="course-embed">'
            f'<script type="application/json">{payload}</script></div>')


class EmbeddedWidget(anywidget.AnyWidget):
    """An anywidget drawn by ``js/<widget_name>.js``, in the lab and, from its saved HTML copy,
    on the site."""

    widget_name = "explorer"
    data = traitlets.Dict().tag(sync=True)

    def __init_subclass__(cls, **kwargs):
        if "widget_name" not in cls.__dict__:  # traitlets' own dynamic subclasses
            super().__init_subclass__(**kwargs)
            return
        cls._esm = (JS / f"{cls.widget_name}.js").read_text()
        cls._css = (JS / f"{cls.widget_name}.css").read_text()
        super().__init_subclass__(**kwargs)

    def _repr_mimebundle_(self, **kwargs):
        return with_static_copy(super()._repr_mimebundle_(**kwargs),
                                embedded_html(self.widget_name, self.data))


def module_as_script(name: str) -> str:
    """``js/<name>.js`` as a classic script that registers its default export in
    ``window.CourseWidgets[name]`` (a page opened from disk cannot import ES modules)."""
    source = (JS / f"{name}.js").read_text()
    if source.count("export default") != 1:
        raise ValueError(f"js/{name}.js must have exactly one 'export default'")
    body = source.replace("export default", "return", 1)
    return (f"window.CourseWidgets = window.CourseWidgets || {{}};\n"
            f"window.CourseWidgets[{json.dumps(name)}] = (function () {{\n{body}\n}})();\n")


SITE_BOOT = """
(function () {
  function draw(el) {
    if (el.dataset.courseDrawn) { return; }
    var block = el.querySelector('script[type="application/json"]');
    var widget = window.CourseWidgets[el.getAttribute("data-course-embed")];
    if (!block || !widget) { return; }
    var data = JSON.parse(block.textContent);
    var model = {get: function (key) { return key === "data" ? data : undefined; },
                 set: function () {}, on: function () {}, off: function () {},
                 save_changes: function () {}};
    el.dataset.courseDrawn = "1";
    var view = document.createElement("div");
    el.appendChild(view);
    widget.render({model: model, el: view});
  }
  function drawAll() { document.querySelectorAll("[data-course-embed]").forEach(draw); }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else { drawAll(); }
})();
"""


def site_script() -> str:
    """The one script the site loads: every widget module, then the code that draws each
    static copy on the page."""
    return "".join(module_as_script(name) for name in WIDGET_NAMES) + SITE_BOOT


def site_styles() -> str:
    """Every widget's styles, for the site."""
    return "\n".join((JS / f"{name}.css").read_text() for name in WIDGET_NAMES)
