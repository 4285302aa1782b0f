"""Draw a :class:`~course_lib.diagrams.canvas.Diagram` with matplotlib, every word at one size.

Coordinates are ems of :data:`FONT_PT` text, and the figure is as large as its content: boxes,
the labels of their arrows, a title with the sizes the symbols stand for, a legend of the box
colours and a caption. :data:`FONT_PT` is large enough that the text reads at least at the body
text's size in the lab, on the site and on a slide (:mod:`~course_lib.diagrams.display`) for
any diagram within :func:`~course_lib.diagrams.display.largest_ems`; the diagrams' tests check
every diagram a lesson draws. The palette is fixed, with dark text on light boxes over an opaque
white background, so a diagram reads the same in JupyterLab's light and dark themes.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle
from matplotlib.path import Path

from course_lib.diagrams.canvas import KINDS, Arrow, Box, Diagram, Shape
from course_lib.diagrams.display import largest_ems

FONT_PT = 12.0
EM = FONT_PT / 72  # inches per diagram unit
LINE = 1.3  # ems from one line of text to the next
PAD = 0.45  # ems between a box's text and its edge
INK, LABEL_INK = "#1a1a1a", "#1f3f7a"


@dataclass(frozen=True)
class Placed:
    """A text at (x, y) with its alignment, and the rectangle it covers (in ems)."""

    x: float
    y: float
    text: str
    ha: str
    va: str
    extent: tuple[float, float, float, float]  # x0, y0, x1, y1
    style: dict


class Measure:
    """Text sizes in ems, from the figure's renderer."""

    def __init__(self, figure: plt.Figure) -> None:
        self.figure = figure
        self.renderer = figure.canvas.get_renderer()
        self.px_per_em = FONT_PT / 72 * figure.dpi

    def size(self, text: str, **style) -> tuple[float, float]:
        artist = self.figure.text(0, 0, text, fontsize=FONT_PT, **style)
        extent = artist.get_window_extent(self.renderer)
        artist.remove()
        return extent.width / self.px_per_em, extent.height / self.px_per_em

    def place(self, x: float, y: float, text: str, ha: str = "center", va: str = "center",
              **style) -> Placed:
        width, height = self.size(text, **style)
        x0 = {"left": x, "center": x - width / 2, "right": x - width}[ha]
        y0 = {"bottom": y, "center": y - height / 2, "top": y - height}[va]
        return Placed(x, y, text, ha, va, (x0, y0, x0 + width, y0 + height), style)


def box_size(box: Box, shape: str, measure: Measure) -> tuple[float, float]:
    """A box's width and height in ems: its text and the shape it shows (if any), with
    :data:`PAD` around them."""
    lines = box.text.split("\n") + ([shape] if shape else [])
    width = max(measure.size(line)[0] for line in lines)
    return max(box.width, width + 2 * PAD), len(lines) * LINE + 2 * PAD - 0.3


def edge_point(box: Box, size: tuple[float, float], toward: tuple[float, float]
               ) -> tuple[float, float]:
    """Where the line from the centre of ``box`` to ``toward`` leaves the box."""
    dx, dy = toward[0] - box.x, toward[1] - box.y
    if dx == dy == 0:
        return box.x, box.y
    scale = min(size[0] / 2 / abs(dx) if dx else float("inf"),
                size[1] / 2 / abs(dy) if dy else float("inf"))
    return box.x + dx * scale, box.y + dy * scale


