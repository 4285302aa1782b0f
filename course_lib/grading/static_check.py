"""What the student's code can reach, read without running it: the grader's static check.

Nothing in the kernel can switch this check off. Which cells are the student's is decided from
the grader's source notebook: every code cell whose text is not one of the source's own
(imports, self-checks with their hidden tests) is the student's, whatever its metadata says.
Each cell is read after IPython's own transformation (magics and ``!`` commands become the calls
the kernel makes), and a cell that still does not parse is reported.

What it finds falls in two kinds (:class:`StaticFindings`):

- **flagged** (the points stand): a visible use of what an exercise re-implements, and an import
  from ``course_lib`` other than the self-checks in the exercise's own cells;
- **held** (no points until the instructor has looked): a *capability* that can reach or disable
  the grading machinery or hide a call: the interpreter's internals (``sys``, ``builtins``,
  ``gc``, ``inspect``, ``ctypes``, frames, code objects, namespaces), imports by computed
  names (``importlib``, ``pkgutil``, ``__import__``), the operating system (``os``,
  ``subprocess``, shell commands), code hidden in data (``pickle``, ``torch.load`` without
  ``weights_only``), code compiled at run time (``exec``, ``eval``, ``compile``), the kernel
  (``get_ipython``, magics beyond timing and plotting), the call monitor (``setprofile``,
  ``settrace``), ``getattr`` and its kin with a name computed at run time, and private torch
  names. A capability is found however it is reached: an import, an alias, an attribute of an
  allowed module (``torch.sys``, ``collections._sys``, ``dataclasses.builtins``), a literal
  ``getattr``; the reason shows the path. A held capability holds the exercise it is written in
  and every later one (observations sealed before it ran are out of its reach); one written
  after the last test cell can change nothing sealed, so it is flagged on every exercise.

Ordinary code is not held: imports of installed libraries that give none of these (plotting,
timing, warnings, progress bars, data frames, typing, einops, ...), ``getattr`` with a literal
name, and strings, whatever they contain.
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
import importlib.util
import sys
import types
import warnings
from dataclasses import dataclass, field

from course_lib.grading import hidden
from course_lib.grading.verdict import is_test_cell

ALLOWED_COURSE_IMPORT = "course_lib.grading.checks"

# Modules (and everything under them) that are capabilities, with what they reach.
INTERPRETER = "reaches the interpreter's internals"
IMPORTS = "imports modules by names computed at run time"
SYSTEM = "reaches the operating system"
DATA_CODE = "runs code hidden in data"
RUN_TIME_CODE = "compiles code at run time"
KERNEL = "reaches the kernel that runs the grading"
GRADING = "reaches the grading machinery"
MONITOR = "switches the call monitor"
CONCURRENT = ("runs code while later cells run, where it could rewrite an observation as it is "
              "made")
NAMES = "reaches objects by names computed at run time"
NATIVE = "compiles and loads native code"
CAPABILITY_MODULES = {
    "sys": INTERPRETER, "builtins": INTERPRETER, "gc": INTERPRETER, "inspect": INTERPRETER,
    "ctypes": INTERPRETER, "_ctypes": INTERPRETER, "marshal": DATA_CODE,
    "importlib": IMPORTS, "pkgutil": IMPORTS, "runpy": IMPORTS, "zipimport": IMPORTS,
    "_frozen_importlib": IMPORTS, "_frozen_importlib_external": IMPORTS, "_imp": IMPORTS,
    "os": SYSTEM, "posix": SYSTEM, "nt": SYSTEM, "subprocess": SYSTEM, "pty": SYSTEM,
    "_posixsubprocess": SYSTEM,
    "pickle": DATA_CODE, "_pickle": DATA_CODE, "copyreg": DATA_CODE, "shelve": DATA_CODE,
    "dill": DATA_CODE, "cloudpickle": DATA_CODE, "joblib": DATA_CODE,
    "code": RUN_TIME_CODE, "codeop": RUN_TIME_CODE,
    "IPython": KERNEL, "ipykernel": KERNEL, "jupyter_client": KERNEL,
    "threading": CONCURRENT, "_thread": CONCURRENT, "multiprocessing": CONCURRENT,
    "concurrent": CONCURRENT, "asyncio": CONCURRENT, "signal": CONCURRENT,
    "torch.multiprocessing": CONCURRENT,
    "course_lib.grading": GRADING, "nbgrader": GRADING, "nbclient": GRADING,
    "torch.overrides": NAMES, "torch.utils.cpp_extension": NATIVE,
}
# Modules under a capability that only display (and the self-checks): allowed, with what is
# under them.
ALLOWED_UNDER_CAPABILITY = frozenset({
    ALLOWED_COURSE_IMPORT, "IPython.display", "IPython.core.display",
    "IPython.core.display_functions"})
# Objects outside those modules that are capabilities: (module, attribute) -> what they reach.
CAPABILITY_OBJECTS = {
    ("builtins", "exec"): RUN_TIME_CODE, ("builtins", "eval"): RUN_TIME_CODE,
    ("builtins", "compile"): RUN_TIME_CODE, ("builtins", "breakpoint"): INTERPRETER,
    ("builtins", "vars"): NAMES, ("builtins", "globals"): NAMES, ("builtins", "locals"): NAMES,
    ("types", "FunctionType"): INTERPRETER, ("types", "LambdaType"): INTERPRETER,
    ("types", "CodeType"): INTERPRETER, ("types", "FrameType"): INTERPRETER,
    ("types", "TracebackType"): INTERPRETER, ("types", "CellType"): INTERPRETER,
}
# Built-ins that take an attribute or module name: allowed with a literal, held otherwise.
NAME_TAKERS = frozenset({"getattr", "setattr", "delattr", "__import__"})
NAME_TAKERS_OPERATOR = frozenset({"attrgetter", "methodcaller"})
# Attributes that reach frames, code objects, namespaces or every class.
RUN_TIME_ATTRIBUTES = frozenset({
    "__dict__", "__globals__", "__builtins__", "__code__", "__closure__", "__subclasses__",
    "__getattribute__", "__getattr__", "__setattr__", "__delattr__", "__base__", "__bases__",
    "__mro__", "__loader__", "__spec__", "__self__", "__import__", "__reduce__",
    "__reduce_ex__", "f_globals", "f_locals", "f_back", "f_builtins", "f_code", "gi_frame",
    "cr_frame", "ag_frame", "tb_frame", "gi_code", "cr_code", "co_code", "co_consts"})
# Magics that only time, plot, display or describe; the code they run is read like a cell's.
HARMLESS_MAGICS = frozenset({
    "matplotlib", "time", "timeit", "capture", "precision", "pprint", "who", "whos", "who_ls",
    "pinfo", "pinfo2", "pdef", "pdoc", "psource", "pfile", "xmode", "prun"})
MAGICS_WITH_CODE = frozenset({"time", "timeit", "capture", "prun"})


class _Unknown:
    """An object the check cannot know without running the code."""

    def __repr__(self):
        return "<unknown>"


UNKNOWN = _Unknown()


@dataclass
class StaticFindings:
    """``flags``: visible uses of the reference, and capabilities that came too late to matter
    (points stand). ``withheld``: capabilities that could reach the grading or hide a call (no
    points until the instructor decides)."""

    flags: list[str] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Capabilities, as objects of the grader's own process


def _module_capability(name: str) -> str | None:
    """What module ``name`` reaches, or None for a module that is no capability."""
    if any(name == allowed or name.startswith(allowed + ".")
           for allowed in ALLOWED_UNDER_CAPABILITY):
        return None
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        reason = CAPABILITY_MODULES.get(".".join(parts[:end]))
        if reason:
            return reason
    return None


@functools.lru_cache(maxsize=1)
def capability_objects() -> dict[int, tuple[object, str, str]]:
    """``{id(object): (object, its name, what it reaches)}`` for the capabilities loaded here."""
    found = {}
    for name, module in list(sys.modules.items()):
        reason = _module_capability(name)
        if reason and isinstance(module, types.ModuleType):
            found[id(module)] = (module, name, reason)
    for (module_name, attribute), reason in CAPABILITY_OBJECTS.items():
        module = sys.modules.get(module_name)
        value = getattr(module, attribute, None) if module else None
        if value is not None:
            found.setdefault(id(value), (value, f"{module_name}.{attribute}", reason))
    return found


def capability_of(value) -> tuple[str, str] | None:
    """``(name, what it reaches)`` when ``value`` is a capability, else None."""
    if value is UNKNOWN:
        return None
    known = capability_objects().get(id(value))
    if known is not None and known[0] is value:
        return known[1], known[2]
    if isinstance(value, types.ModuleType):
        reason = _module_capability(value.__name__)
        if reason:
            return value.__name__, reason
    if isinstance(value, types.FrameType | types.CodeType | types.TracebackType):
        return type(value).__name__, INTERPRETER
    owner = getattr(value, "__module__", None)
    if isinstance(owner, str) and owner != "builtins" and isinstance(
            value, types.BuiltinFunctionType | types.FunctionType | type) \
            and _module_capability(owner):
        return f"{owner}.{getattr(value, '__qualname__', '?')}", _module_capability(owner)
    return None


@functools.lru_cache(maxsize=1)
def capability_attribute_names() -> frozenset[str]:
    """Every name under which a loaded module holds a capability module (``sys``, ``_sys``,
    ``_os``, ``bltns``, ...): an attribute of that name on an object the check cannot know may
    reach it."""
    roots = {name for name in CAPABILITY_MODULES if "." not in name}
    names = set(roots)
    with warnings.catch_warnings():  # reading some modules' attributes warns of deprecations
        warnings.simplefilter("ignore")
        names |= _names_bound_to(roots)
    return frozenset(names - {"code"})  # ``.code`` is too common an attribute to suspect


def _names_bound_to(roots: set[str]) -> set[str]:
    names = set()
    for module in list(sys.modules.values()):
        try:
            space = vars(module)
        except TypeError:
            continue
        for name, value in list(space.items()):
            if isinstance(value, types.ModuleType) and value.__name__ in roots:
                names.add(name)
    return names


@functools.lru_cache(maxsize=1)
def private_torch_names() -> frozenset[str]:
    """Private names torch's public namespaces hold (``_softmax``, ``_C``, ``_VF``, ...)."""
    import torch

    spaces = [torch, torch.Tensor, torch.nn.functional, torch.linalg, torch.special,
              torch._C._VariableFunctions]
    return frozenset(n for space in spaces for n in dir(space)
                     if n.startswith("_") and not n.endswith("__")) | {"ops"}


