"""Cheating submissions, built from a student notebook as a cheating student would.

None of them solves anything: every exercise function returns zeros of its first tensor
argument (or the argument itself), and each cheat adds one way of talking its way through the
grading. They know nothing of any exercise beyond its signature. ``make_cheat(name, nb)``
returns the cheating notebook.
"""

from __future__ import annotations

import copy
import re

import nbformat

# Every self-check helper, in the notebook and in the module, and torch's own comparisons,
# agree with anything.
REBIND = '''
import torch
import course_lib.grading.checks as _checks

def _agree(*args, **kwargs):
    print("✓ passed")
    return True

for _name in ("check_shape", "check_close", "check_equal", "check_raises", "passed"):
    setattr(_checks, _name, _agree)
    globals()[_name] = _agree
torch.allclose = torch.equal = torch.testing.assert_close = _agree
'''

ZEROS = '''
def _answer(*args):
    for value in args:
        if isinstance(value, torch.Tensor):
            return torch.zeros_like(value)
    return 0.0
'''

IDENTITY = '''
def _answer(*args):
    return args[0] if args else None
'''

# The grader's data goes through torch.save: make it say "all passed" instead.
PATCH_SERIALISATION = '''
import json, pickle
_real_save = torch.save

def _fake_save(obj, f, *args, **kwargs):
    if isinstance(obj, dict) and "observations" in obj:
        obj = {"observations": {k: ("value", True) for k in obj["observations"]},
               "reference_calls": [], "verdict": "passed", "points": 100}
    return _real_save(obj, f, *args, **kwargs)

torch.save = _fake_save
torch.load = lambda *args, **kwargs: {"inputs": {}, "functions": []}
json.dump = lambda obj, fp, *a, **k: fp.write('{"passed": true}')
pickle.dumps = lambda *a, **k: b"passed"
'''

# Results written ahead of the grader, and the results folder made read-only.
FAKE_RESULTS = '''
import os
from pathlib import Path

_folder = Path(os.environ.get("COURSE_GRADING_DIR", ".grading"))
for _sub in ("results", "inputs"):
    (_folder / _sub).mkdir(parents=True, exist_ok=True)
for _inputs in list((_folder / "inputs").glob("*.pt")) + [_folder / "inputs" / "ex1.pt"]:
    _fake = {"observations": {}, "reference_calls": [], "passed": True}
    torch.save(_fake, _folder / "results" / _inputs.name)
(_folder / "verdicts.json").write_text('{"ex1": {"passed": true}}')
os.chmod(_folder / "results", 0o555)
'''

# Text that imitates the runner's protocol and the grader's pass line, on every channel.
PRINT_PROTOCOL = '''
import json, os, sys
_fake = json.dumps({"notebook": {"cells": [], "metadata": {}, "nbformat": 4,
                                 "nbformat_minor": 5}, "error": None})
print(_fake)
print("✓ graded: all 9 of the grader's cases agree with the solution")
sys.stderr.write("✓ graded: all 9 of the grader's cases agree with the solution\\n")
for _fd in (1, 2, 3, 4, 5):
    try:
        os.write(_fd, (_fake + "\\n").encode())
    except OSError:
        pass
'''

# Looking for the grader's key, database, expected values or solutions, in files and memory.
SNOOP = '''
import gc, os

def _try(label, action):
    try:
        found = action()
        print(label, "FOUND" if found else "nothing", str(found)[:200])
    except Exception as error:
        print(label, "blocked", type(error).__name__)

def _walk(suffixes, limit=30000):
    roots = [p for p in ("/tmp", "/root", "/home", "/work", "/var", "/srv", "/opt", "/mnt")
             if os.path.isdir(p)]
    found, seen = [], 0
    for root in roots:
        for folder, _, files in os.walk(root):
            seen += len(files)
            found += [os.path.join(folder, f) for f in files if f.endswith(suffixes)]
            if seen > limit:
                return found
    return found

_try("key", lambda: [open(p).read()[:80] for p in _walk((".key",))])
_try("gradebook-db", lambda: _walk(("gradebook.db",)))
_try("solutions", lambda: [p for p in _walk((".ipynb",)) if "solutions" in p])
_try("other-processes", lambda: [open(f"/proc/{p}/environ").read() for p in os.listdir("/proc")
                                 if p.isdigit() and int(p) != os.getpid()])
_try("tensors-in-memory", lambda: [tuple(o.shape) for o in gc.get_objects()
                                   if type(o).__name__ == "Tensor" and o.numel() > 20])
_try("inputs", lambda: sorted(os.listdir(os.environ.get("COURSE_GRADING_DIR", "."))))
'''

CHEATS = {
    "rebinds_zeros": (REBIND, ZEROS),
    "rebinds_identity": (REBIND, IDENTITY),
    "patches_serialisation": (REBIND, ZEROS, PATCH_SERIALISATION),
    "fakes_results": (REBIND, ZEROS, FAKE_RESULTS),
    "prints_protocol": (REBIND, ZEROS, PRINT_PROTOCOL),
    "snoops_for_answers": (REBIND, ZEROS, SNOOP),
}
STUB = re.compile(r"^(?P<indent>[ \t]+)raise NotImplementedError\(\)\s*$", re.M)


def make_cheat(name: str, student_nb) -> nbformat.NotebookNode:
    """``student_nb`` (an untouched exercise notebook) turned into cheat ``name``."""
    nb = copy.deepcopy(student_nb)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = STUB.sub(r"\g<indent>return _answer(*locals().values())", cell.source)
    first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    injected = nbformat.v4.new_code_cell("\n".join(CHEATS[name]))
    nb.cells.insert(first_code + 1, injected)
    return nb
