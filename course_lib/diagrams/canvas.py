"""The drawing layer of the course's architecture diagrams: boxes, arrows labelled with tensor
shapes, and one function that draws them with matplotlib.

A diagram is data (:class:`Diagram`) before it is a picture, so tests can read it: every arrow
that carries a tensor has a :class:`Shape`, whose symbols (``"(B, S, 2H)"``) are printed on the
arrow and whose sizes (``(32, 20, 512)``) are what a model built from the same config returns.
The palette is fixed, with dark text on light boxes over an opaque white background, so a
diagram reads the same in JupyterLab's light and dark themes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

# Fill colours by what a box is; the legend names them.
KINDS = {
    "input": ("#dbe9f6", "input or output tokens / pixels"),
    "layer": ("#fde2c4", "learned layer"),
    "op": ("#e8e8e8", "operation without weights"),
    "state": ("#d9f0d3", "vector or tensor the model keeps"),
    "attention": ("#f3d6e8", "attention"),
}
INK = "#1a1a1a"
INCH = 0.62  # inches per diagram unit: 9-point text fits a box 1.8 units wide
_DIM = re.compile(r"^(\d*)([A-Za-z_][A-Za-z_0-9']*(?:·[A-Za-z_][A-Za-z_0-9']*)*)?$")


@dataclass(frozen=True)
class Shape:
    """A tensor shape in symbols and in numbers: ``Shape(("B", "S", "2H"), (32, 20, 512))``."""

    symbols: tuple[str, ...]
    sizes: tuple[int, ...]

    def __str__(self) -> str:
        return f"({', '.join(self.symbols)})"


@dataclass(frozen=True)
class Dims:
    """The sizes behind the symbols of one diagram. ``dims("B", "S", "2H")`` is the
    :class:`Shape` of those symbols; a symbol is a sum (``"E+H"``) of terms, each a name or a
    product of names joined by ``·`` (``"h·d_k"``) with an optional leading integer (``"2H"``),
    or a plain integer."""

    sizes: Mapping[str, int]

    def size(self, symbol: str) -> int:
        return sum(self._term(term, symbol) for term in symbol.split("+"))

    def _term(self, term: str, symbol: str) -> int:
        match = _DIM.match(term)
        if not term or match is None:
            raise ValueError(f"cannot read the dimension {symbol!r}: expected names joined by "
                             f"'·' or '+', each term with an optional leading integer")
        factor, names = match.groups()
        size = int(factor) if factor else 1
        for name in names.split("·") if names else ():
            if name not in self.sizes:
                raise ValueError(f"dimension {name!r} has no size; known: "
                                 f"{', '.join(sorted(self.sizes))}")
            size *= self.sizes[name]
        return size

    def __call__(self, *symbols: str) -> Shape:
        return Shape(tuple(symbols), tuple(self.size(s) for s in symbols))


@dataclass(frozen=True)
class Box:
    """A box centred at (x, y), in the diagram's own units (one unit is about 1.1 cm)."""

    key: str
    x: float
    y: float
    text: str
    kind: str = "layer"
    width: float = 1.8
    height: float = 0.6

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"box {self.key!r}: kind must be one of {sorted(KINDS)}, "
                             f"got {self.kind!r}")


@dataclass(frozen=True)
class Arrow:
    """An arrow from one box to another. ``shape`` is the tensor it carries (printed beside it);
    ``text`` a label without a shape; ``dashed`` marks a value carried to the next time step."""

    start: str
    end: str
    shape: Shape | None = None
    text: str = ""
    dashed: bool = False
    bend: float = 0.0

    @property
    def label(self) -> str:
        parts = [self.text] if self.text else []
        if self.shape is not None:
            parts.append(str(self.shape))
        return " ".join(parts)


@dataclass
class Diagram:
    """Boxes, the arrows between them, and the sizes their shape labels stand for."""

    title: str
    boxes: Sequence[Box]
    arrows: Sequence[Arrow]
    dims: Dims
    caption: str = ""
    by_key: dict[str, Box] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.by_key = {}
        for box in self.boxes:
            if box.key in self.by_key:
                raise ValueError(f"two boxes have the key {box.key!r}")
            self.by_key[box.key] = box
        for arrow in self.arrows:
            missing = [k for k in (arrow.start, arrow.end) if k not in self.by_key]
            if missing:
                raise ValueError(f"arrow {arrow.start!r} -> {arrow.end!r} names no box "
                                 f"{missing}; boxes: {', '.join(self.by_key)}")

    def arrow(self, start: str, end: str) -> Arrow:
        """The arrow from box ``start`` to box ``end``."""
        for arrow in self.arrows:
            if (arrow.start, arrow.end) == (start, end):
                return arrow
        raise KeyError(f"no arrow {start!r} -> {end!r}")

    def shapes(self) -> dict[tuple[str, str], Shape]:
        """Every arrow's shape, keyed by (start, end)."""
        return {(a.start, a.end): a.shape for a in self.arrows if a.shape is not None}