def place_label(arrow: Arrow, text: str, tail: tuple[float, float], head: tuple[float, float],
                measure: Measure) -> Placed:
    """The arrow's label at its middle (of its middle stretch, when it runs through points):
    above a flat arrow, right of a steep one, or on the side the arrow names."""
    points = [tail, *arrow.via, head]
    tail, head = points[(len(points) - 1) // 2], points[(len(points) - 1) // 2 + 1]
    dx, dy = head[0] - tail[0], head[1] - tail[1]
    # the middle of matplotlib's arc3 curve: halfway from the chord's middle to its control point
    x = (tail[0] + head[0]) / 2 + arrow.bend / 2 * dy
    y = (tail[1] + head[1]) / 2 - arrow.bend / 2 * dx
    side = arrow.side or ("above" if abs(dx) > abs(dy) else "right")
    gap = 0.35
    at_x, at_y, ha, va = {"above": (x, y + gap, "center", "bottom"),
                          "below": (x, y - gap, "center", "top"),
                          "right": (x + gap, y, "left", "center"),
                          "left": (x - gap, y, "right", "center")}[side]
    return measure.place(at_x, at_y, text, ha, va, color=LABEL_INK)


def wrap(text: str, width: float, measure: Measure, between: str = " ", **style) -> list[str]:
    """``text`` in lines no wider than ``width`` ems, broken at ``between`` (which ends the
    line it breaks)."""
    lines: list[str] = []
    for word in text.split(between) if text else []:
        joined = f"{lines[-1]}{between}{word}" if lines else word
        if lines and measure.size(joined + between.rstrip(), **style)[0] <= width:
            lines[-1] = joined
        else:
            if lines:
                lines[-1] += between.rstrip()
            lines.append(word)
    return lines


DASHED = "dashed"  # the legend's entry for the arrows that carry a value to the next step
DASHED_TEXT = "next step"


def legend_rows(kinds: list[str], width: float, measure: Measure) -> list[list[tuple[str, float]]]:
    """The legend's entries (kind, or :data:`DASHED`, with its width in ems) in rows no wider
    than ``width``."""
    rows: list[list[tuple[str, float]]] = [[]]
    for kind in kinds:
        entry = 1.3 + measure.size(legend_text(kind))[0]
        used = sum(w for _, w in rows[-1]) + 1.0 * len(rows[-1])
        if rows[-1] and used + entry > width:
            rows.append([])
        rows[-1].append((kind, entry))
    return rows


def legend_text(kind: str) -> str:
    return DASHED_TEXT if kind == DASHED else KINDS[kind][1]


def frame_texts(diagram: Diagram, bounds: list[float], measure: Measure, legend: bool
                ) -> tuple[list[Placed], list[tuple[str, float, float]]]:
    """The title and the sizes above the content, the legend and the caption below it; the
    legend's swatches as (kind, x, y). ``bounds`` (x0, y0, x1, y1) grows to hold them."""
    x0, y0, x1, y1 = bounds
    # captions and sizes wrap at the content's width, or a little less than the widest figure
    width, centre = max(x1 - x0, largest_ems()[0] - 4), (x0 + x1) / 2
    sizes = ", ".join(f"{k} = {v}" for k, v in diagram.dims.sizes.items())
    lines = wrap(sizes, width, measure, ", ")
    texts = [measure.place(centre, y1 + 0.6 + LINE * i, line, va="bottom", color=INK)
             for i, line in enumerate(reversed(lines))]
    texts.append(measure.place(centre, y1 + 0.6 + LINE * len(lines), diagram.title,
                               va="bottom", color=INK, fontweight="bold"))
    y, swatches = y0 - 0.4, []
    used = list(dict.fromkeys(box.kind for box in diagram.boxes)) if legend else []
    if legend and any(arrow.dashed for arrow in diagram.arrows):
        used.append(DASHED)
    for row in legend_rows(used, width, measure) if used else []:
        y -= LINE
        x = centre - (sum(w for _, w in row) + 1.0 * (len(row) - 1)) / 2
        for kind, entry in row:
            swatches.append((kind, x, y))
            texts.append(measure.place(x + 1.3, y, legend_text(kind), ha="left", color=INK))
            x += entry + 1.0
    y -= 0.2
    for line in wrap(diagram.caption, width, measure, style="italic"):
        y -= LINE
        texts.append(measure.place(centre, y, line, color=INK, style="italic"))
    for text in texts:
        bounds[:] = [min(bounds[0], text.extent[0]), min(bounds[1], text.extent[1]),
                     max(bounds[2], text.extent[2]), max(bounds[3], text.extent[3])]
    return texts, swatches


def draw(diagram: Diagram, ax: plt.Axes | None = None, legend: bool = True) -> plt.Figure:
    """Draw ``diagram`` on ``ax`` (by default a new figure as large as the diagram)."""
    figure = ax.figure if ax is not None else plt.figure()
    measure = Measure(figure)
    shown = diagram.box_shapes()
    sizes = {box.key: box_size(box, str(shown.get(box.key, '')), measure) for box in diagram.boxes}
    ends, labels = [], []
    for arrow in diagram.arrows:
        start, end = diagram.by_key[arrow.start], diagram.by_key[arrow.end]
        tail = edge_point(start, sizes[start.key], arrow.via[0] if arrow.via else (end.x, end.y))
        head = edge_point(end, sizes[end.key], arrow.via[-1] if arrow.via else (start.x, start.y))
        ends.append((arrow, tail, head))
        text = diagram.arrow_label(arrow)
        if text:
            labels.append(place_label(arrow, text, tail, head, measure))
    rects = [(b.x - sizes[b.key][0] / 2, b.y - sizes[b.key][1] / 2, b.x + sizes[b.key][0] / 2,
              b.y + sizes[b.key][1] / 2) for b in diagram.boxes] + [t.extent for t in labels]
    bounds = [min(r[0] for r in rects), min(r[1] for r in rects), max(r[2] for r in rects),
              max(r[3] for r in rects)]
    frame, swatches = frame_texts(diagram, bounds, measure, legend)
    bounds = [bounds[0] - 0.2, bounds[1] - 0.2, bounds[2] + 0.2, bounds[3] + 0.2]
    if ax is None:
        figure.set_size_inches((bounds[2] - bounds[0]) * EM, (bounds[3] - bounds[1]) * EM)
        ax = figure.add_axes((0, 0, 1, 1))
    figure.patch.set_facecolor("white")
    ax.set_facecolor("white")
    ax.set_xlim(bounds[0], bounds[2])
    ax.set_ylim(bounds[1], bounds[3])
    ax.set_aspect("equal")
    ax.axis("off")
    for box in diagram.boxes:
        draw_box(ax, box, sizes[box.key], shown.get(box.key))
    for arrow, tail, head in ends:
        style = {"arrowstyle": "-|>", "mutation_scale": 14, "color": INK, "linewidth": 1.2,
                 "linestyle": "--" if arrow.dashed else "-", "zorder": 1}
        if arrow.via:
            ax.add_patch(FancyArrowPatch(path=Path([tail, *arrow.via, head]), **style))
        else:
            ax.add_patch(FancyArrowPatch(tail, head, connectionstyle=f"arc3,rad={arrow.bend}",
                                         **style))
    for text in labels:
        ax.text(text.x, text.y, text.text, ha=text.ha, va=text.va, fontsize=FONT_PT, zorder=4,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0}, **text.style)
    for text in frame:
        ax.text(text.x, text.y, text.text, ha=text.ha, va=text.va, fontsize=FONT_PT, **text.style)
    for kind, x, y in swatches:
        if kind == DASHED:
            ax.add_patch(FancyArrowPatch((x - 0.2, y), (x + 1.1, y), arrowstyle="-|>",
                                         mutation_scale=10, color=INK, linestyle="--"))
        else:
            ax.add_patch(Rectangle((x, y - 0.45), 1.0, 0.9, facecolor=KINDS[kind][0],
                                   edgecolor=INK))
    figure.course_alt = diagram.describe()  # the text alternative (course_lib.figure_text)
    return figure


def draw_box(ax: plt.Axes, box: Box, size: tuple[float, float], shape: Shape | None) -> None:
    """A rounded box with its text, and under it the shape it outputs (when it shows one)."""
    width, height = size
    ax.add_patch(FancyBboxPatch((box.x - width / 2, box.y - height / 2), width, height,
                                boxstyle="round,pad=0,rounding_size=0.4", zorder=2,
                                facecolor=KINDS[box.kind][0], edgecolor=INK, linewidth=1.2))
    lines = box.text.count("\n") + 1
    lift = LINE / 2 if shape is not None else 0.0
    ax.text(box.x, box.y + lift, box.text, ha="center", va="center", fontsize=FONT_PT,
            color=INK, linespacing=1.15, zorder=3)
    if shape is not None:
        ax.text(box.x, box.y + lift - (lines + 1) * LINE / 2, str(shape), ha="center",
                va="center", fontsize=FONT_PT, color=LABEL_INK, zorder=3)
