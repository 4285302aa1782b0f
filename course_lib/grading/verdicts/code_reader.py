"""A cell read as the kernel would run it, without running it: :class:`Reader` visits a
cell's syntax tree in order, binding names (:class:`course_lib.grading.verdicts.reach.Reach`)
and noting every capability reached (:mod:`course_lib.grading.verdicts.capabilities`) and every
visible use of a reference: through imports, aliases, attribute chains, calls that take names or
code, loaders, ``match`` patterns and magics.
"""

from __future__ import annotations

import ast
import sys

from course_lib.grading.verdicts.capabilities import (
    ALLOWED_UNDER_CAPABILITY,
    CODE_TAKERS,
    DATA_CODE,
    HARMLESS_MAGICS,
    KERNEL,
    LOADERS,
    MAGICS_WITH_CODE,
    NAME_TAKERS,
    NAMES,
    OWN_CLASS,
    OWN_FUNCTION,
    OWN_INSTANCE,
    REBUILD_METHODS,
    RUN_TIME_CODE,
    SYSTEM,
    UNKNOWN,
    capability_attribute_names,
    capability_of,
    is_known,
    module_if_installed,
    path_of,
)
from course_lib.grading.verdicts.reach import (
    Reach,
    is_constant,
    literal_string,
    unparsed,
)


