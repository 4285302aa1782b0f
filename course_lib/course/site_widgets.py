"""A Sphinx extension for the course site: a note above every widget saved in a page.

MyST-NB embeds a widget's saved state, so the page draws the control and the figure it showed
when the lesson ran, but no kernel answers when the control moves. The note says so, next to
the widget, in the page itself (``course_widget_note`` in the Sphinx config).

The widgets typeset their labels with MathJax 2's ``MathJax.Hub.Queue``; the site serves
MathJax 3, so a small script gives every MathJax object a ``Hub.Queue`` that calls MathJax 3's
``typesetPromise`` (MathJax 3 replaces ``window.MathJax`` when it loads, hence the setter).
"""

from __future__ import annotations

from docutils import nodes

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
NOTE_STYLE = ("font-size: 0.85em; color: #555; border-left: 3px solid #1f4e79; "
              "padding-left: 0.6em; margin: 0.4em 0")
MATHJAX2_QUEUE = """(function () {
  var hub = {Queue: function (job) {
    var mathjax = window.MathJax, element = job && job[2];
    if (mathjax && mathjax.typesetPromise) {
      mathjax.typesetPromise(element ? [element] : undefined).catch(function () {});
    }
  }};
  var current = window.MathJax;
  if (current && !current.Hub) { current.Hub = hub; }
  Object.defineProperty(window, "MathJax", {configurable: true,
    get: function () { return current; },
    set: function (value) { current = value; if (value && !value.Hub) { value.Hub = hub; } }});
})();"""


def add_widget_notes(app, doctree: nodes.document, docname: str) -> None:
    """Insert the note before each raw HTML node that holds a widget view."""
    note = app.config.course_widget_note
    for raw in list(doctree.findall(nodes.raw)):
        if WIDGET_VIEW in raw.astext() and raw.parent is not None:
            html = f'<p class="course-widget-note" style="{NOTE_STYLE}">{note}</p>'
            raw.parent.insert(raw.parent.index(raw), nodes.raw("", html, format="html"))


def setup(app):
    app.add_config_value("course_widget_note", "", "html")
    app.connect("doctree-resolved", add_widget_notes)
    app.add_js_file(None, body=MATHJAX2_QUEUE, priority=100)
    # the course's own widgets (course_lib/widgets): their modules and styles, served by the site
    app.add_js_file("course/widgets.js", priority=600)
    app.add_css_file("course/widgets.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
