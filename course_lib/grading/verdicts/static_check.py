"""What the student's code can reach, read without running it: the grader's static check.

Nothing in the kernel can switch this check off. Which cells are the student's is decided from
the grader's source notebook: every code cell whose text is not one of the source's own
(imports, self-checks with their hidden tests) is the student's, whatever its metadata says.
Each cell is read after IPython's own transformation (magics and ``!`` commands become the calls
the kernel makes; the code ``%time``, ``%timeit`` and ``%%capture`` run is read too), by
:class:`course_lib.grading.verdicts.code_reader.Reader`, and a cell that still does not parse is
reported.

What it finds falls in two kinds (:class:`StaticFindings`):

- **flagged** (the points stand): a visible use of what an exercise re-implements before its
  test cell, an import from ``course_lib`` other than the self-checks in the exercise's own
  cells, a cell that does not parse, and anything found after the last test cell (it can change
  no sealed observation);
- **held** (no points until the instructor has looked): a capability
  (:mod:`course_lib.grading.verdicts.capabilities`) in a cell before the exercise's test cell: it
  holds the exercise it is written in and every later one (observations sealed before it ran are out
  of its reach).

Ordinary code is not held: imports of installed libraries that give no capability (plotting,
timing, warnings, progress bars, data frames, typing, einops, ...), ``getattr`` with a literal
name, and strings, whatever they contain.
"""

from __future__ import annotations

import ast
import copy
import functools
from dataclasses import dataclass, field

from course_lib.grading import hidden
from course_lib.grading.verdicts.capabilities import MAGICS_WITH_CODE
from course_lib.grading.verdicts.code_reader import Reader
from course_lib.grading.verdicts.verdict import is_test_cell


@dataclass
class StaticFindings:
    """``flags``: visible uses of the reference, and what came too late to matter (points
    stand). ``withheld``: capabilities that could reach the grading or hide a call (no points
    until the instructor decides)."""

    flags: list[str] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)


# Which cells are the student's


def grader_sources(source_nb) -> list[str]:
    """The text of every code cell of the grader's source notebook that is not a solution."""
    return [cell.source for cell in source_nb.cells if cell.cell_type == "code"
            and not cell.get("metadata", {}).get("nbgrader", {}).get("solution")]


def test_sources(source_nb) -> dict[str, str]:
    """The source notebook's test cells: {grade_id: text}."""
    return {cell.metadata["nbgrader"]["grade_id"]: cell.source for cell in source_nb.cells
            if is_test_cell(cell)}


@dataclass(frozen=True)
class CellRole:
    """One code cell of a submission: its index, and the test it is (or None: the student's or
    another of the grader's cells)."""

    index: int
    student: bool
    test: str | None = None


def cell_roles(nb, source_nb) -> list[CellRole]:
    """The role of every code cell of ``nb``, decided from ``source_nb`` alone: a cell is a test
    cell when its text is the source's test cell text (the first such cell), the grader's when
    its text is another non-solution cell of the source, and the student's otherwise."""
    waiting: dict[str, list[str]] = {}  # a test cell's text -> its grade_ids still unmatched
    for grade_id, text in test_sources(source_nb).items():
        waiting.setdefault(text, []).append(grade_id)
    ours = set(grader_sources(source_nb))
    roles = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if waiting.get(cell.source):
            roles.append(CellRole(index, False, waiting[cell.source].pop(0)))
        else:
            roles.append(CellRole(index, cell.source not in ours))
    return roles


# Reading one cell


@functools.lru_cache(maxsize=1)
def _transformer():
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager()


def transformed(source: str) -> str:
    """The Python the kernel runs for ``source``: IPython's transformation of magics and
    ``!`` commands."""
    return _transformer().transform_cell(source)


@functools.lru_cache(maxsize=2048)
def parse_cell(source: str) -> tuple[ast.Module | None, str]:
    """(tree, '') or (None, why it does not parse). Cached: every exercise of a notebook reads
    the same cells."""
    try:
        return ast.parse(transformed(source)), ""
    except SyntaxError as error:
        return None, f"SyntaxError: {error.msg} (line {error.lineno})"
    except Exception as error:  # noqa: BLE001 - IPython's transformer may fail on odd text
        return None, f"{type(error).__name__}: {str(error)[:100]}"


