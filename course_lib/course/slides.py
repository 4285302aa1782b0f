"""`course slides`: one reveal.js deck per lesson, for instructors, built offline.

A lesson chooses what goes into its deck with cell tags, so a deck changes when its lesson does:

- a Markdown cell tagged ``slide`` becomes a slide (objectives, the idea, key equations);
- a code cell tagged ``slide`` gives a slide of its figures (diagrams and results), titled with
  the heading of the section it sits in; for a widget, the figure it showed when the lesson
  ran. Its code never appears.

The figures come from the lesson executed in the chosen profile, through the same cache the
course site uses (``build/site/<profile>/executed``), so ``make site`` followed by
``make slides`` executes nothing twice. Each deck is one HTML file with its figures inlined;
reveal.js and MathJax sit beside the decks in ``_static``, copied from package registries.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin

from course_lib.course.execute import execute_cached, with_outputs
from course_lib.course.site import TITLE, site_folder
from course_lib.course.site_widgets import WIDGET_VIEW
from course_lib.course.syllabus import COURSE_ROOT, LESSONS, Lesson
from course_lib.course.web_assets import copy_assets

SLIDE_TAG = "slide"
FIGURE_TYPES = ("image/svg+xml", "image/png", "image/jpeg")
STYLE = """
.reveal { font-size: 22px; }
.reveal mjx-container[display="true"] { overflow-x: auto; overflow-y: hidden; max-width: 100%; }
.reveal section { text-align: left; height: 100%; overflow-y: auto; }
.reveal h1, .reveal h2, .reveal h3 { text-transform: none; }
.reveal h1 { font-size: 1.6em; } .reveal h2 { font-size: 1.3em; } .reveal h3 { font-size: 1.1em; }
.reveal section img { max-height: 78vh; max-width: 100%; margin: 0.2em auto; display: block;
                      border: 0; box-shadow: none; }
.reveal table { font-size: 0.7em; } .reveal code { font-size: 0.9em; }
.reveal .lesson-title { text-align: center; }
"""


@dataclass(frozen=True)
class Slide:
    html: str


def markdown_renderer() -> MarkdownIt:
    """Markdown to HTML with ``$…$`` and ``$$…$$`` left for MathJax as ``\\(…\\)``/``\\[…\\]``."""
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    dollarmath_plugin(md, double_inline=True)
    md.add_render_rule("math_inline", lambda self, tokens, idx, options, env:
                       f"\\({html.escape(tokens[idx].content)}\\)")
    md.add_render_rule("math_inline_double", lambda self, tokens, idx, options, env:
                       f"\\[{html.escape(tokens[idx].content)}\\]")
    for block in ("math_block", "math_block_label"):
        md.add_render_rule(block, lambda self, tokens, idx, options, env:
                           f"<p>\\[{html.escape(tokens[idx].content)}\\]</p>\n")
    return md


def cell_tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def widget_outputs(model_id: str, state: dict) -> list[dict]:
    """The outputs saved in the Output widgets under widget ``model_id`` (an ``interact`` is a
    box whose last child is an Output widget), depth first."""
    model = state.get(model_id, {})
    found = list(model.get("state", {}).get("outputs", []))
    for child in model.get("state", {}).get("children", []):
        found += widget_outputs(child.removeprefix("IPY_MODEL_"), state)
    return found


def figures_html(cell: dict, widget_state: dict | None = None) -> list[str]:
    """The ``<img>`` of every figure a code cell's outputs hold, inlined as data URIs; for a
    widget, the figures its saved state holds (what the widget showed when the lesson ran)."""
    images, outputs = [], []
    for output in cell.get("outputs", []):
        outputs.append(output)
        view = output.get("data", {}).get(WIDGET_VIEW)
        if view and widget_state:
            outputs += widget_outputs(view["model_id"], widget_state)
    for output in outputs:
        data = output.get("data", {})
        for mime in FIGURE_TYPES:
            if mime in data:
                content = data[mime]
                content = "".join(content) if isinstance(content, list) else content
                if mime == "image/svg+xml":
                    images.append(content)
                else:
                    images.append(f'<img alt="figure" src="data:{mime};base64,'
                                  f'{content.strip()}">')
                break
    return images


def heading_of(source: str) -> str | None:
    match = re.search(r"^#{1,3}\s+(.+)$", source, flags=re.MULTILINE)
    return match.group(1).strip() if match else None


def lesson_slides(notebook: dict, md: MarkdownIt | None = None) -> list[Slide]:
    """The slides a lesson's tagged cells make, in the lesson's order."""
    md = md or markdown_renderer()
    widget_state = notebook.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {})
    widget_state = widget_state.get("state", {})
    slides, section = [], None
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            section = heading_of(source) or section
        if SLIDE_TAG not in cell_tags(cell):
            continue
        if cell["cell_type"] == "markdown":
            slides.append(Slide(md.render(source)))
        elif cell["cell_type"] == "code":
            images = figures_html(cell, widget_state)
            if not images:
                raise ValueError(f"a code cell tagged {SLIDE_TAG!r} has no figure to show "
                                 f"(section {section!r}, code {source[:60]!r})")
            title = f"<h3>{md.renderInline(section)}</h3>\n" if section else ""
            slides.append(Slide(title + "\n".join(images)))
    return slides


def deck_html(lesson: Lesson, slides: list[Slide], static: str = "_static") -> str:
    """A whole reveal.js page: a title slide, then ``slides``."""
    title = (f'<section class="lesson-title"><h1>{html.escape(lesson.title)}</h1>'
             f"<p>Lesson {lesson.number} · {html.escape(TITLE)}</p></section>")
    sections = "\n".join(f"<section>\n{slide.html}\n</section>" for slide in slides)
    mathjax_config = json.dumps({"tex": {"inlineMath": [["\\(", "\\)"]],
                                         "displayMath": [["\\[", "\\]"]]}})
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{html.escape(lesson.number)} · {html.escape(lesson.title)}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="{static}/revealjs/dist/reveal.css">
<link rel="stylesheet" href="{static}/revealjs/dist/theme/white.css">
<style>{STYLE}</style>
<script>window.MathJax = {mathjax_config};</script>
<script src="{static}/mathjax/tex-chtml-full.js"></script>
</head>
<body>
<div class="reveal"><div class="slides">
{title}
{sections}
</div></div>
<script src="{static}/revealjs/dist/reveal.js"></script>
<script src="{static}/revealjs/plugin/notes/notes.js"></script>
<script>
Reveal.initialize({{hash: true, slideNumber: "c/t", transition: "fade", plugins: [RevealNotes]}});
</script>
</body>
</html>
"""


