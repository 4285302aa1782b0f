"""What an expression reaches, read without running it: the state and the evaluation that
:class:`course_lib.grading.verdicts.code_reader.Reader` walks a cell with.

:class:`Reach` keeps what each name of the notebook is bound to (``env``): a real object of the
grader's own process (a module already loaded here, or something under it), a
:class:`~course_lib.grading.verdicts.capabilities.Symbol` (a module the grader has not loaded,
known by its path), the notebook's own class, instance or function, or UNKNOWN; and it follows an
attribute chain from there, noting every capability met on the way.
"""

from __future__ import annotations

import ast
import builtins
import sys

from course_lib.grading.verdicts.capabilities import (
    ALLOWED_COURSE_IMPORT,
    CAPABILITY_BUILTINS,
    INTERPRETER,
    NAME_TAKERS,
    OWN_CLASS,
    OWN_INSTANCE,
    RUN_TIME_ATTRIBUTES,
    UNKNOWN,
    Own,
    Symbol,
    capability_attribute_names,
    capability_of,
    is_known,
    is_private,
    is_torch,
    module_capability,
    module_if_installed,
    path_of,
    private_torch_names,
)


class Reach:
    """The names a notebook binds and what its expressions reach. Findings: :attr:`held`
    (capabilities), :attr:`flags` (visible uses of a reference: one of the names in
    ``targets``, or an object in ``target_objects``), :attr:`course_imports`."""

    def __init__(self, targets: frozenset[str] = frozenset(), target_objects: tuple = (),
                 read_code=None):
        self.env: dict[str, object] = {}
        self.targets, self.target_ids = targets, {id(t) for t in target_objects}
        self.read_code = read_code
        self.held: list[str] = []
        self.flags: list[str] = []
        self.course_imports: list[str] = []
        self.reporting = True
        self.in_class = 0
        self.match_subject = UNKNOWN

    def hold(self, text: str) -> None:
        if self.reporting:
            self.held.append(text)

    def flag_use(self, text: str) -> None:
        self.flags.append(f"uses {text[-80:]}, which this exercise re-implements")

    def lookup(self, name: str):
        if name in CAPABILITY_BUILTINS:
            return getattr(builtins, name)
        if name in self.env:
            return self.env[name]
        return getattr(builtins, name, UNKNOWN)

    def evaluate(self, node, quiet: bool = False):
        """The object ``node`` is, where the check can know it (else UNKNOWN), noting every
        capability met on the way unless ``quiet`` (the node is read on its own elsewhere)."""
        if isinstance(node, ast.Name):
            return self.lookup(node.id)
        if isinstance(node, ast.Attribute):
            root, attributes = attribute_path(node)
            value = self.evaluate(root, quiet=True)
            path = unparsed(root)
            for attribute in attributes:
                path = f"{path}.{attribute}"
                if not quiet and attribute in self.targets and value is not OWN_INSTANCE:
                    self.flag_use(path)
                value = self._attribute(value, attribute, path, quiet=quiet)
                if value is None:
                    return UNKNOWN
            if not quiet and id(value) in self.target_ids and is_known(value) \
                    and attributes[-1] not in self.targets:
                self.flag_use(path)
            return value
        if isinstance(node, ast.Call):
            callee = self.evaluate(node.func, quiet=True)
            if callee is OWN_CLASS:
                return OWN_INSTANCE
            position = NAME_TAKERS.get(path_of(callee))
            if position == 1 and path_of(callee) == "builtins.getattr" and len(node.args) >= 2:
                name = literal_string(node.args[1])
                if name is not None:
                    found = self._attribute(self.evaluate(node.args[0], quiet=True), name,
                                            f"getattr(..., {name!r})", quiet=True)
                    return UNKNOWN if found is None else found
            if path_of(callee) == "builtins.__import__" and node.args:
                name = literal_string(node.args[0])
                if name is not None:
                    return sys.modules.get(name.split(".")[0]) or Symbol(name.split(".")[0])
            return UNKNOWN
        return UNKNOWN

    def _attribute(self, value, attribute: str, path: str, quiet: bool = False):
        """``value.attribute`` for the check, noting a capability it reaches. Returns None once
        a capability is met (nothing further along the chain needs reading)."""
        def held(text):
            if not quiet:
                self.hold(text)

        if attribute == "__dict__" and isinstance(value, Own):
            return UNKNOWN  # the notebook's own object's attributes, as it set them
        if attribute in RUN_TIME_ATTRIBUTES:
            held(f"{path}: {INTERPRETER} (frames, code objects, namespaces)")
            return None
        if not is_known(value) and attribute in capability_attribute_names():
            held(f"{path} may be the module {attribute.lstrip('_')}")
            return None
        if isinstance(value, Own):
            return UNKNOWN  # the notebook's own objects hold what the notebook put there
        if value is UNKNOWN:
            if attribute in private_torch_names():
                held(f"{path} may be {attribute}, a private torch name")
                return None
            return UNKNOWN
        if is_torch(value) and (attribute == "ops" or is_private(attribute)):
            held(f"{path}: a private torch name")
            return None
        if isinstance(value, Symbol):
            reached = Symbol(f"{value.path}.{attribute}")
        else:
            try:
                reached = getattr(value, attribute)
            except Exception:  # noqa: BLE001 - a lazy attribute that fails, a missing name
                return UNKNOWN
        found = capability_of(reached)
        if found:
            held(f"{path}: {found[0]} {found[1]}")
            return None
        return reached

    def _import(self, name: str, path: str, check: bool = True):
        """The imported module, noting a capability or a module that is not installed."""
        reason = module_capability(name) if check else None
        if reason:
            self.hold(f"{path}: the module {name} {reason}")
        module = module_if_installed(name)
        if module is None:
            self.hold(f"{path}: no module {name} is installed for grading, so it can only be "
                      f"code shipped beside the notebook, which this check cannot read")
            return UNKNOWN
        if not reason and name.split(".")[0] == "torch" and is_private(name):
            self.hold(f"{path}: a private torch module")
        return module

    def _star(self, module) -> None:
        """``from module import *`` binds its public names; a capability among them is held
        where it is used, not here."""
        if not is_known(module):
            return
        names = getattr(module, "__all__", None) or [n for n in vars(module)
                                                      if not n.startswith("_")]
        for name in names:
            self.env[name] = getattr(module, name, UNKNOWN)

    def _course_import(self, module_name: str) -> None:
        if module_name.split(".")[0] == "course_lib" and module_name != ALLOWED_COURSE_IMPORT:
            self.course_imports.append(f"imports {module_name}")

    def _bind(self, target, value_node) -> None:
        """Bind ``target`` to what ``value_node`` is (every value is read before any binding,
        as Python does: ``a, b = b, a``)."""
        if isinstance(target, ast.Name):
            self.env[target.id] = self.evaluate(value_node, quiet=True)
        elif isinstance(target, ast.Tuple | ast.List):
            if isinstance(value_node, ast.Tuple | ast.List) \
                    and len(value_node.elts) == len(target.elts):
                values = [self.evaluate(item, quiet=True) for item in value_node.elts]
            else:
                values = [UNKNOWN] * len(target.elts)
            for sub, value in zip(target.elts, values, strict=True):
                if isinstance(sub, ast.Name):
                    self.env[sub.id] = value
                else:
                    self._unbind(sub)
        else:
            self._unbind(target)

    def _unbind(self, target) -> None:
        """Every name ``target`` binds now stands for something unknown (``a.b = ...`` and
        ``a[i] = ...`` bind no name)."""
        if isinstance(target, ast.Name):
            self.env[target.id] = UNKNOWN
        elif isinstance(target, ast.Tuple | ast.List):
            for item in target.elts:
                self._unbind(item)
        elif isinstance(target, ast.Starred):
            self._unbind(target.value)


def is_constant(node, value) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def literal_string(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def attribute_path(node) -> tuple[ast.AST, list[str]]:
    """``a.b.c`` as (the node ``a``, ["b", "c"]), whatever ``a`` is."""
    attributes = []
    while isinstance(node, ast.Attribute):
        attributes.append(node.attr)
        node = node.value
    return node, attributes[::-1]


def unparsed(node) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 80 else text[:77] + "..."