def read_magic_code(reader: Reader, magic: str, line: str, body: str | None) -> None:
    """Read the code a magic runs: a cell magic's body whole; on its line, after the options
    (``-n 3``), the longest tail that parses (where the options end is the magic's to decide)."""
    if body is not None:
        tree, problem = parse_cell(body)
        if tree is None:
            reader.flags.append(f"the body of a %%{magic} cell does not parse ({problem}), "
                                f"so it did not run")
        else:
            reader.read(tree, report=reader.reporting)
    words = line.split()
    for start in range(len(words)):
        if words[start].startswith("-"):
            continue
        tree, _ = parse_cell(" ".join(words[start:]))
        if tree is not None:
            reader.read(tree, report=reader.reporting)
            return
    if words and magic in MAGICS_WITH_CODE and magic != "capture" and not all(
            w.startswith("-") for w in words):
        reader.flags.append(f"the code of a %{magic} line does not parse, so it did not run")


# A notebook's findings, by exercise


@dataclass
class CellFindings:
    """What one student cell holds: capabilities, reference uses, course imports, and whether
    it parses."""

    role: CellRole
    held: list[str]
    flags: list[str]
    course_imports: list[str]
    unparsed: str = ""


def read_notebook(nb, roles: list[CellRole], reimplements: tuple[str, ...] = ()
                  ) -> list[CellFindings]:
    """Read every code cell of ``nb`` in order; report the student's. A use of what
    ``reimplements`` names is found by any name bound to the same object
    (:func:`course_lib.grading.hidden.reference_aliases`) and by identity."""
    targets = [hidden.resolve(dotted) for dotted in reimplements]
    reader = Reader(hidden.reference_aliases(reimplements),
                    tuple(t for t in targets if t is not None), read_code=read_magic_code)
    found = []
    for role in roles:
        tree, problem = parse_cell(nb.cells[role.index].source)
        reader.held, reader.flags, reader.course_imports = [], [], []
        if tree is not None:
            reader.read(tree, report=role.student)
        if role.student:
            found.append(CellFindings(role, list(dict.fromkeys(reader.held)),
                                      list(dict.fromkeys(reader.flags)),
                                      list(dict.fromkeys(reader.course_imports)), problem))
    return found


def notebook_findings(nb, source_nb, reimplements: dict[str, tuple[str, ...]]
                      ) -> dict[str, StaticFindings]:
    """What in the student's code deserves the instructor's eye, for each exercise: a
    grade_id of ``reimplements`` (mapped to what that exercise re-implements) gets its findings.

    Held: a capability in a student cell before the exercise's test cell. Flagged: a use of
    what the exercise re-implements before its test cell, an import from ``course_lib`` or a
    cell that does not parse in the exercise's own cells, and a capability or a cell that does
    not parse after the last test cell. The notebook is read once for each distinct
    ``reimplements`` (the reference uses are all that differ).
    """
    roles = cell_roles(nb, source_nb)
    positions = {role.test: role.index for role in roles if role.test}
    reads: dict[tuple[str, ...], list[CellFindings]] = {}
    found = {}
    for grade_id, targets in reimplements.items():
        if grade_id not in positions:
            found[grade_id] = StaticFindings()
            continue
        if tuple(targets) not in reads:
            reads[tuple(targets)] = read_notebook(nb, roles, tuple(targets))
        found[grade_id] = _exercise_findings(reads[tuple(targets)], positions, grade_id)
    return found


def _exercise_findings(cells: list[CellFindings], positions: dict[str, int],
                       grade_id: str) -> StaticFindings:
    here = positions[grade_id]
    before = max((p for p in positions.values() if p < here), default=-1)
    last = max(positions.values())
    found = StaticFindings()
    for cell in cells:
        index = cell.role.index
        where = f"cell {index + 1}"
        if index < here:
            found.flags += cell.flags
        if cell.unparsed and (before < index < here or index > last):
            found.flags.append(f"{where} does not parse ({cell.unparsed}), so it did not run")
        if before < index < here:
            found.flags += cell.course_imports
        if index < here:
            found.withheld += cell.held
        elif index > last:
            found.flags += [f"after the last test cell ({where}): {text}; it could not change a "
                            f"sealed observation" for text in cell.held]
    return StaticFindings(list(dict.fromkeys(found.flags)), list(dict.fromkeys(found.withheld)))


def static_flags(nb, grade_id: str, reimplements: tuple[str, ...], source_nb=None
                 ) -> StaticFindings:
    """:func:`notebook_findings` for one exercise. ``source_nb`` is the grader's source notebook
    (default: ``nb`` itself, for a notebook whose cells carry the source's metadata, such as a
    solution)."""
    source_nb = source_nb if source_nb is not None else _as_source(nb)
    return notebook_findings(nb, source_nb, {grade_id: tuple(reimplements)})[grade_id]


def _as_source(nb):
    """``nb`` read as its own source, for notebooks whose metadata can be trusted (the course's
    solutions, tests): cells with nbgrader metadata that are not solutions are the grader's,
    every other code cell the student's."""
    source = copy.copy(nb)
    source.cells = [cell for cell in nb.cells if cell.get("metadata", {}).get("nbgrader")]
    return source
