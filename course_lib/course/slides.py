"""`course slides`: one reveal.js deck per lesson, for instructors, built offline.

A lesson chooses what goes into its deck with cell tags, so a deck changes when its lesson does:

- a Markdown cell tagged ``slide`` becomes a slide (objectives, the idea, key equations), or
  several, cut between paragraphs, equations and list items, where it is longer than a slide
  holds (:func:`markdown_pages`);
- a code cell tagged ``slide`` gives a slide for each of its figures (diagrams and results),
  titled with the heading of the section it sits in, the figure scaled to fill the rest of the
  slide; for a widget, the figure it showed when the lesson ran. Its code never appears.

Every deck is then opened in Chromium (where Playwright and Chromium are installed) and every
slide measured (:mod:`~course_lib.course.slide_check`): a slide whose content reaches past its
edges fails the build, named by lesson, slide number and heading.

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

from course_lib.course.execute import execute_cached, executed_cache, with_outputs
from course_lib.course.site import TITLE, site_folder
from course_lib.course.site_widgets import WIDGET_VIEW
from course_lib.course.slide_check import deck_overflows
from course_lib.course.syllabus import COURSE_ROOT, LESSONS, Lesson
from course_lib.course.web_assets import copy_assets

SLIDE_TAG = "slide"
FIGURE_TYPES = ("image/svg+xml", "image/png", "image/jpeg")
STYLE = """
.reveal { font-size: 22px; }
.reveal section { text-align: left; height: 100%; }
.reveal ul, .reveal ol { display: block; }
.reveal h1, .reveal h2, .reveal h3 { text-transform: none; }
.reveal h1 { font-size: 1.6em; } .reveal h2 { font-size: 1.3em; } .reveal h3 { font-size: 1.1em; }
.reveal .slides > section.present.figure { display: flex !important; flex-direction: column; }
.reveal section.figure > img, .reveal section.figure > svg {
  flex: 1 1 0; min-height: 0; width: 100%; max-width: none; max-height: none;
  object-fit: contain; margin: 0; border: 0; box-shadow: none; }