def index_html(decks: list[tuple[Lesson, int]]) -> str:
    rows = "\n".join(f'<li><a href="{lesson.number}_{lesson.slug}.html">{lesson.number} · '
                     f"{html.escape(lesson.title)}</a> ({count} slides)</li>"
                     for lesson, count in decks)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><link rel="icon" '
            f'href="data:,"><title>Slides · {html.escape(TITLE)}</title></head><body>'
            f"<h1>Slides: {html.escape(TITLE)}</h1><ul>\n{rows}\n</ul></body></html>\n")


def build_slides(profile: str = "full", lessons: list[str] | None = None,
                 root: Path = COURSE_ROOT) -> Path:
    """Write ``build/slides/<profile>/NN_slug.html`` for the chosen lessons (all by default)
    and an ``index.html``; return the folder."""
    chosen = [lesson for lesson in LESSONS if not lessons or lesson.number in lessons]
    unknown = set(lessons or ()) - {lesson.number for lesson in LESSONS}
    if unknown:
        raise ValueError(f"no lesson numbered {sorted(unknown)}; expected two digits from "
                         f"{LESSONS[0].number} to {LESSONS[-1].number}")
    out = root / "build" / "slides" / profile
    copy_assets(out / "_static", widgets=False, reveal=True)
    md, decks = markdown_renderer(), []
    for lesson in chosen:
        print(f"[slides] lesson {lesson.number}", flush=True)
        done = execute_cached(root / lesson.notebook, site_folder(profile, root) / "executed",
                              profile)
        notebook = with_outputs(json.loads((root / lesson.notebook).read_text()),
                                json.loads(done.executed.read_text()))
        slides = lesson_slides(notebook, md)
        (out / f"{lesson.number}_{lesson.slug}.html").write_text(deck_html(lesson, slides))
        decks.append((lesson, len(slides)))
    (out / "index.html").write_text(index_html(decks))
    return out
