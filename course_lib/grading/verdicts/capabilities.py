"""What a student's code can reach, read without running it: the capabilities and the reader.

A **capability** is something that can reach or switch off the grading machinery, or hide a
call: the interpreter's internals, imports by computed names, the operating system, code hidden
in data or compiled from strings, the kernel, threads and signals (code that runs while a later
test cell runs), the call monitor, names computed at run time, and private torch names. The
catalogue below names them by module and by object;
:class:`course_lib.grading.verdicts.code_reader.Reader` follows a cell's names to the objects
they reach (in the grader's own process, or by their dotted path for a module the grader has not
loaded), so a capability is found however it is reached: an import, an alias, an attribute of an
allowed module (``torch.sys``), a literal ``getattr``, a ``match`` pattern.

:mod:`course_lib.grading.verdicts.static_check` decides which cells are the student's and what
each finding means for each exercise.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import types
import warnings
from dataclasses import dataclass

INTERPRETER = "reaches the interpreter's internals"
IMPORTS = "imports modules by names computed at run time"
SYSTEM = "reaches the operating system"
DATA_CODE = "runs code hidden in data"
RUN_TIME_CODE = "runs code built at run time from text"
KERNEL = "reaches the kernel that runs the grading"
GRADING = "reaches the grading machinery"
MONITOR = "switches the call monitor"
CONCURRENT = ("runs code while later cells run, where it could rewrite an observation as it is "
              "made")
NAMES = "reaches objects by names computed at run time"
NATIVE = "compiles and loads native code"

# Modules (and everything under them) that are capabilities.
CAPABILITY_MODULES = {
    "sys": INTERPRETER, "builtins": INTERPRETER, "gc": INTERPRETER, "inspect": INTERPRETER,
    "ctypes": INTERPRETER, "_ctypes": INTERPRETER, "pdb": INTERPRETER, "bdb": INTERPRETER,
    "importlib": IMPORTS, "pkgutil": IMPORTS, "runpy": IMPORTS, "zipimport": IMPORTS,
    "_frozen_importlib": IMPORTS, "_frozen_importlib_external": IMPORTS, "_imp": IMPORTS,
    "pydoc": IMPORTS, "unittest.mock": IMPORTS,
    "os": SYSTEM, "posix": SYSTEM, "nt": SYSTEM, "subprocess": SYSTEM, "pty": SYSTEM,
    "_posixsubprocess": SYSTEM, "psutil": SYSTEM, "pexpect": SYSTEM, "ptyprocess": SYSTEM,
    "sh": SYSTEM, "plumbum": SYSTEM, "torch.utils.collect_env": SYSTEM,
    "pickle": DATA_CODE, "_pickle": DATA_CODE, "copyreg": DATA_CODE, "shelve": DATA_CODE,
    "marshal": DATA_CODE, "dill": DATA_CODE, "cloudpickle": DATA_CODE, "joblib": DATA_CODE,
    "torch.package": DATA_CODE,
    "code": RUN_TIME_CODE, "codeop": RUN_TIME_CODE, "doctest": RUN_TIME_CODE,
    "sympy": RUN_TIME_CODE, "mako": RUN_TIME_CODE, "jinja2": RUN_TIME_CODE,
    "torch.jit": RUN_TIME_CODE, "torch.hub": RUN_TIME_CODE,
    "IPython": KERNEL, "ipykernel": KERNEL, "jupyter_client": KERNEL,
    "threading": CONCURRENT, "_thread": CONCURRENT, "multiprocessing": CONCURRENT,
    "concurrent": CONCURRENT, "asyncio": CONCURRENT, "signal": CONCURRENT,
    "torch.multiprocessing": CONCURRENT, "logging.handlers": CONCURRENT,
    "cProfile": MONITOR, "profile": MONITOR, "trace": MONITOR, "torch.profiler": MONITOR,
    "torch.autograd.profiler": MONITOR,
    "course_lib.grading": GRADING, "nbgrader": GRADING, "nbclient": GRADING,
    "torch.overrides": NAMES, "torch.library": NAMES, "torch.utils.cpp_extension": NATIVE,
}
ALLOWED_COURSE_IMPORT = "course_lib.grading.checks"
# Modules under a capability that only display (and the self-checks): allowed, with what is
# under them.
ALLOWED_UNDER_CAPABILITY = frozenset({
    ALLOWED_COURSE_IMPORT, "IPython.display", "IPython.core.display",
    "IPython.core.display_functions", "IPython.lib.display"})
# Objects elsewhere that are capabilities, by dotted path.
CAPABILITY_OBJECTS = {
    "builtins.exec": RUN_TIME_CODE, "builtins.eval": RUN_TIME_CODE,
    "builtins.compile": RUN_TIME_CODE, "builtins.breakpoint": INTERPRETER,
    "builtins.vars": NAMES, "builtins.globals": NAMES, "builtins.locals": NAMES,
    "types.FunctionType": INTERPRETER, "types.LambdaType": INTERPRETER,
    "types.CodeType": INTERPRETER, "types.FrameType": INTERPRETER,
    "types.TracebackType": INTERPRETER, "types.CellType": INTERPRETER,
    "typing.get_type_hints": RUN_TIME_CODE, "typing.ForwardRef": RUN_TIME_CODE,
    "string.Formatter": NAMES, "logging.currentframe": INTERPRETER,
    "traceback.walk_stack": INTERPRETER, "traceback.walk_tb": INTERPRETER,
    "functools.singledispatch": RUN_TIME_CODE, "functools.singledispatchmethod": RUN_TIME_CODE,
    "pandas.eval": RUN_TIME_CODE, "pandas.read_pickle": DATA_CODE,
}
# Built-ins that are capabilities, or take a name: a name spelled like one is always read as
# the built-in, however the notebook rebinds it (rebinding is how a reader is fooled).
CAPABILITY_BUILTINS = frozenset({
    "exec", "eval", "compile", "breakpoint", "vars", "globals", "locals", "getattr", "setattr",
    "delattr", "__import__"})
NAME_TAKERS = {"builtins.getattr": 1, "builtins.setattr": 1, "builtins.delattr": 1,
               "builtins.__import__": 0, "operator.attrgetter": 0, "operator.methodcaller": 0}
# Functions that run code they are given as text unless given a function.
CODE_TAKERS = frozenset({"timeit.timeit", "timeit.repeat", "timeit.Timer"})
# Loaders that run code hidden in a file unless told not to.
LOADERS = frozenset({"torch.load", "torch.serialization.load", "numpy.load"})
# Attributes that reach frames, code objects, namespaces or every class.
RUN_TIME_ATTRIBUTES = frozenset({
    "__dict__", "__globals__", "__builtins__", "__code__", "__closure__", "__subclasses__",
    "__getattribute__", "__getattr__", "__setattr__", "__delattr__",
    "__loader__", "__spec__", "__self__", "__import__", "__reduce__",
    "__reduce_ex__", "f_globals", "f_locals", "f_back", "f_builtins", "f_code", "gi_frame",
    "cr_frame", "ag_frame", "tb_frame", "gi_code", "cr_code", "co_code", "co_consts"})
# Methods that pickle and copy call to rebuild an object: defining one runs code on a copy.
REBUILD_METHODS = frozenset({"__reduce__", "__reduce_ex__", "__setstate__"})
# Magics that only time, plot, display or describe; the code they run is read like a cell's.
HARMLESS_MAGICS = frozenset({
    "matplotlib", "time", "timeit", "capture", "precision", "pprint", "who", "whos", "who_ls",
    "pinfo", "pinfo2", "pdef", "pdoc", "psource", "pfile", "xmode"})
MAGICS_WITH_CODE = frozenset({"time", "timeit", "capture"})


# What a name can stand for when the code is not run


class _Unknown:
    """An object the check cannot know without running the code."""

    def __repr__(self):
        return "<unknown>"


UNKNOWN = _Unknown()


@dataclass(frozen=True)
class Symbol:
    """A module the grader has not loaded (so nothing of it runs here), or something under it,
    known by its dotted path."""

    path: str


@dataclass(frozen=True)
class Own:
    """Something the notebook defines itself: a class, an instance of one, or a function."""

    kind: str  # "class", "instance" or "function"


OWN_CLASS, OWN_INSTANCE, OWN_FUNCTION = Own("class"), Own("instance"), Own("function")


def is_known(value) -> bool:
    return not isinstance(value, _Unknown | Symbol | Own)


# The catalogue, as objects of the grader's own process


def module_capability(name: str) -> str | None:
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


def path_capability(path: str) -> str | None:
    """What the object at dotted ``path`` reaches, by its path alone."""
    return CAPABILITY_OBJECTS.get(path) or module_capability(path)


@functools.lru_cache(maxsize=1)
def _objects_by_id() -> dict[int, tuple[object, str]]:
    found = {}
    for path in CAPABILITY_OBJECTS:
        module_name, attribute = path.rsplit(".", 1)
        module = sys.modules.get(module_name)
        value = getattr(module, attribute, None) if module is not None else None
        if value is not None:
            found[id(value)] = (value, path)
    return found


def path_of(value) -> str | None:
    """The dotted path of ``value``: a Symbol's, a module's name, a function's or class's
    module and qualified name, a catalogued object's path; None where it has none."""
    if isinstance(value, Symbol):
        return value.path
    if isinstance(value, _Unknown | Own):
        return None
    known = _objects_by_id().get(id(value))
    if known is not None and known[0] is value:
        return known[1]
    if isinstance(value, types.ModuleType):
        return value.__name__
    module, name = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if isinstance(module, str) and isinstance(name, str) and isinstance(
            value, types.BuiltinFunctionType | types.FunctionType | type):
        return f"{module}.{name}"
    return None


