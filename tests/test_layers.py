"""The package keeps the layout docs/layout.md describes: layers that import only downwards, no
import cycle (imports inside functions count), and modules and functions small enough to read.

The imports are read from the source with ``ast``, so a rule is checked for every module,
including code paths no test runs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "course_lib"
CORE = {"arguments", "device", "seeding", "profile", "metrics", "viz", "viz_images", "timing"}
SUBPACKAGES = {"nn", "models", "data", "train", "diagrams", "lessons", "experiments", "course",
               "grading"}
# What each layer must never import (a layer also may not import a layer above it).
FORBIDDEN = {
    "core": {"nn", "models", "data", "train", "diagrams", "lessons", "experiments", "course",
             "grading"},
    "nn": {"models", "train", "diagrams", "lessons", "experiments", "course", "grading"},
    "data": {"models", "train", "diagrams", "lessons", "experiments", "course", "grading"},
    "models": {"train", "diagrams", "lessons", "experiments", "course", "grading"},
    "diagrams": {"train", "lessons", "experiments", "course", "grading"},
    "train": {"diagrams", "lessons", "experiments", "course", "grading"},
    "lessons": {"experiments", "course", "grading"},
    "grading": {"experiments", "lessons"},
}
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every course_lib module ``path`` imports, anywhere in the file."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            # `from course_lib.nn import attention` imports the module course_lib.nn.attention
            found |= {f"{target}.{alias.name}" for alias in node.names}
    modules = set(MODULES)
    return {m for m in found if m in modules and m != name}


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return "entry point"  # `python -m course_lib` runs course.cli
    return parts[1] if parts[1] in SUBPACKAGES else "core"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import that breaks a layer rule, as 'a imports b (why)'."""
    problems = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            source_layer, target_layer = layer(module), layer(target)
            if target_layer in FORBIDDEN.get(source_layer, set()):
                problems.append(f"{module} imports {target} ({source_layer} may not import "
                                f"{target_layer})")
            elif (target_layer == "experiments" and source_layer != "experiments"
                  and module != "course_lib.course.cli"):
                problems.append(f"{module} imports {target} (only course_lib.course.cli "
                                f"imports experiments)")
    return problems


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
GRAPH = {name: imports_of(path) for name, path in MODULES.items()}


def test_every_module_belongs_to_a_known_layer():
    top_level = {name.split(".")[1] for name in MODULES if name.count(".") >= 1}
    unknown = top_level - CORE - SUBPACKAGES - {"__main__"}
    assert not unknown, f"modules outside the documented layers: {sorted(unknown)}"


def test_layers_import_only_downwards():
    assert violations(GRAPH) == []


def test_no_import_cycle_anywhere():
    assert cycles(GRAPH) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_and_functions_are_small(name):
    path = MODULES[name]
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.relative_to(PACKAGE.parent)} has {lines} lines"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            assert length <= MAX_FUNCTION_LINES, f"{name}.{node.name} has {length} lines"


def test_the_checks_catch_what_they_are_for():
    """The rules fire on a made-up graph that breaks each of them."""
    bad = {
        "course_lib.nn.attention": {"course_lib.models.seq2seq"},
        "course_lib.models.seq2seq": {"course_lib.experiments.bottleneck"},
        "course_lib.lessons.probe": {"course_lib.course.syllabus"},
        "course_lib.train.loop": {"course_lib.train.ddp"},
        "course_lib.train.ddp": {"course_lib.train.loop"},
        "course_lib.device": {"course_lib.nn.attention"},
    }
    found = violations(bad)
    assert any("nn.attention imports course_lib.models" in p for p in found)
    assert any("models.seq2seq imports course_lib.experiments" in p for p in found)
    assert any("lessons.probe imports course_lib.course" in p for p in found)
    assert any("course_lib.device imports" in p for p in found)
    assert cycles(bad) == [["course_lib.train.ddp", "course_lib.train.loop"]]
    assert violations({"course_lib.course.check": {"course_lib.experiments.runs"}})
    assert not violations({"course_lib.course.cli": {"course_lib.experiments.runs"}})
