"""The package keeps the layout docs/layout.md describes: the layers of its rank table, each
importing only from itself and from layers of lower rank; no import cycle; every module named in
the document; modules and functions small enough to read; and the layers below `experiments/`
working from a copy of the package alone, without the checkout around it.

The ranks are read from docs/layout.md, so the document and the test cannot disagree. The
imports are read from the source with ``ast`` (imports inside functions count), so a rule is
checked for every module, including code paths no test runs."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "course_lib"
LAYOUT = ROOT / "docs" / "layout.md"
CORE = "core"  # the modules at the top of the package, unless the table places them
CLI = "course_lib.course.cli"  # the one module that imports experiments/
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80


def layer_table(markdown: str) -> dict[str, int]:
    """The rank of every layer in the table of the "Layers" section of ``markdown``: ``core``,
    a folder (`` `nn/` `` gives ``nn``) or a top-level module (`` `__main__` ``)."""
    section = re.search(r"^## Layers\n(.*?)(?=^## |\Z)", markdown, re.M | re.S)
    assert section, "docs/layout.md has no '## Layers' section"
    ranks = {}
    for rank, layers in re.findall(r"^\|\s*(\d+)\s*\|([^|]*)\|", section.group(1), re.M):
        names = [name.rstrip("/") for name in re.findall(r"`([\w/]+)`", layers)]
        for name in names or [layers.strip()]:
            assert name not in ranks, f"{name} has two ranks in the layer table"
            ranks[name] = int(rank)
    assert ranks.get(CORE) == 0, "the layer table starts with core at rank 0"
    return ranks


def module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_map(package: Path) -> dict[str, Path]:
    """Every module under ``package`` by dotted name (a package's ``__init__`` by its own)."""
    return {module_name(p, package): p for p in sorted(package.rglob("*.py"))}


def imports_of(path: Path, name: str, modules: set[str]) -> set[str]:
    """Every module of ``modules`` that ``path`` (module ``name``) imports, anywhere in it."""
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
    return {m for m in found if m in modules and m != name}


def import_graph(package: Path) -> dict[str, set[str]]:
    modules = module_map(package)
    return {name: imports_of(path, name, set(modules)) for name, path in modules.items()}


def layer(module: str, ranks: dict[str, int]) -> str:
    """The layer of ``module``: its folder, or the top-level module the table places, or core."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ranks else CORE


def violations(graph: dict[str, set[str]], ranks: dict[str, int]) -> list[str]:
    """Every import that breaks the rank rule or the experiments rule, as 'a imports b (why)'."""
    problems = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            source, goal = layer(module, ranks), layer(target, ranks)
            if source != goal and ranks[goal] >= ranks[source]:
                why = ("a higher rank" if ranks[goal] > ranks[source] else "the same rank")
                problems.append(f"{module} imports {target} ({source}, rank {ranks[source]}, "
                                f"may not import {goal}, rank {ranks[goal]}: {why})")
            elif goal == "experiments" and source != "experiments" and module != CLI:
                problems.append(f"{module} imports {target} (only {CLI} imports experiments)")
    return problems


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


def documented_modules(markdown: str, ranks: dict[str, int]
                       ) -> dict[tuple[str, ...], set[str]]:
    """The module names each section of docs/layout.md lists, by the layers the section is
    about: those its heading names in backticks (``## `nn/`: ...``), or core when the heading
    starts with "Core". A module is named at the start of a bullet, before the colon:
    ``- `a`, `b` (03): what they do``."""
    found: dict[tuple[str, ...], set[str]] = {}
    for heading, body in re.findall(r"^## ([^\n]*)\n(.*?)(?=^## |\Z)", markdown,
                                    re.M | re.S):
        layers = [n.rstrip("/") for n in re.findall(r"`([\w/]+)`", heading)
                  if n.rstrip("/") in ranks]
        layers = layers or ([CORE] if heading.startswith("Core") else [])
        names = set()
        for lead in re.findall(r"^- ((?:`\w+`(?:, )?)+)(?: \([^)]*\))?:", body, re.M):
            names |= set(re.findall(r"`(\w+)`", lead))
        if layers:
            found.setdefault(tuple(layers), set()).update(names)
    return found


def holds_code(path: Path) -> bool:
    """True unless ``path`` is a docstring and nothing else (an empty package's __init__)."""
    body = ast.parse(path.read_text()).body
    return any(not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
               for node in body)


LAYOUT_TEXT = LAYOUT.read_text()
RANKS = layer_table(LAYOUT_TEXT)
MODULES = module_map(PACKAGE)
GRAPH = import_graph(PACKAGE)


def test_the_layer_table_names_every_folder_and_nothing_else():
    folders = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    top_level = {p.stem for p in PACKAGE.glob("*.py")}
    placed = set(RANKS) - {CORE}
    assert folders - placed == set(), "folders missing from docs/layout.md's layer table"
    assert placed - folders - top_level == set(), "the layer table names what does not exist"


def test_layers_import_only_from_lower_ranks():
    assert violations(GRAPH, RANKS) == []


def test_no_import_cycle_anywhere():
    assert cycles(GRAPH) == []


def test_layout_names_every_module_and_no_other():
    documented = documented_modules(LAYOUT_TEXT, RANKS)
    expected: dict[str, set[str]] = {}
    existing: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        short = name.rpartition(".")[2]
        existing.setdefault(layer(name, RANKS), set()).add(short)
        if path.name != "__init__.py" or holds_code(path):
            expected.setdefault(layer(name, RANKS), set()).add(short)
    assert set(RANKS) - {name for layers in documented for name in layers} == set(), (
        "layers without a section in docs/layout.md")
    for layers, named in documented.items():
        need = set().union(*(expected.get(name, set()) for name in layers))
        have = set().union(*(existing.get(name, set()) for name in layers))
        assert need - named == set(), f"modules of {layers} docs/layout.md leaves out"
        assert named - have == set(), f"docs/layout.md names what {layers} does not hold"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_and_functions_are_small(name):
    path = MODULES[name]
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.relative_to(PACKAGE.parent)} has {lines} lines"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            assert length <= MAX_FUNCTION_LINES, f"{name}.{node.name} has {length} lines"


MADE_UP_TABLE = """## Layers

| rank | layer | what it holds |
|------|-------|---------------|
| 0 | core | the top of the package |
| 1 | `low/` | building blocks |
| 2 | `left/`, `right/` | two independent layers |
| 3 | `experiments/` | experiments |
| 4 | `course/`, `__main__` | the command |
"""

MADE_UP_PACKAGE = {
    "__init__.py": "",
    "device.py": "",
    "__main__.py": "from course_lib.course import cli\n",
    "low/__init__.py": "",
    "low/blocks.py": "def late():\n    from course_lib.left import model  # upwards\n",
    "left/__init__.py": "",
    "left/model.py": "from ..low import blocks\nfrom course_lib.device import *\n",
    "right/__init__.py": "",
    "right/train.py": "from course_lib.left.model import *  # same rank\n",
    "experiments/__init__.py": "",
    "experiments/run.py": "import course_lib.right.train\n",
    "course/__init__.py": "",
    "course/cli.py": "from course_lib.experiments import run\n",
    "course/site.py": "from course_lib.experiments.run import *  # not the cli\n",
}


def test_the_checks_catch_what_they_are_for(tmp_path):
    """A made-up package and layer table that break each rule, read as the real ones are."""
    for relative, source in MADE_UP_PACKAGE.items():
        (tmp_path / "course_lib" / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "course_lib" / relative).write_text(source)
    ranks = layer_table(MADE_UP_TABLE)
    assert ranks == {"core": 0, "low": 1, "left": 2, "right": 2, "experiments": 3, "course": 4,
                     "__main__": 4}
    found = violations(import_graph(tmp_path / "course_lib"), ranks)
    assert [line.split(" (")[0] for line in found] == [
        "course_lib.__main__ imports course_lib.course",  # same rank, a top-level module
        "course_lib.__main__ imports course_lib.course.cli",
        "course_lib.course.site imports course_lib.experiments.run",  # not the cli
        "course_lib.low.blocks imports course_lib.left",  # upwards, inside a function
        "course_lib.low.blocks imports course_lib.left.model",
        "course_lib.right.train imports course_lib.left.model",  # same rank
    ]
    assert "only course_lib.course.cli imports experiments" in found[2]
    assert "higher rank" in found[4] and "same rank" in found[5]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    documented = documented_modules(
        "## Core: x\n\n- `device`: d\n\n## `low/` and `left/`\n\n- `blocks`, `model` (02): m\n"
        "- `note`: n; `nested`: not at a bullet's start\n", ranks)
    assert documented == {("core",): {"device"}, ("low", "left"): {"blocks", "model", "note"}}


def test_the_lower_layers_work_from_the_package_alone(tmp_path):
    """A copy of course_lib without the checkout (no notebooks, docs or results beside it)
    imports every module of the layers below experiments/, keeps its caches in the user's cache
    folder, and the `course` commands that need the checkout say so."""
    site = tmp_path / "site-packages"
    shutil.copytree(PACKAGE, site / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    names = sorted(name for name in MODULES
                   if RANKS[layer(name, RANKS)] < RANKS["experiments"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = textwrap.dedent(f"""
        import importlib, sys
        sys.path.insert(0, {str(site)!r})
        for name in {names!r}:
            importlib.import_module(name)
        from course_lib import paths
        from course_lib.data import corpus
        stray = sorted(name for name, module in sys.modules.items()
                       if name.startswith("course_lib")
                       and not getattr(module, "__file__", "").startswith({str(site)!r}))
        assert not stray, f"imported from elsewhere: {{stray}}"
        assert not paths.is_checkout()
        assert corpus.DEFAULT_CACHE == paths.cache_dir("corpus")
        assert corpus.DEFAULT_CACHE.parts[-2:] == ("attention-course", "corpus")
        from course_lib.course.cli import main
        assert main(["results"]) == 1  # it needs docs/ and results/
    """)
    result = subprocess.run([sys.executable, "-I", "-c", code], cwd=elsewhere,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "course results needs the course's source checkout" in result.stderr
    assert len(names) > 40


# Test files named for a property checked across the package, not for one module.
PROPERTY_TESTS = {"bad_input", "determinism", "device_agnostic", "environment_files", "exercises",
                  "grading", "hidden_tests", "layers", "make_lab", "notebook_timeout",
                  "readme_and_layout", "slides_overflow", "untrusted", "browser", "bootstrap",
                  "widgets_browser", "lessons_run", "lab_browser", "slides_browser"}


def test_every_test_file_is_named_for_a_module_or_a_listed_property():
    """`test_NAME.py` tests module NAME (``NAME_experiment``: the experiment of that name), so a
    module renamed or removed leaves a test file that fails here instead of drifting."""
    modules = {path.stem for path in PACKAGE.rglob("*.py")} | \
        {path.name for path in PACKAGE.iterdir() if path.is_dir()}
    experiments = {path.stem for path in (PACKAGE / "experiments").glob("*.py")}
    stray = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        name = path.stem.removeprefix("test_")
        if name in PROPERTY_TESTS or name in modules or \
                name.removesuffix("_experiment") in experiments:
            continue
        stray.append(path.name)
    assert not stray, f"test files named after no module of course_lib: {stray}"
    assert PROPERTY_TESTS <= {p.stem.removeprefix("test_") for p in (ROOT / "tests").glob("*.py")}