def _edge_point(box: Box, width: float, toward: tuple[float, float]) -> tuple[float, float]:
    """Where the line from the centre of ``box`` (drawn ``width`` wide) to ``toward`` leaves
    the box."""
    dx, dy = toward[0] - box.x, toward[1] - box.y
    if dx == dy == 0:
        return box.x, box.y
    scale = min(width / 2 / abs(dx) if dx else float("inf"),
                box.height / 2 / abs(dy) if dy else float("inf"))
    return box.x + dx * scale, box.y + dy * scale


def _text_widths(ax: plt.Axes, boxes: Sequence[Box]) -> dict[str, float]:
    """Each box's width: its own, or wider where its text needs it (in data units)."""
    renderer = ax.figure.canvas.get_renderer()
    to_data = ax.transData.inverted()
    widths = {}
    for box in boxes:
        text = ax.text(box.x, box.y, box.text, ha="center", va="center", fontsize=9)
        extent = text.get_window_extent(renderer)
        (x0, _), (x1, _) = to_data.transform([(extent.x0, 0), (extent.x1, 0)])
        widths[box.key] = max(box.width, x1 - x0 + 0.4)
        text.remove()
    return widths


def _label(ax: plt.Axes, arrow: Arrow, tail: tuple[float, float],
           head: tuple[float, float]) -> None:
    """The arrow's label at its middle: above a flat arrow, beside a steep one."""
    dx, dy = head[0] - tail[0], head[1] - tail[1]
    # the middle of matplotlib's arc3 curve: halfway from the chord's middle to its control point
    x = (tail[0] + head[0]) / 2 + arrow.bend / 2 * dy
    y = (tail[1] + head[1]) / 2 - arrow.bend / 2 * dx
    flat = abs(head[0] - tail[0]) > abs(head[1] - tail[1])
    ax.text(x, y + 0.08 if flat else y, arrow.label.replace(" (", "\n(") if flat else
            " " + arrow.label, fontsize=7.5, color="#1f3f7a", ha="center" if flat else "left",
            va="bottom" if flat else "center", linespacing=1.0,
            bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5})


def draw(diagram: Diagram, ax: plt.Axes | None = None, legend: bool = True) -> plt.Figure:
    """Draw ``diagram`` on ``ax`` (a new figure sized to the diagram by default)."""
    xs = [b.x - b.width / 2 for b in diagram.boxes] + [b.x + b.width / 2 for b in diagram.boxes]
    ys = [b.y - b.height / 2 for b in diagram.boxes] + [b.y + b.height / 2 for b in diagram.boxes]
    left, right, bottom, top = min(xs) - 0.6, max(xs) + 0.6, min(ys) - 0.5, max(ys) + 0.5
    if ax is None:
        _, ax = plt.subplots(figsize=(INCH * (right - left), INCH * (top - bottom) + 1.2))
    figure = ax.figure
    figure.patch.set_facecolor("white")
    ax.set_facecolor("white")
    ax.set_xlim(left, right)
    ax.set_ylim(bottom, top)
    ax.set_aspect("equal")
    widths = _text_widths(ax, diagram.boxes)
    for box in diagram.boxes:
        width = widths[box.key]
        ax.add_patch(FancyBboxPatch((box.x - width / 2, box.y - box.height / 2), width,
                                    box.height, boxstyle="round,pad=0.02,rounding_size=0.12",
                                    facecolor=KINDS[box.kind][0], edgecolor=INK, linewidth=1))
        ax.text(box.x, box.y, box.text, ha="center", va="center", fontsize=9, color=INK)
    for arrow in diagram.arrows:
        start, end = diagram.by_key[arrow.start], diagram.by_key[arrow.end]
        tail = _edge_point(start, widths[start.key], (end.x, end.y))
        head = _edge_point(end, widths[end.key], (start.x, start.y))
        ax.add_patch(FancyArrowPatch(tail, head, arrowstyle="-|>", mutation_scale=12, color=INK,
                                     linewidth=1, linestyle="--" if arrow.dashed else "-",
                                     connectionstyle=f"arc3,rad={arrow.bend}"))
        if arrow.label:
            _label(ax, arrow, tail, head)
    if legend:
        used = list(dict.fromkeys(box.kind for box in diagram.boxes))
        handles = [plt.Rectangle((0, 0), 1, 1, facecolor=KINDS[k][0], edgecolor=INK)
                   for k in used]
        ax.legend(handles, [KINDS[k][1] for k in used], loc="upper center", fontsize=8,
                  bbox_to_anchor=(0.5, 0.0), ncol=min(3, len(used)), frameon=False)
    sizes = ", ".join(f"{k} = {v}" for k, v in diagram.dims.sizes.items())
    ax.set_title("\n".join(line for line in (diagram.title, sizes) if line), fontsize=10,
                 color=INK, pad=16 if diagram.caption else 6)
    if diagram.caption:
        ax.text(0.5, 1.0, diagram.caption, transform=ax.transAxes, ha="center", va="bottom",
                fontsize=8, color=INK, style="italic")
    ax.axis("off")
    return figure
