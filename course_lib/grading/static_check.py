"""What the student's code does, read without running it: the grader's static check.

Nothing in the kernel can switch this check off. It sorts what it finds in two kinds
(:class:`StaticFindings`): visible uses of what an exercise re-implements, which are flagged for
the instructor while the points stand, and code that hides what it runs, which holds the points
until the instructor has looked.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from course_lib.grading import hidden
from course_lib.grading.verdict import is_test_cell

ALLOWED_COURSE_IMPORT = "course_lib.grading.checks"
# What an exercise's own cells may import: torch's public modules and plain computing. Anything
# else (importlib, pkgutil, sys, os, threading, a module shipped beside the notebook, ...) can
# hide what the code runs, so it withholds the points until the instructor has looked.
ALLOWED_MODULES = frozenset({
    "torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.linalg",
    "torch.special", "torch.fft", "torch.distributions", "torch.autograd",
    "math", "cmath", "numpy", "random", "statistics", "fractions", "decimal", "numbers",
    "collections", "collections.abc", "itertools", "functools", "heapq", "bisect", "copy",
    "typing", "dataclasses", "enum", "abc", "string", "re", "__future__",
    ALLOWED_COURSE_IMPORT})
# Names and attributes that reach objects by a name computed at run time.
RUN_TIME_NAMES = frozenset({
    "getattr", "setattr", "delattr", "vars", "globals", "locals", "__import__", "exec", "eval",
    "compile", "get_ipython", "breakpoint", "__builtins__", "__loader__", "__spec__"})
RUN_TIME_ATTRIBUTES = frozenset({
    "__dict__", "__globals__", "__builtins__", "__code__", "__closure__", "__subclasses__",
    "__getattribute__", "__base__", "__bases__", "__mro__", "__loader__", "__spec__",
    "f_globals", "f_locals", "f_back", "f_builtins", "gi_frame", "cr_frame", "tb_frame",
    "attrgetter", "methodcaller"})
DOTTED_NAME = re.compile(r"(course_lib|torch|builtins|sys|importlib)(\.[A-Za-z_]\w*)+")


def is_student_code(cell) -> bool:
    """Cells a student may write: solution cells and cells without nbgrader metadata."""
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "code" and (meta.get("solution") or not meta)


def parsed_cells(nb, wanted):
    """(index, syntax tree) of every cell ``wanted(cell)`` accepts that parses."""
    for index, cell in enumerate(nb.cells):
        if wanted(cell):
            try:
                yield index, ast.parse(cell.source)
            except SyntaxError:
                continue


def exercise_regions(nb) -> dict[str, list[int]]:
    """For each test cell's grade_id, the indices of the student code cells since the last one."""
    regions, pending = {}, []
    for index, cell in enumerate(nb.cells):
        if is_test_cell(cell):
            regions[cell.metadata["nbgrader"]["grade_id"]] = pending
            pending = []
        elif is_student_code(cell):
            pending.append(index)
    return regions


@dataclass
class StaticFindings:
    """``flags``: visible uses of the reference (points stand). ``withheld``: code that hides
    what it runs (no points until the instructor decides)."""

    flags: list[str] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)


def static_flags(nb, grade_id: str, reimplements: tuple[str, ...]) -> StaticFindings:
    """What in the student's code deserves the instructor's eye for exercise ``grade_id``.

    Anywhere in the student's cells, flagged: a use of a re-implemented name, or of any other
    name bound to the same object (:func:`course_lib.grading.hidden.reference_aliases`), as an
    attribute or an import. In the exercise's own cells, flagged: an import from ``course_lib``
    other than the self-checks. Withheld, in the exercise's own cells: what an exercise does not
    allow, whatever it is called: imports beyond :data:`ALLOWED_MODULES`, names resolved at run
    time (``getattr``, ``vars``, ``globals``, ``exec``, ``__dict__``, dotted names in strings,
    ...), and private torch names (``torch._*``, ``torch.ops``).
    """
    targets = hidden.reference_aliases(reimplements)
    regions = exercise_regions(nb)
    own = set(regions.get(grade_id, []))
    torch_names = _torch_module_names(nb)
    found = StaticFindings()
    for index, tree in parsed_cells(nb, is_student_code):
        # a chain a.b.c is read once, at its outermost attribute, not again as a.b and a
        inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        for node in ast.walk(tree):
            found.flags += _reference_uses(node, targets)
            if index in own:
                found.flags += _course_imports(node)
                if id(node) not in inner or not isinstance(node, ast.Attribute):
                    found.withheld += _not_allowed(node, torch_names)
    return StaticFindings(list(dict.fromkeys(found.flags)), list(dict.fromkeys(found.withheld)))


def _reference_uses(node, targets: set[str]) -> list[str]:
    if isinstance(node, ast.Attribute) and node.attr in targets:
        return [f"uses {_unparsed(node)}, which this exercise re-implements"]
    if isinstance(node, ast.ImportFrom):
        return [f"imports {a.name} from {node.module}, which this exercise re-implements"
                for a in node.names if a.name in targets]
    return []


def _imported_modules(node) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        return ["." * node.level + (node.module or "")]
    return []


def _course_imports(node) -> list[str]:
    return [f"imports {m}" for m in _imported_modules(node)
            if m.split(".")[0] == "course_lib" and m != ALLOWED_COURSE_IMPORT]


def _not_allowed(node, torch_names: set[str]) -> list[str]:
    found = [f"imports {m}, which exercises do not allow" for m in _imported_modules(node)
             if m not in ALLOWED_MODULES and m.split(".")[0] != "course_lib"]
    if isinstance(node, ast.ImportFrom) and node.module in ALLOWED_MODULES:
        found += [f"imports {a.name} from {node.module}, a private name"
                  for a in node.names if a.name.startswith("_")]
    if isinstance(node, ast.Name) and node.id in RUN_TIME_NAMES:
        found.append(f"resolves names at run time ({node.id})")
    if isinstance(node, ast.Attribute):
        root, attributes = _attribute_path(node)
        found += [f"resolves names at run time ({part})" for part in attributes
                  if part in RUN_TIME_ATTRIBUTES]
        chain = [root.id, *attributes] if isinstance(root, ast.Name) else []
        if chain and chain[0] in torch_names and any(
                part == "ops" or (part.startswith("_") and not part.endswith("__"))
                for part in chain[1:]):
            found.append(f"uses {'.'.join(chain)}, a private torch name")
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
            DOTTED_NAME.fullmatch(node.value.strip()):
        found.append(f"names {node.value.strip()[:80]} in a string")
    return found


def _attribute_path(node) -> tuple[ast.AST, list[str]]:
    """``a.b.c`` as (the node ``a``, ["b", "c"]), whatever ``a`` is."""
    attributes = []
    while isinstance(node, ast.Attribute):
        attributes.append(node.attr)
        node = node.value
    return node, attributes[::-1]


def _torch_module_names(nb) -> set[str]:
    """Names the notebook binds to torch or one of its modules (``torch``, ``F``, ``nn``...)."""
    names = {"torch"}
    for _, tree in parsed_cells(nb, lambda cell: cell.cell_type == "code"):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {(a.asname or a.name).split(".")[0] for a in node.names
                          if a.name.split(".")[0] == "torch"}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] \
                    == "torch":
                names |= {a.asname or a.name for a in node.names}
    return names


def _unparsed(node) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 80 else text[:77] + "..."
