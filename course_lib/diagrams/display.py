"""Where the course's figures are shown, and how large their text is there.

A PNG figure made in a lesson is shown three ways: in JupyterLab at its natural size (the inline
backend saves it at ``figure.dpi``, 100, cropped to its content), on the site scaled down to the
width of the page's content, and on a slide scaled up or down to fill the slide's figure area.
:data:`DISPLAYS` holds each one's body text size and the area an image gets, measured in
Chromium at a 1280 × 800 window (the site) and at reveal.js's 960 × 700 slide (the slides);
:func:`shown_text_px` says how many CSS pixels a font size becomes, so a test can hold every
diagram's words to at least the body text's size wherever they are shown.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt

DPI = 100  # matplotlib's figure.dpi, which the lab's inline backend and the site's PNGs keep
POINT = 1 / 72  # inches


@dataclass(frozen=True)
class Display:
    """A place a figure is shown: the size of its body text, and the area (CSS px) an image
    gets. Where ``fills``, an image is scaled up or down to fit the area; elsewhere it is only
    scaled down, to the area's width."""

    name: str
    body_px: float
    width_px: float
    height_px: float | None = None
    fills: bool = False

    def scale(self, size_px: tuple[float, float]) -> float:
        """How much an image of ``size_px`` (width, height) is scaled where it is shown."""
        width, height = size_px
        scale = self.width_px / width
        if self.height_px is not None:
            scale = min(scale, self.height_px / height)
        return scale if self.fills else min(1.0, scale)


# JupyterLab's --jp-content-font-size1; 800 px is narrower than a notebook's cell area beside
# the open file browser in a 1400 px window (about 960 px in the browser test's screenshot)
LAB = Display("lab", body_px=14, width_px=800)
SITE = Display("site", body_px=16, width_px=688)  # the book theme's cell output width
# the slide's figure area: reveal.js's 960 × 700 slide less the heading above the figure
SLIDES = Display("slides", body_px=22, width_px=940, height_px=620, fills=True)
DISPLAYS = (LAB, SITE, SLIDES)


def natural_size_px(figure: plt.Figure) -> tuple[float, float]:
    """The size of the PNG the lab's inline backend makes of ``figure`` (``bbox_inches=
    "tight"``, with matplotlib's padding), in pixels at :data:`DPI`."""
    bbox = figure.get_tightbbox(figure.canvas.get_renderer())
    pad = plt.rcParams["savefig.pad_inches"]
    return (bbox.width + 2 * pad) * DPI, (bbox.height + 2 * pad) * DPI


def shown_text_px(font_pt: float, size_px: tuple[float, float], display: Display) -> float:
    """The CSS pixel size of ``font_pt`` text in an image of ``size_px`` shown on ``display``."""
    return font_pt * POINT * DPI * display.scale(size_px)


def largest_ems() -> tuple[float, float]:
    """The widest and the tallest image, in ems of its text, whose text (at least body size in
    the image itself) is still shown at least at body size on every display."""
    return (min(display.width_px / display.body_px for display in DISPLAYS),
            min(display.height_px / display.body_px for display in DISPLAYS
                if display.height_px is not None))


def _overlap(a, b, tolerance: float = 0.5) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > tolerance
            and min(a.y1, b.y1) - max(a.y0, b.y0) > tolerance)


def text_problems(figure: plt.Figure) -> list[str]:
    """What keeps the words of ``figure`` from being read, one line each: a text smaller than
    the body text on some display, a text that leaves the figure, two texts that overlap, a text
    and a box (other than the box that holds it) or two boxes that overlap."""
    from matplotlib.patches import FancyBboxPatch

    renderer = figure.canvas.get_renderer()
    size = natural_size_px(figure)
    texts = [t for t in [*figure.texts, *(t for ax in figure.axes for t in ax.texts)]
             if t.get_visible() and t.get_text().strip()]
    extents = [t.get_window_extent(renderer) for t in texts]
    boxes = [p.get_window_extent(renderer) for ax in figure.axes for p in ax.patches
             if isinstance(p, FancyBboxPatch)]
    problems = []
    for text, extent in zip(texts, extents, strict=True):
        name = repr(text.get_text())
        for display in DISPLAYS:
            shown = shown_text_px(text.get_fontsize(), size, display)
            if shown < display.body_px:
                problems.append(f"{name} is {shown:.1f} px on the {display.name}, whose body "
                                f"text is {display.body_px} px")
        if not figure.bbox.contains(extent.x0, extent.y0) or \
                not figure.bbox.contains(extent.x1, extent.y1):
            problems.append(f"{name} leaves the figure")
    named = [(repr(t.get_text()), e, False) for t, e in zip(texts, extents, strict=True)]
    named += [(f"the box at ({b.x0:.0f}, {b.y0:.0f}) px", b, True) for b in boxes]
    for i, (first, a, _) in enumerate(named):
        for second, b, is_box in named[i + 1:]:
            holds = is_box and b.contains(a.x0, a.y0) and b.contains(a.x1, a.y1)
            if _overlap(a, b) and not holds:  # a box may hold its own text
                problems.append(f"{first} overlaps {second}")
    return problems