class Reader(Reach, ast.NodeVisitor):
    """Reads cells in order, keeping what each name is bound to, and notes every capability
    reached (:attr:`held`), every visible use of a reference (:attr:`flags`) and every import
    from ``course_lib`` (:attr:`course_imports`). ``read_code`` is called back with the text of
    code a magic runs."""

    def read(self, tree: ast.AST, *, report: bool) -> None:
        self.reporting = report
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                child._parent = node  # type: ignore[attr-defined]
        self.visit(tree)

    def visit_Import(self, node):
        for alias in node.names:
            self._course_import(alias.name)
            module = self._import(alias.name, f"import {alias.name}")
            if alias.asname:
                self.env[alias.asname] = module
            else:
                top = alias.name.split(".")[0]
                self.env[top] = sys.modules.get(top) or module_if_installed(top) or UNKNOWN

    def visit_ImportFrom(self, node):
        module_name = "." * node.level + (node.module or "")
        if node.level:
            self.hold(f"imports {module_name}, a module of the submission's own")
            return
        self._course_import(module_name)
        allowed = all(f"{module_name}.{a.name}" in ALLOWED_UNDER_CAPABILITY for a in node.names)
        module = self._import(module_name, f"from {module_name} import ...", check=not allowed)
        for alias in node.names:
            if alias.name == "*":
                self._star(module)
                continue
            path = f"from {module_name} import {alias.name}"
            value = self._attribute(module, alias.name, path)
            if alias.name in self.targets:
                self.flags.append(f"imports {alias.name} from {module_name}, which this "
                                  f"exercise re-implements")
            self.env[alias.asname or alias.name] = UNKNOWN if value is None else value

    def visit_Assign(self, node):
        self.visit(node.value)
        for target in node.targets:
            self._bind(target, node.value)
            self.visit(target)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self.visit(node.value)
            self._bind(node.target, node.value)
        self.visit(node.target)
        self.visit(node.annotation)

    def visit_AugAssign(self, node):
        self.visit(node.value)
        self._unbind(node.target)
        self.visit(node.target)

    def visit_NamedExpr(self, node):
        self.visit(node.value)
        self._bind(node.target, node.value)

    def visit_For(self, node):
        self.visit(node.iter)
        self._unbind(node.target)
        for child in node.body + node.orelse:
            self.visit(child)

    visit_AsyncFor = visit_For

    def visit_With(self, node):
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self._unbind(item.optional_vars)
        for child in node.body:
            self.visit(child)

    visit_AsyncWith = visit_With

    def visit_comprehension(self, node):
        self.visit(node.iter)
        self._unbind(node.target)
        for condition in node.ifs:
            self.visit(condition)

    def visit_ExceptHandler(self, node):
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.env[node.name] = UNKNOWN
        for child in node.body:
            self.visit(child)

    def visit_FunctionDef(self, node):
        if self.in_class and node.name in REBUILD_METHODS:
            self.hold(f"defines {node.name}, which copy and pickle call to rebuild an object: "
                      f"{DATA_CODE}")
        for decorator in node.decorator_list:
            self.visit(decorator)
        arguments = [a for a in ast.walk(node.args) if isinstance(a, ast.arg)]
        for default in node.args.defaults + [d for d in node.args.kw_defaults if d]:
            self.visit(default)
        for argument in arguments:  # annotations are evaluated when the def runs
            if argument.annotation is not None:
                self.visit(argument.annotation)
        arguments = [a.arg for a in arguments]
        for index, name in enumerate(arguments):
            self.env[name] = OWN_INSTANCE if self.in_class and index == 0 else UNKNOWN
        self.env[node.name] = OWN_FUNCTION
        outer, self.in_class = self.in_class, 0
        for child in node.body:
            self.visit(child)
        self.in_class = outer
        if node.returns is not None:
            self.visit(node.returns)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        for argument in ast.walk(node.args):
            if isinstance(argument, ast.arg):
                self.env[argument.arg] = UNKNOWN
        self.generic_visit(node)

    def visit_ClassDef(self, node):
        for expression in node.bases + [k.value for k in node.keywords] + node.decorator_list:
            self.visit(expression)
        self.env[node.name] = OWN_CLASS
        self.in_class += 1
        for child in node.body:
            self.visit(child)
        self.in_class -= 1

    def visit_Global(self, node):
        pass

    def visit_Name(self, node):
        if not isinstance(node.ctx, ast.Load):
            if isinstance(node.ctx, ast.Del):
                self.env[node.id] = UNKNOWN
            return
        parent = getattr(node, "_parent", None)
        if isinstance(parent, ast.Attribute) or (isinstance(parent, ast.Call)
                                                 and parent.func is node):
            return  # read with its chain or its call
        value = self.lookup(node.id)
        if node.id == "get_ipython":
            self.hold("get_ipython(): " + KERNEL)
        elif path_of(value) in NAME_TAKERS:
            self.hold(f"{node.id} passed as a value, so the name it takes is computed at run time"
                      f": {NAMES}")
        elif path_of(value) in LOADERS:
            self.hold(f"{node.id} passed as a value, so its arguments cannot be read: "
                      f"{DATA_CODE}")
        elif found := capability_of(value):
            self.hold(f"{node.id}: {found[0]} {found[1]}")
        elif value is UNKNOWN and node.id in capability_attribute_names() \
                and node.id not in self.env:
            self.hold(f"{node.id}, a name no cell binds, may be the module {node.id}")
        elif id(value) in self.target_ids and is_known(value):
            self.flag_use(node.id)

    def visit_Attribute(self, node):
        parent = getattr(node, "_parent", None)
        if isinstance(parent, ast.Attribute) or (isinstance(parent, ast.Call)
                                                 and parent.func is node):
            return  # the outermost attribute, or the call, reads the whole chain
        value = self.evaluate(node)
        if path_of(value) in LOADERS | set(NAME_TAKERS):
            self.hold(f"{unparsed(node)} passed as a value, so its arguments cannot be read: "
                      f"{DATA_CODE if path_of(value) in LOADERS else NAMES}")
        self._visit_chain_root(node)

    def _visit_chain_root(self, node):
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
            self._visit_chain_root(function)
        elif not isinstance(function, ast.Name):
            self.visit(function)
        self._check_call(node, callee)
        for argument in node.args:
            self.visit(argument)
        for keyword in node.keywords:
            self.visit(keyword.value)

    def visit_Match(self, node):
        self.visit(node.subject)
        subject = self.evaluate(node.subject, quiet=True)
        for case in node.cases:
            self.match_subject = subject
            self.visit(case.pattern)
            self.match_subject = UNKNOWN
            if case.guard is not None:
                self.visit(case.guard)
            for child in case.body:
                self.visit(child)

    def visit_MatchClass(self, node):
        """``case C(name=...)`` reads the subject's attribute ``name``."""
        self.visit(node.cls)
        subject, self.match_subject = self.match_subject, UNKNOWN
        for attribute in node.kwd_attrs:
            path = f"case {unparsed(node.cls)}({attribute}=...)"
            if attribute in self.targets:
                self.flag_use(path)
            self._attribute(subject, attribute, path)
        for pattern in node.patterns + node.kwd_patterns:
            self.visit(pattern)

    def visit_MatchAs(self, node):
        if node.name:
            self.env[node.name] = UNKNOWN
        if node.pattern is not None:
            self.visit(node.pattern)

    def _check_call(self, node, callee) -> None:
        path = path_of(callee)
        if isinstance(node.func, ast.Name) and node.func.id == "get_ipython":
            self.hold("get_ipython(): " + KERNEL)
        elif path in NAME_TAKERS:
            self._name_taking_call(node, path)
        elif found := capability_of(callee):
            self.hold(f"{unparsed(node.func)}(): {found[0]} {found[1]}")
        elif path in LOADERS:
            self._loader_call(node, path)
        elif path in CODE_TAKERS:
            self._code_taking_call(node, path)
        elif isinstance(node.func, ast.Attribute) and node.func.attr in ("eval", "query") \
                and not is_known(callee) and node.args:
            self.hold(f"{unparsed(node.func)}(...) evaluates an expression given as text: "
                      f"{RUN_TIME_CODE}")
        elif isinstance(node.func, ast.Name) and id(callee) in self.target_ids \
                and is_known(callee):
            self.flag_use(node.func.id)

    def _name_taking_call(self, node, path: str) -> None:
        """``getattr``, ``setattr``, ``delattr``, ``__import__``, ``operator.attrgetter`` and
        ``methodcaller``: read like the attribute or import they name when that name is a
        literal; held otherwise."""
        name = path.rsplit(".", 1)[-1]
        position = NAME_TAKERS[path]
        arguments = node.args if name == "attrgetter" else node.args[position:position + 1]
        texts = [literal_string(a) for a in arguments]
        if not texts or None in texts or any(isinstance(a, ast.Starred) for a in node.args):
            self.hold(f"{unparsed(node.func)}() with a name computed at run time: {NAMES}")
        elif name == "__import__":
            self._import(texts[0], f"__import__({texts[0]!r})")
        elif name in ("attrgetter", "methodcaller"):
            for text in texts:
                value = UNKNOWN
                for part in text.split("."):
                    if part in self.targets:
                        self.flag_use(f"{name}({text!r})")
                    value = self._attribute(value, part, f"{name}({text!r})")
                    if value is None:
                        break
        else:
            target = self.evaluate(node.args[0], quiet=True)
            shown = f"{name}({unparsed(node.args[0])}, {texts[0]!r})"
            if texts[0] in self.targets:
                self.flag_use(shown)
            self._attribute(target, texts[0], shown)

    def _loader_call(self, node, path: str) -> None:
        """``torch.load`` unless ``weights_only`` is left alone or True, ``numpy.load`` unless
        ``allow_pickle`` is left alone or False; arguments spread with ``*``/``**`` are held."""
        shown = unparsed(node.func)
        if any(isinstance(a, ast.Starred) for a in node.args) \
                or any(k.arg is None for k in node.keywords):
            self.hold(f"{shown}(*..., **...): its arguments cannot be read: {DATA_CODE}")
            return
        for keyword in node.keywords:
            if path.startswith("torch") and (keyword.arg == "pickle_module" or (
                    keyword.arg == "weights_only" and not is_constant(keyword.value, True))):
                self.hold(f"{shown}(..., {keyword.arg}=...): {DATA_CODE}")
            if path.startswith("numpy") and keyword.arg == "allow_pickle" \
                    and not is_constant(keyword.value, False):
                self.hold(f"{shown}(..., allow_pickle=...): {DATA_CODE}")
        if path.startswith("numpy") and len(node.args) >= 3 \
                and not is_constant(node.args[2], False):
            self.hold(f"{shown}(..., allow_pickle given by position): {DATA_CODE}")
        if path.startswith("torch") and len(node.args) >= 3:
            self.hold(f"{shown}(...) with a pickle module given by position: {DATA_CODE}")

    def _code_taking_call(self, node, path: str) -> None:
        """``timeit.timeit`` and its kin run text as code: allowed only with functions."""
        given = node.args[:2] + [k.value for k in node.keywords if k.arg in ("stmt", "setup")]
        for argument in given:
            if isinstance(argument, ast.Lambda):
                continue
            if isinstance(argument, ast.Name) and self.lookup(argument.id) is OWN_FUNCTION:
                continue
            self.hold(f"{unparsed(node.func)}() given code as text or an unknown value: "
                      f"{RUN_TIME_CODE}")
            return

    def _magic(self, node) -> bool:
        """Read ``get_ipython().run_line_magic(...)`` and friends, as IPython writes them."""
        function = node.func
        if not (isinstance(function, ast.Attribute) and isinstance(function.value, ast.Call)
                and isinstance(function.value.func, ast.Name)
                and function.value.func.id == "get_ipython"):
            return False
        kind = function.attr
        arguments = [literal_string(a) for a in node.args]
        if kind in ("system", "getoutput"):
            command = (arguments or [""])[0] or ""
            self.hold(f"runs a shell command (!{command[:40]}): {SYSTEM}")
        elif kind not in ("run_line_magic", "run_cell_magic") or not arguments \
                or None in arguments:
            self.hold(f"get_ipython().{kind}(...): {KERNEL}")
        elif arguments[0] not in HARMLESS_MAGICS:
            self.hold(f"runs the magic %{arguments[0]}: {KERNEL}")
        elif arguments[0] in MAGICS_WITH_CODE and self.read_code is not None:
            self.read_code(self, arguments[0], arguments[1] if len(arguments) > 1 else "",
                           arguments[2] if kind == "run_cell_magic" and len(arguments) > 2
                           else None)
        return True