.reveal table { font-size: 0.7em; } .reveal code { font-size: 0.9em; }
.reveal .lesson-title { text-align: center; }
.reveal .slide-number { background-color: #1f4e79; color: #fff; }
.reveal .slide-number a { color: #fff; }
"""
FIGURE_CLASS = ' class="figure"'
# Display equations wider than the slide are scaled down to fit, to no less than 60 % of the
# size MathJax gave them; the browser check reports any that still do not fit.
FIT_MATH = """
function fitMath(slide) {
  for (const box of slide.querySelectorAll('mjx-container[display="true"]')) {
    box.dataset.size = box.dataset.size || box.style.fontSize || '100%';
    const size = parseFloat(box.dataset.size);
    let scale = 1;
    box.style.fontSize = box.dataset.size;
    for (let tries = 0; tries < 4 && box.scrollWidth > box.clientWidth && scale > 0.6; tries++) {
      scale = Math.max(0.6, scale * box.clientWidth / box.scrollWidth);
      box.style.fontSize = (size * scale) + '%';
    }
  }
}
Reveal.on('slidechanged', event => fitMath(event.currentSlide));
MathJax.startup.promise.then(() => fitMath(Reveal.getCurrentSlide()));
"""


@dataclass(frozen=True)
class Slide:
    html: str
    figure: bool = False  # a figure slide: its one figure fills the slide below the heading


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
                    meta = output.get("metadata", {})
                    alt = meta.get("alt") or meta.get(mime, {}).get("alt") or "figure"
                    images.append(f'<img alt="{html.escape(alt)}" src="data:{mime};base64,'
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
            slides += [Slide(page) for page in markdown_pages(source, md)]
        elif cell["cell_type"] == "code":
            images = figures_html(cell, widget_state)
            if not images:
                raise ValueError(f"a code cell tagged {SLIDE_TAG!r} has no figure to show "
                                 f"(section {section!r}, code {source[:60]!r})")
            title = f"<h3>{md.renderInline(section)}</h3>\n" if section else ""
            slides += [Slide(title + image, figure=True) for image in images]
    return slides


# The height (px) of the text one slide holds: reveal.js's 700 px slide less a margin; the
# heights below are estimates, which the browser check verifies.
PAGE_PX = 600
LINE_PX = 22 * 1.3
CHARS_PER_LINE = 76
HEADING_PX = {"h1": 62, "h2": 55, "h3": 50}


MATH = re.compile(r"\$\$?([^$]*)\$\$?")
TEX_MARKUP = re.compile(r"\\[a-zA-Z]+|[{}_^]")
LINK = re.compile(r"\[([^]]*)\]\([^)]*\)")


def text_lines(text: str, indent: int = 0) -> int:
    """How many lines ``text`` takes on a slide: a link by its text, math by about three
    quarters of its TeX without the markup."""
    shown = MATH.sub(lambda math: "x" * (len(TEX_MARKUP.sub("", math.group(1))) * 3 // 4),
                     LINK.sub(r"\1", text))
    return max(1, -(-len(shown) // (CHARS_PER_LINE - indent)))


def block_px(tokens: list) -> float:
    """The estimated height of one top-level Markdown block (its tokens) on a slide."""
    first = tokens[0]
    if first.type == "heading_open":
        return HEADING_PX.get(first.tag, 50)
    if first.type in ("math_block", "math_block_label"):
        rows = first.content.split("\\\\")
        return 44 + sum(60 if re.search(r"\\(frac|sum|prod)", row) else 36 for row in rows)
    if first.type in ("fence", "code_block"):
        return 30 + first.content.count("\n") * 24
    if first.type == "table_open":
        return 30 + sum(t.type == "tr_open" for t in tokens) * 26
    inline = [t.content for t in tokens if t.type == "inline"]
    if first.type.endswith("list_open"):  # one item of a list
        return 4 + sum(text_lines(text, indent=5) * LINE_PX for text in inline)
    return 22 + sum(text_lines(text) * LINE_PX for text in inline)


def grouped(tokens: list) -> list[list]:
    """``tokens`` cut into the blocks of their outermost level."""
    blocks, depth = [], 0
    for token in tokens:
        if depth == 0:
            blocks.append([])
        blocks[-1].append(token)
        depth += token.nesting
    return blocks


def top_level_blocks(tokens: list) -> list[list]:
    """The tokens of a Markdown document, grouped by top-level block; a list gives a block per
    item, each wrapped in the list's own opening and closing tokens (an ordered list's opening
    numbered from its item), so that a list can continue on the next slide."""
    split = []
    for block in grouped(tokens):
        if not block[0].type.endswith("list_open"):
            split.append(block)
            continue
        opening, closing = block[0], block[-1]
        items = grouped(block[1:-1])
        for number, item in enumerate(items, start=int(opening.attrGet("start") or 1)):
            numbered = opening.copy()
            if opening.type == "ordered_list_open" and number > 1:
                numbered.attrSet("start", str(number))
            split.append([numbered if item is not items[0] else opening, *item, closing])
    return split


def joined(page: list[list]) -> list:
    """The tokens of a page's blocks, the items of one list joined back into one list."""
    tokens = []
    for block in page:
        if tokens and tokens[-1] is block[-1] and block[-1].type.endswith("list_close"):
            tokens.pop()  # the same list goes on: drop its closing and the item's opening
            block = block[1:]
        tokens += block
    return tokens


def markdown_pages(source: str, md: MarkdownIt) -> list[str]:
    """The HTML of a Markdown cell, cut between blocks (and list items) into slides of at
    most :data:`PAGE_PX` (estimated); a page after the first repeats the cell's heading."""
    env: dict = {}
    blocks = top_level_blocks(md.parse(source, env))
    heading = blocks[0] if blocks and blocks[0][0].type == "heading_open" else []
    pages, height = [[]], 0.0
    for block in blocks:
        size = block_px(block)
        if pages[-1] and height + size > PAGE_PX and pages[-1] != [heading]:
            pages.append([heading] if heading else [])
            height = block_px(heading) if heading else 0.0
        pages[-1].append(block)
        height += size
    return [md.renderer.render(joined(page), md.options, env) for page in pages]


def deck_html(lesson: Lesson, slides: list[Slide], static: str = "_static") -> str:
    """A whole reveal.js page: a title slide, then ``slides``."""
    title = (f'<section class="lesson-title"><h1>{html.escape(lesson.title)}</h1>'
             f"<p>Lesson {lesson.number} · {html.escape(TITLE)}</p></section>")
    sections = "\n".join(f"<section{FIGURE_CLASS if slide.figure else ''}>\n{slide.html}\n"
                         f"</section>" for slide in slides)
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
{FIT_MATH}
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
                 root: Path = COURSE_ROOT, out: Path | None = None, check: bool = True) -> Path:
    """Write ``NN_slug.html`` for the chosen lessons (all by default) and an ``index.html`` to
    ``out`` (default ``build/slides/<profile>``); return the folder. With ``check``, measure
    every slide in Chromium (where it is installed) and raise :class:`SlidesOverflow` naming
    each slide whose content does not fit."""
    chosen = [lesson for lesson in LESSONS if not lessons or lesson.number in lessons]
    unknown = set(lessons or ()) - {lesson.number for lesson in LESSONS}
    if unknown:
        raise ValueError(f"no lesson numbered {sorted(unknown)}; expected two digits from "
                         f"{LESSONS[0].number} to {LESSONS[-1].number}")
    out = out or root / "build" / "slides" / profile
    copy_assets(out / "_static", widgets=False, reveal=True)
    md, decks = markdown_renderer(), []
    for lesson in chosen:
        print(f"[slides] lesson {lesson.number}", flush=True)
        done = execute_cached(root / lesson.notebook,
                              executed_cache(site_folder(profile, root) / "executed"), profile)
        notebook = with_outputs(json.loads((root / lesson.notebook).read_text()),
                                json.loads(done.executed.read_text()))
        slides = lesson_slides(notebook, md)
        (out / f"{lesson.number}_{lesson.slug}.html").write_text(deck_html(lesson, slides))
        decks.append((lesson, len(slides)))
    (out / "index.html").write_text(index_html(decks))
    if check:
        overflows = deck_overflows(out, [f"{lesson.number}_{lesson.slug}.html"
                                         for lesson, _ in decks])
        if overflows is None:
            print("[slides] Chromium or Playwright is missing: the slides' fit was not measured",
                  flush=True)
        elif overflows:
            raise SlidesOverflow("slides whose content does not fit the slide:\n" +
                                 "\n".join(f"  {o}" for o in overflows))
    return out


class SlidesOverflow(RuntimeError):
    """Some slides' content reaches past the slide's edges."""

