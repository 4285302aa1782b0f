"""What the course's architecture diagrams are made of: boxes, arrows that carry tensors of a
:class:`Shape`, and the :class:`Dims` the shapes' symbols stand for;
:mod:`~course_lib.diagrams.drawing` draws them.

A diagram is data (:class:`Diagram`) before it is a picture, so tests can read it: every arrow
that carries a tensor has a :class:`Shape`, whose symbols (``"(B, S, 2H)"``) are printed in the
picture and whose sizes (``(32, 20, 512)``) are what a model built from the same config returns.
Positions and sizes are in ems of the diagram's text, so a layout keeps its words apart at any
scale.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from course_lib.arguments import check_choice

# Fill colours by what a box is; the legend names them.
KINDS = {
    "input": ("#dbe9f6", "input"),
    "layer": ("#fde2c4", "learned layer"),
    "op": ("#e8e8e8", "no weights"),
    "state": ("#d9f0d3", "kept tensor"),
    "attention": ("#f3d6e8", "attention"),
}
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
    """A box centred at (x, y), in ems of the diagram's text; as wide as its text needs, or
    ``width`` where that is more. ``text`` may hold several lines. Unless ``shows_shape`` is
    false, the box prints the shape of what it outputs (see :meth:`Diagram.box_shapes`)."""

    key: str
    x: float
    y: float
    text: str
    kind: str = "layer"
    width: float = 0.0
    shows_shape: bool = True

    def __post_init__(self) -> None:
        check_choice(f"box {self.key!r}: kind", self.kind, KINDS)


@dataclass(frozen=True)
class Arrow:
    """An arrow from one box to another. ``shape`` is the tensor it carries; ``text`` names it;
    ``dashed`` marks a value carried to the next time step; ``bend`` curves it (matplotlib's
    ``arc3`` radius), or it runs straight through the points ``via``. Its label sits at its
    middle, on ``side`` ("left", "right", "above", "below"; by default above a flat arrow and
    right of a steep one)."""

    start: str
    end: str
    shape: Shape | None = None
    text: str = ""
    dashed: bool = False
    bend: float = 0.0
    side: str = ""
    via: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        if self.side not in ("", "left", "right", "above", "below"):
            raise ValueError(f"arrow {self.start!r} -> {self.end!r}: side must be left, right, "
                             f"above or below, got {self.side!r}")


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

    def describe(self) -> str:
        """The diagram in words, for readers who cannot see it: its title, each box (with the
        shape it outputs) and each arrow (what it carries, dashed ones to the next step)."""
        shapes = self.box_shapes()
        boxes = "; ".join(" ".join(box.text.split()) + (f" (outputs {shapes[box.key]})"
                                                         if box.key in shapes else "")
                          for box in self.boxes)
        arrows = []
        for arrow in self.arrows:
            start, end = (" ".join(self.by_key[k].text.split()) for k in (arrow.start, arrow.end))
            label = self.arrow_label(arrow)
            arrows.append(f"{start} to {end}" + (f" carrying {label}" if label else "")
                          + (" (to the next time step)" if arrow.dashed else ""))
        caption = f" {self.caption}" if self.caption else ""
        return (f"Diagram: {self.title}.{caption} Boxes: {boxes}. Arrows: "
                + "; ".join(arrows) + ".")

    def arrow(self, start: str, end: str) -> Arrow:
        """The arrow from box ``start`` to box ``end``."""
        for arrow in self.arrows:
            if (arrow.start, arrow.end) == (start, end):
                return arrow
        raise KeyError(f"no arrow {start!r} -> {end!r}")

    def shapes(self) -> dict[tuple[str, str], Shape]:
        """Every arrow's shape, keyed by (start, end)."""
        return {(a.start, a.end): a.shape for a in self.arrows if a.shape is not None}

    def box_shapes(self) -> dict[str, Shape]:
        """The boxes that show the shape of what they output: those whose arrows all carry one
        shape. Such a box prints the shape under its text, and its arrows print only their
        names."""
        found: dict[str, set[Shape]] = {}
        for arrow in self.arrows:
            if arrow.shape is not None and self.by_key[arrow.start].shows_shape:
                found.setdefault(arrow.start, set()).add(arrow.shape)
        return {key: next(iter(shapes)) for key, shapes in found.items() if len(shapes) == 1}

    def arrow_label(self, arrow: Arrow) -> str:
        """What ``arrow`` prints: its name, and its shape unless its start box shows it."""
        shape = arrow.shape if arrow.shape != self.box_shapes().get(arrow.start) else None
        return " ".join(part for part in (arrow.text, str(shape) if shape else "") if part)