def _is_torch(value) -> bool:
    if value is UNKNOWN:
        return False
    if isinstance(value, types.ModuleType):
        return value.__name__.split(".")[0] == "torch"
    module = getattr(value, "__module__", None)
    return isinstance(module, str) and module.split(".")[0] == "torch" and isinstance(value, type)


def module_if_installed(name: str):
    """The loaded module ``name``; UNKNOWN when it is installed but not loaded; None when
    nothing of that name is installed (a module shipped beside the notebook, say). Nothing is
    imported: no code of the module runs in the grader."""
    if name in sys.modules:
        return sys.modules[name]
    top = name.split(".")[0]
    if top in sys.modules:
        return UNKNOWN
    try:
        return UNKNOWN if importlib.util.find_spec(top) is not None else None
    except (ImportError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
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


class Reader(ast.NodeVisitor):
    """Reads cells in order, keeping what each name is bound to (``env``), and notes every
    capability it reaches (:attr:`held`) and every use of a reference name (:attr:`flags`)."""

    def __init__(self, targets: frozenset[str] = frozenset()):
        self.env: dict[str, object] = {}
        self.targets = targets
        self.own_attributes: set[str] = set()
        self.held: list[str] = []
        self.flags: list[str] = []
        self.course_imports: list[str] = []
        self.reporting = True

    # -- cells ---------------------------------------------------------------------------

    def read(self, tree: ast.AST, *, report: bool) -> None:
        self.reporting = report
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                child._parent = node  # type: ignore[attr-defined]
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                self.own_attributes.add(node.attr)
            if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
                self.own_attributes.add(node.name)
        self.visit(tree)

    def hold(self, text: str) -> None:
        if self.reporting:
            self.held.append(text)

    # -- bindings ------------------------------------------------------------------------

    def visit_Import(self, node):
        for alias in node.names:
            self._import(alias.name, alias.asname, f"import {alias.name}")

    def visit_ImportFrom(self, node):
        module_name = "." * node.level + (node.module or "")
        if node.level:
            self.hold(f"imports {module_name}, a module of the submission's own")
            return
        self._course_import(module_name)
        allowed = all(f"{module_name}.{a.name}" in ALLOWED_UNDER_CAPABILITY for a in node.names)
        module = self._import(module_name, None, f"from {module_name} import ...", bind=False,
                              check=not allowed)
        if module is None:
            for alias in node.names:
                self.env[alias.asname or alias.name] = UNKNOWN
            return
        for alias in node.names:
            if alias.name == "*":
                self._star(module, module_name)
                continue
            path = f"from {module_name} import {alias.name}"
            value = self._attribute(module, alias.name, path)
            if value is UNKNOWN and module is not UNKNOWN:
                submodule = f"{module_name}.{alias.name}"
                reason = _module_capability(submodule)
                if reason:
                    self.hold(f"{path}: the module {submodule} {reason}")
            self._reference_import(alias.name, module_name)
            self.env[alias.asname or alias.name] = UNKNOWN if value is None else value

    def _import(self, name, asname, path, bind=True, check=True):
        """Resolve an imported module; hold a capability or a module that is not installed."""
        if bind:
            self._course_import(name)
        reason = _module_capability(name) if check else None
        if reason:
            self.hold(f"{path}: the module {name} {reason}")
        module = module_if_installed(name)
        if module is None:
            self.hold(f"{path}: no module {name} is installed for grading, so it can only be "
                      f"code shipped beside the notebook, which this check cannot read")
            module = UNKNOWN
        elif not reason and name.split(".")[0] == "torch" and _private_part(name):
            self.hold(f"{path}: a private torch module")
        if bind:
            if asname:
                self.env[asname] = module
            else:
                top = name.split(".")[0]
                self.env[top] = sys.modules.get(top, UNKNOWN)
        return module

    def _star(self, module, module_name):
        if module is UNKNOWN:
            return
        names = getattr(module, "__all__", None) or [n for n in vars(module)
                                                      if not n.startswith("_")]
        for name in names:
            value = getattr(module, name, UNKNOWN)
            found = capability_of(value)
            if found:
                self.hold(f"from {module_name} import * brings {name}: {found[0]} {found[1]}")
            self.env[name] = value

    def visit_Assign(self, node):
        self.visit(node.value)
        value = self.evaluate(node.value, quiet=True)
        for target in node.targets:
            self._bind(target, value, node.value)
            self.visit(target)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self.visit(node.value)
            self._bind(node.target, self.evaluate(node.value, quiet=True), node.value)
        self.visit(node.target)

    def visit_NamedExpr(self, node):
        self.visit(node.value)
        self._bind(node.target, self.evaluate(node.value, quiet=True), node.value)

    def _bind(self, target, value, value_node):
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        elif isinstance(target, ast.Tuple | ast.List):
            items = value_node.elts if isinstance(value_node, ast.Tuple | ast.List) and \
                len(value_node.elts) == len(target.elts) else [None] * len(target.elts)
            for sub, item in zip(target.elts, items, strict=True):
                self._bind(sub, self.evaluate(item, quiet=True) if item is not None
                           else UNKNOWN, item)

    def visit_FunctionDef(self, node):
        self.env[node.name] = UNKNOWN
        for argument in ast.walk(node.args):
            if isinstance(argument, ast.arg):
                self.env.setdefault(argument.arg, UNKNOWN)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self.env[node.name] = UNKNOWN
        self.generic_visit(node)

    # -- uses ----------------------------------------------------------------------------

    def visit_Name(self, node):
        if not isinstance(node.ctx, ast.Load):
            if isinstance(node.ctx, ast.Store):
                self.env.setdefault(node.id, UNKNOWN)
            return
        parent = getattr(node, "_parent", None)
        if isinstance(parent, ast.Attribute):
            return  # read with its chain
        if isinstance(parent, ast.Call) and parent.func is node:
            return  # read with its call
        value = self.lookup(node.id)
        if value is getattr(builtins, "get_ipython", None) or node.id == "get_ipython":
            self.hold("get_ipython(): " + KERNEL)
            return
        if self._name_taker(value):
            self.hold(f"{node.id} passed as a value, so the name it takes is computed at run time"
                      f": {NAMES}")
            return
        found = capability_of(value)
        if found:
            self.hold(f"{node.id}: {found[0]} {found[1]}")
        elif value is UNKNOWN and node.id in capability_attribute_names() \
                and node.id not in self.env:
            self.hold(f"{node.id}, a name no cell binds, may be the module {node.id}")

    def visit_Attribute(self, node):
        parent = getattr(node, "_parent", None)
        if isinstance(parent, ast.Attribute):
            return  # the outermost attribute reads the whole chain
        if isinstance(parent, ast.Call) and parent.func is node:
            return
        self.evaluate(node)
        self._visit_chain_roots(node)

    def _visit_chain_roots(self, node):
        while isinstance(node, ast.Attribute):
            node = node.value
        if not isinstance(node, ast.Name):
            self.visit(node)

    def visit_Call(self, node):
        if self._magic(node):
            return
        function = node.func
        callee = self.evaluate(function) if isinstance(function, ast.Attribute | ast.Name) \
            else UNKNOWN
        if isinstance(function, ast.Attribute):
            self._visit_chain_roots(function)
        elif not isinstance(function, ast.Name):
            self.visit(function)
        self._check_call(node, callee)
        for argument in node.args:
            self.visit(argument)
        for keyword in node.keywords:
            self.visit(keyword.value)

    # -- evaluation ----------------------------------------------------------------------

    def lookup(self, name: str):
        if name in self.env:
            return self.env[name]
        return getattr(builtins, name, UNKNOWN)

    def evaluate(self, node, quiet: bool = False):
        """The object ``node`` is, where the check can know it (else UNKNOWN); notes every
        capability met on the way unless ``quiet`` (the node is visited on its own)."""
        if node is None:
            return UNKNOWN
        if isinstance(node, ast.Name):
            return self.lookup(node.id)
        if isinstance(node, ast.Attribute):
            root, attributes = _attribute_path(node)
            value = self.evaluate(root, quiet=True)
            path = _unparsed(root)
            for attribute in attributes:
                path = f"{path}.{attribute}"
                if not quiet and attribute in self.targets:
                    self.flags.append(f"uses {path[-80:]}, which this exercise re-implements")
                value = self._attribute(value, attribute, path, quiet=quiet)
                if value is None:
                    return UNKNOWN
            return value
        if isinstance(node, ast.Call):
            callee = self.evaluate(node.func, quiet=True)
            literal = _literal_string(node.args[1]) if len(node.args) >= 2 else None
            if callee is builtins.getattr and literal is not None:
                return self._attribute(self.evaluate(node.args[0], quiet=True), literal,
                                       f"getattr(..., {literal!r})", quiet=True) or UNKNOWN
            if callee is builtins.__import__ and node.args:
                name = _literal_string(node.args[0])
                if name is not None:
                    return sys.modules.get(name.split(".")[0], UNKNOWN)
            return UNKNOWN
        return UNKNOWN

    def _attribute(self, value, attribute: str, path: str, quiet: bool = False):
        """``value.attribute`` for the check, noting a capability it reaches. Returns None
        once a capability is met (nothing further along the chain needs reading)."""
        if attribute in RUN_TIME_ATTRIBUTES:
            if not quiet:
                self.hold(f"{path}: {INTERPRETER} (frames, code objects, namespaces)")
            return None
        if value is UNKNOWN or value is None:
            if attribute in capability_attribute_names():
                if not quiet:
                    self.hold(f"{path} may be the module {attribute.lstrip('_')}")
                return None
            if attribute in private_torch_names() and attribute not in self.own_attributes:
                if not quiet:
                    self.hold(f"{path} may be {attribute}, a private torch name")
                return None
            return UNKNOWN
        if _is_torch(value) and (attribute == "ops" or _private_part(attribute)):
            if not quiet:
                self.hold(f"{path}: a private torch name")
            return None
        try:
            reached = getattr(value, attribute)
        except Exception:  # noqa: BLE001 - a lazy attribute that fails, a missing name
            return UNKNOWN
        found = capability_of(reached)
        if found:
            if not quiet:
                self.hold(f"{path}: {found[0]} {found[1]}")
            return None
        return reached

    def _name_taker(self, value) -> bool:
        return any(value is getattr(builtins, n) for n in NAME_TAKERS) or any(
            value is getattr(sys.modules.get("operator"), n, None) for n in NAME_TAKERS_OPERATOR)

    def _check_call(self, node, callee):
        if callee is getattr(builtins, "get_ipython", None) or (
                isinstance(node.func, ast.Name) and node.func.id == "get_ipython"):
            self.hold("get_ipython(): " + KERNEL)
        elif self._name_taker(callee):
            self._name_taking_call(node, callee.__name__)
        elif found := capability_of(callee):
            self.hold(f"{_unparsed(node.func)}(): {found[0]} {found[1]}")
        elif getattr(callee, "__name__", "") == "load":
            self._loader_call(node, callee)

    def _name_taking_call(self, node, name: str) -> None:
        """``getattr``, ``setattr``, ``delattr``, ``__import__``, ``operator.attrgetter`` and
        ``methodcaller``: read like the attribute or import they name when that name is a
        literal; held otherwise."""
        position = 0 if name in ("__import__", "attrgetter", "methodcaller") else 1
        arguments = node.args if name == "attrgetter" else node.args[position:position + 1]
        texts = [_literal_string(a) for a in arguments]
        if not texts or None in texts:
            self.hold(f"{_unparsed(node.func)}() with a name computed at run time: {NAMES}")
        elif name == "__import__":
            self._import(texts[0], None, f"__import__({texts[0]!r})", bind=False)
        elif name in ("attrgetter", "methodcaller"):
            for text in texts:
                value = UNKNOWN
                for part in text.split("."):
                    value = self._attribute(value, part, f"{name}({text!r})")
                    if value is None:
                        break
                    if part in self.targets:
                        self.flags.append(f"uses {name}({text!r}), which this exercise "
                                          f"re-implements")
        else:
            target = self.evaluate(node.args[0], quiet=True)
            self._attribute(target, texts[0], f"{name}({_unparsed(node.args[0])}, {texts[0]!r})")
            if texts[0] in self.targets:
                self.flags.append(f"uses {_unparsed(node)}, which this exercise re-implements")

    def _loader_call(self, node, callee) -> None:
        """``torch.load`` without ``weights_only`` and ``numpy.load`` with ``allow_pickle`` run
        code hidden in the file they read."""
        module = getattr(callee, "__module__", "") or ""
        for keyword in node.keywords:
            if module.startswith("torch") and (
                    keyword.arg == "weights_only" and not _is_true(keyword.value)
                    or keyword.arg == "pickle_module"):
                self.hold(f"{_unparsed(node.func)}(..., {keyword.arg}=...): {DATA_CODE}")
            if module.startswith("numpy") and keyword.arg == "allow_pickle" \
                    and not _is_false(keyword.value):
                self.hold(f"{_unparsed(node.func)}(..., allow_pickle=...): {DATA_CODE}")

    # -- magics --------------------------------------------------------------------------

    def _magic(self, node) -> bool:
        """Read ``get_ipython().run_line_magic(...)`` and friends, as IPython writes them."""
        function = node.func
        if not (isinstance(function, ast.Attribute) and isinstance(function.value, ast.Call)
                and isinstance(function.value.func, ast.Name)
                and function.value.func.id == "get_ipython"):
            return False
        kind = function.attr
        arguments = [_literal_string(a) for a in node.args]
        if kind in ("system", "getoutput"):
            self.hold(f"runs a shell command (!{(arguments or [''])[0] or ''}"[:80] + "): "
                      + SYSTEM)
            return True
        if kind not in ("run_line_magic", "run_cell_magic") or not arguments \
                or any(a is None for a in arguments):
            self.hold(f"get_ipython().{kind}(...): {KERNEL}")
            return True
        magic = arguments[0]
        if magic not in HARMLESS_MAGICS:
            self.hold(f"runs the magic %{magic}: {KERNEL}")
            return True
        if magic in MAGICS_WITH_CODE:
            self._read_code_text(arguments[1] if len(arguments) > 1 else "", magic)
            if kind == "run_cell_magic" and len(arguments) > 2:
                tree, problem = parse_cell(arguments[2])
                if tree is None:
                    self.flags.append(f"the body of a %%{magic} cell does not parse "
                                      f"({problem}), so it did not run")
                else:
                    self.read(tree, report=self.reporting)
        return True

    def _read_code_text(self, line: str, magic: str) -> None:
        """Read the code on a magic's line: after its options (``-n 3``) the rest is code,
        and where the options end is the magic's to decide, so the longest tail that parses is
        read, then each shorter one whose first word is not an option's value."""
        words = line.split()
        for start in range(len(words)):
            if words[start].startswith("-"):
                continue
            tree, _ = parse_cell(" ".join(words[start:]))
            if tree is not None:
                self.read(tree, report=self.reporting)
                return
        if words and magic in ("time", "timeit", "prun") and not all(
                w.startswith("-") for w in words):
            self.flags.append(f"the code of a %{magic} line does not parse, so it did not run")

    # -- references ----------------------------------------------------------------------

    def _reference_import(self, name, module):
        if name in self.targets:
            self.flags.append(f"imports {name} from {module}, which this exercise "
                              f"re-implements")

    def _course_import(self, module_name):
        if module_name.split(".")[0] == "course_lib" and module_name != ALLOWED_COURSE_IMPORT:
            self.course_imports.append(f"imports {module_name}")


def _private_part(name: str) -> bool:
    return any(part.startswith("_") and not part.endswith("__") for part in name.split("."))


def _is_true(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _is_false(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _literal_string(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _attribute_path(node) -> tuple[ast.AST, list[str]]:
    """``a.b.c`` as (the node ``a``, ["b", "c"]), whatever ``a`` is."""
    attributes = []
    while isinstance(node, ast.Attribute):
        attributes.append(node.attr)
        node = node.value
    return node, attributes[::-1]


def _unparsed(node) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 80 else text[:77] + "..."


# ---------------------------------------------------------------------------------------------
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


def read_notebook(nb, source_nb, targets: frozenset[str] = frozenset()) -> list[CellFindings]:
    """Read every code cell of ``nb`` in order; report the student's."""
    reader = Reader(targets)
    found = []
    for role in cell_roles(nb, source_nb):
        tree, problem = parse_cell(nb.cells[role.index].source)
        reader.held, reader.flags, reader.course_imports = [], [], []
        if tree is not None:
            reader.read(tree, report=role.student)
        if role.student:
            found.append(CellFindings(role, list(dict.fromkeys(reader.held)),
                                      list(dict.fromkeys(reader.flags)),
                                      list(dict.fromkeys(reader.course_imports)), problem))
    return found


def static_flags(nb, grade_id: str, reimplements: tuple[str, ...], source_nb=None
                 ) -> StaticFindings:
    """What in the student's code deserves the instructor's eye for exercise ``grade_id``.

    ``source_nb`` is the grader's source notebook (default: ``nb`` itself, for a notebook
    whose cells carry the source's metadata, such as a solution). Held: a capability in a
    student cell before this exercise's test cell. Flagged: a use of a re-implemented name
    anywhere (:func:`course_lib.grading.hidden.reference_aliases`), an import from
    ``course_lib`` or a cell that does not parse in the exercise's own cells, and a capability
    or a cell that does not parse after the last test cell.
    """
    source_nb = source_nb if source_nb is not None else _as_source(nb)
    roles = cell_roles(nb, source_nb)
    positions = {role.test: role.index for role in roles if role.test}
    if grade_id not in positions:
        return StaticFindings()
    here = positions[grade_id]
    before = max((p for p in positions.values() if p < here), default=-1)
    last = max(positions.values())
    found = StaticFindings()
    for cell in read_notebook(nb, source_nb, hidden.reference_aliases(reimplements)):
        index = cell.role.index
        where = f"cell {index + 1}"
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


def _as_source(nb):
    """``nb`` read as its own source, for notebooks whose metadata can be trusted (the course's
    solutions, tests): cells with nbgrader metadata that are not solutions are the grader's,
    every other code cell the student's."""
    source = copy.copy(nb)
    source.cells = [cell for cell in nb.cells if cell.get("metadata", {}).get("nbgrader")]
    return source