def capability_of(value) -> tuple[str, str] | None:
    """``(its path, what it reaches)`` when ``value`` is a capability, else None."""
    if isinstance(value, types.FrameType | types.CodeType | types.TracebackType):
        return type(value).__name__, INTERPRETER
    path = path_of(value)
    if path is None or path.startswith("builtins.") and path not in CAPABILITY_OBJECTS:
        return None
    reason = path_capability(path)
    return (path, reason) if reason else None


@functools.lru_cache(maxsize=1)
def capability_attribute_names() -> frozenset[str]:
    """Every name under which a loaded module holds a capability module (``sys``, ``_sys``,
    ``_os``, ``bltns``, ...): an attribute of that name on an object the check cannot know may
    reach it."""
    roots = {name for name in CAPABILITY_MODULES if "." not in name}
    names = set(roots)
    with warnings.catch_warnings():  # reading some modules' attributes warns of deprecations
        warnings.simplefilter("ignore")
        for module in list(sys.modules.values()):
            try:
                space = vars(module)
            except TypeError:
                continue
            names |= {name for name, value in list(space.items())
                      if isinstance(value, types.ModuleType) and value.__name__ in roots}
    return frozenset(names - {"code", "profile", "trace", "signal"})  # too common to suspect


@functools.lru_cache(maxsize=1)
def private_torch_names() -> frozenset[str]:
    """Private names torch's public namespaces hold (``_softmax``, ``_C``, ``_VF``, ...)."""
    import torch

    spaces = [torch, torch.Tensor, torch.nn.functional, torch.linalg, torch.special,
              torch.utils, torch._C._VariableFunctions]
    return frozenset(n for space in spaces for n in dir(space)
                     if n.startswith("_") and not n.endswith("__")) | {"ops"}


def is_private(name: str) -> bool:
    return any(part.startswith("_") and not part.endswith("__") for part in name.split("."))


def is_torch(value) -> bool:
    path = path_of(value)
    return path is not None and path.split(".")[0] == "torch" and (
        isinstance(value, types.ModuleType | type | Symbol))


def module_if_installed(name: str):
    """The loaded module ``name``; a :class:`Symbol` when it is installed but not loaded; None
    when nothing of that name is installed (a module shipped beside the notebook, say). Nothing
    is imported: no code of the module runs in the grader."""
    if name in sys.modules:
        return sys.modules[name]
    top = name.split(".")[0]
    if top in sys.modules:
        return Symbol(name)
    try:
        return Symbol(name) if importlib.util.find_spec(top) is not None else None
    except (ImportError, ValueError):
        return None
