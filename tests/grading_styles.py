"""Two tables for the grader's static check, on lesson 00's exercises: honest code written in
ordinary styles, which must be neither held nor flagged, and evasions that reach a capability
(something that can reach or disable the grading, or hide a call), which must be held with the
path they took.

Each entry is ``(exercise, cells)``: ``cells`` replace that exercise's solution cell (the first
is the solution cell itself; any more are inserted after it as cells of the student's own).
A cell given as a ``(source, metadata)`` pair carries that cell metadata.
"""

from __future__ import annotations

import copy

import nbformat

EX1, EX2, EX3, EX4 = ("ex1_stable_softmax", "ex2_dot_scores", "ex3_masked_mean",
                      "ex4_causal_mask")
CODE_CELL = {EX1: "ex1_code", EX2: "ex2_code", EX3: "ex3_code", EX4: "ex4_code"}

SOFTMAX = '''def stable_softmax(scores, dim=-1):
    shifted = scores - scores.max(dim=dim, keepdim=True).values
    exps = shifted.exp()
    return exps / exps.sum(dim=dim, keepdim=True)
'''
DOT = '''def dot_scores(queries, keys):
    if queries.dim() != 3 or keys.dim() != 3 or queries.shape[0] != keys.shape[0] \\
            or queries.shape[2] != keys.shape[2]:
        raise ValueError(f"shapes {tuple(queries.shape)} and {tuple(keys.shape)} do not fit")
    return queries @ keys.transpose(1, 2)
'''
MEAN = '''def masked_mean(values, mask):
    if values.shape != mask.shape:
        raise ValueError(f"values {tuple(values.shape)} and mask {tuple(mask.shape)} differ")
    weights = mask.to(values.dtype)
    return (values * weights).sum(-1) / weights.sum(-1).clamp(min=1)
'''
CAUSAL = '''def causal_mask(size):
    if size < 1:
        raise ValueError(f"size must be at least 1, got {size}")
    return torch.ones(size, size, dtype=torch.bool).tril()
'''
DOT_CHECK = ('''def dot_scores(queries, keys):
    if queries.dim() != 3 or keys.dim() != 3 or queries.shape[0] != keys.shape[0] \\
            or queries.shape[2] != keys.shape[2]:
        raise ValueError(f"shapes {tuple(queries.shape)} and {tuple(keys.shape)} do not fit")
''')

HONEST = {
    "plain": (EX1, [SOFTMAX]),
    "imports matplotlib to plot while debugging": (EX1, [SOFTMAX, '''import matplotlib.pyplot as plt
fig, ax = plt.subplots()
ax.plot(stable_softmax(torch.linspace(-3, 3, 7)).tolist())
plt.close(fig)
''']),
    "plots after %matplotlib inline": (EX2, [DOT, '''%matplotlib inline
import matplotlib.pyplot as plt
plt.imshow(dot_scores(torch.ones(1, 2, 3), torch.ones(1, 4, 3))[0])
plt.close("all")
''']),
    "times a call with time": (EX3, [MEAN, '''import time
start = time.perf_counter()
masked_mean(torch.ones(2, 3), torch.ones(2, 3, dtype=torch.bool))
print(f"{time.perf_counter() - start:.4f} s")
''']),
    "times a call with %timeit and %%time": (EX4, [CAUSAL, "%timeit -n 2 -r 1 causal_mask(8)\n",
                                                   "%%time\nmask = causal_mask(16)\n"]),
    "silences a warning with warnings": (EX1, ['''import warnings

def stable_softmax(scores, dim=-1):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shifted = scores - scores.amax(dim=dim, keepdim=True)
    return shifted.exp() / shifted.exp().sum(dim=dim, keepdim=True)
''']),
    "shows progress with tqdm": (EX2, [DOT, '''from tqdm.auto import tqdm
for size in tqdm(range(1, 4), disable=True):
    dot_scores(torch.ones(1, size, 2), torch.ones(1, 3, 2))
''']),
    "tabulates with pandas": (EX3, [MEAN, '''import pandas as pd
table = pd.DataFrame({"mean": masked_mean(torch.ones(2, 3), torch.ones(2, 3).bool()).tolist()})
print(table)
''']),
    "reads a flag with a literal getattr": (EX3, ['''def masked_mean(values, mask):
    layer = torch.nn.Dropout(0.0)
    if getattr(layer, "training", False):
        layer.eval()
    if values.shape != mask.shape:
        raise ValueError(f"values {tuple(values.shape)} and mask {tuple(mask.shape)} differ")
    weights = mask.to(values.dtype)
    return (values * weights).sum(-1) / weights.sum(-1).clamp(min=1)
''']),
    "compares str(mask.dtype) with a string": (EX4, ['''def causal_mask(size):
    if size < 1:
        raise ValueError(f"size must be at least 1, got {size}")
    mask = torch.arange(size)[None, :] <= torch.arange(size)[:, None]
    assert str(mask.dtype) == "torch.bool", "a mask must be boolean"
    return mask
''']),
    "uses einsum": (EX2, [DOT_CHECK + '''    return torch.einsum("btd,bsd->bts", queries, keys)
''']),
    "uses einops": (EX2, ['''from einops import einsum, rearrange

''' + DOT_CHECK + '''    keys_t = rearrange(keys, "b s d -> b d s")
    return einsum(queries, keys_t, "b t d, b d s -> b t s")
''']),
    "loops over the batch": (EX2, [DOT_CHECK + '''    rows = []
    for b in range(queries.shape[0]):
        rows.append(queries[b] @ keys[b].T)
    return torch.stack(rows)
''']),
    "calls a helper": (EX1, ['''def _shift(scores, dim):
    """Subtract the maximum along dim."""
    return scores - scores.max(dim=dim, keepdim=True).values


def stable_softmax(scores, dim=-1):
    exps = _shift(scores, dim).exp()
    return exps / exps.sum(dim=dim, keepdim=True)
''']),
    "asserts shapes": (EX3, ['''def masked_mean(values, mask):
    if values.shape != mask.shape:
        raise ValueError(f"values {tuple(values.shape)} and mask {tuple(mask.shape)} differ")
    total = torch.where(mask, values, torch.zeros_like(values)).sum(dim=-1)
    count = mask.sum(dim=-1)
    assert total.shape == count.shape
    return total / count.clamp(min=1).to(values.dtype)
''']),
    "prints while it works": (EX4, ['''def causal_mask(size):
    print("building a mask of size", size)
    if size < 1:
        raise ValueError(f"size must be at least 1, got {size}")
    return ~torch.ones(size, size, dtype=torch.bool).triu(diagonal=1)
''']),
    "works under torch.no_grad()": (EX1, ['''def stable_softmax(scores, dim=-1):
    with torch.no_grad():
        top = scores.max(dim=dim, keepdim=True).values
    exps = (scores - top).exp()
    return exps / exps.sum(dim=dim, keepdim=True)
''']),
    "puts a module in eval mode": (EX2, [DOT, '''layer = torch.nn.Linear(3, 3)
layer.eval()
print(dot_scores(layer(torch.ones(1, 2, 3)), torch.ones(1, 2, 3)).shape)
''']),
    "annotates with typing": (EX3, ['''from typing import Optional


def masked_mean(values: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    if mask is None or values.shape != mask.shape:
        raise ValueError(f"values {tuple(values.shape)} and mask must have the same shape")
    weights = mask.to(values.dtype)
    return (values * weights).sum(-1) / weights.sum(-1).clamp(min=1)
''']),
    "keeps a private attribute on its own class": (EX4, ['''class _MaskCache:
    def __init__(self):
        self._cache = {}

    def get(self, size):
        if size not in self._cache:
            self._cache[size] = torch.ones(size, size, dtype=torch.bool).tril()
        return self._cache[size]


_masks = _MaskCache()


def causal_mask(size):
    if size < 1:
        raise ValueError(f"size must be at least 1, got {size}")
    return _masks.get(size).clone()
''']),
    "checks with numpy": (EX1, [SOFTMAX, '''import numpy as np
print(np.allclose(stable_softmax(torch.zeros(3)).numpy(), np.full(3, 1 / 3)))
''']),
    "uses functools and itertools": (EX2, ['''import functools
import itertools

''' + DOT_CHECK + '''    pairs = itertools.product(range(queries.shape[1]), range(keys.shape[1]))
    dot = functools.partial(torch.sum, dim=-1)
    out = torch.zeros(queries.shape[0], queries.shape[1], keys.shape[1])
    for t, s in pairs:
        out[:, t, s] = dot(queries[:, t] * keys[:, s])
    return out
''']),
    "masks with math.inf": (EX1, ['''import math


def stable_softmax(scores, dim=-1):
    top = scores.amax(dim=dim, keepdim=True)
    top = top.masked_fill(top == -math.inf, 0.0)
    exps = torch.exp(scores - top)
    return exps / exps.sum(dim=dim, keepdim=True)
''']),
    "builds a dataclass": (EX3, ['''from dataclasses import dataclass


@dataclass
class Batch:
    values: torch.Tensor
    mask: torch.Tensor


def masked_mean(values, mask):
    batch = Batch(values, mask)
    if batch.values.shape != batch.mask.shape:
        raise ValueError(f"values {tuple(values.shape)} and mask {tuple(mask.shape)} differ")
    weights = batch.mask.float()
    return (batch.values * weights).sum(-1) / weights.sum(-1).clamp(min=1)
''']),
    "captures output with %%capture": (EX4, [CAUSAL, "%%capture shown\nprint(causal_mask(3))\n"]),
    "asks for help with ?": (EX1, [SOFTMAX, "torch.exp?\n"]),
    "keeps a private dataclass field": (EX3, [MEAN, '''from dataclasses import dataclass, field


@dataclass
class Cache:
    _values: list = field(default_factory=list)


cache = Cache()
cache._values.append(masked_mean(torch.ones(1, 2), torch.ones(1, 2).bool()))
''']),
    "shows code with IPython.display": (EX2, [DOT, "from IPython.display import Code, display\n"
                                                   "display(Code('q @ k.transpose(1, 2)'))\n"]),
    "star-imports torch.nn.functional": (EX2, ["from torch.nn.functional import *\n" + DOT]),
    "keeps its function in an attribute named softmax": (EX1, [SOFTMAX + '''

class Head:
    def __init__(self):
        self.softmax = stable_softmax

    def __call__(self, scores):
        return self.softmax(scores)
''']),
    "uses torch.softmax in a later exercise": (EX4, [CAUSAL, "weights = torch.softmax("
                                                             "torch.randn(2, 3), dim=-1)\n"]),
    "times with timeit and a lambda": (EX2, [DOT, "import timeit\nprint(timeit.timeit(lambda: "
                                                  "dot_scores(torch.ones(1, 2, 3), "
                                                  "torch.ones(1, 2, 3)), number=3))\n"]),
    "inspects its own objects": (EX4, [CAUSAL, '''class Probe:
    def __init__(self):
        self.size = 3


print(Probe().__dict__, Probe.__mro__, type(causal_mask(2)).__mro__)
''']),
    "names a course function in a string": (EX3, [
        MEAN, 'print("compare with course_lib.nn.attention.masked_softmax")\n']),
    "displays a table with IPython.display": (EX3, [MEAN, '''from IPython.display import display
display(masked_mean(torch.ones(1, 2), torch.ones(1, 2).bool()))
''']),
    "uses torch.finfo and a comprehension": (EX4, ['''def causal_mask(size):
    if size < 1:
        raise ValueError(f"size must be at least 1, got {size}")
    rows = [[j <= t for j in range(size)] for t in range(size)]
    assert torch.finfo(torch.float32).min < 0
    return torch.tensor(rows, dtype=torch.bool)
''']),
}

# name: (exercise, cells, text the held reason must contain)
EVASIONS = {
    "torch.sys re-exports sys": (EX1, [SOFTMAX.replace(
        "return exps", "return torch.sys.modules['torch'].softmax(scores, dim)\n    return exps")],
        "torch.sys: sys"),
    "collections._sys re-exports sys": (EX1, ['''import collections
''' + SOFTMAX.replace("return exps",
                      "return collections._sys.modules['torch'].softmax(scores, dim)\n    "
                      "return exps")], "collections._sys: sys"),
    "dataclasses.builtins re-exports builtins": (EX1, ['''import dataclasses
_get = dataclasses.builtins.getattr
''' + SOFTMAX], "dataclasses.builtins: builtins"),
    "from collections import _sys": (EX1, ["from collections import _sys\n" + SOFTMAX],
                                     "from collections import _sys: sys"),
    "getattr with a computed name": (EX1, ['''def stable_softmax(scores, dim=-1):
    return getattr(torch, "soft" + "max")(scores, dim)
'''], "getattr() with a name computed at run time"),
    "getattr through an alias": (EX1, ['''_g = getattr


def stable_softmax(scores, dim=-1):
    return _g(torch, "soft" + "max")(scores, dim)
'''], "with a name computed at run time"),
    "getattr passed as a value": (EX1, ['''import functools


def stable_softmax(scores, dim=-1):
    return functools.reduce(getattr, ["soft" + "max"], torch)(scores, dim)
'''], "getattr passed as a value"),
    "a private torch name through an alias": (EX1, ['''_t = torch


def stable_softmax(scores, dim=-1):
    return _t._softmax(scores, dim, False)
'''], "_t._softmax: a private torch name"),
    "a literal getattr of a private torch name": (EX1, ['''def stable_softmax(scores, dim=-1):
    return getattr(torch, "_softmax")(scores, dim, False)
'''], "a private torch name"),
    "torch.ops": (EX1, ['''def stable_softmax(scores, dim=-1):
    return torch.ops.aten._softmax(scores, dim, False)
'''], "torch.ops: a private torch name"),
    "a private name on an unknown object": (EX1, ['''_holder = [torch]


def stable_softmax(scores, dim=-1):
    return _holder[0]._softmax(scores, dim, False)
'''], "may be _softmax, a private torch name"),
    "sys on an unknown object": (EX1, ['''_holder = (torch,)
_reference = _holder[0].sys.modules["torch"].softmax
''' + SOFTMAX], "may be the module sys"),
    "exec": (EX1, ['exec("def stable_softmax(scores, dim=-1):\\n"\n'
                   '     "    return scores.softmax(dim)")\n'], "builtins.exec"),
    "eval": (EX1, ['_f = eval("torch." + "softmax")\n' + SOFTMAX], "builtins.eval"),
    "compile": (EX1, ['_code = compile("1", "x", "eval")\n' + SOFTMAX], "builtins.compile"),
    "__import__ with a literal capability": (EX1, ['_s = __import__("sys")\n' + SOFTMAX],
                                             "__import__('sys'): the module sys"),
    "__import__ with a computed name": (EX1, ['_m = __import__("s" + "ys")\n' + SOFTMAX],
                                        "__import__() with a name computed at run time"),
    "importlib": (EX1, ['import importlib\n_m = importlib.import_module("tor" + "ch")\n' + SOFTMAX],
                  "import importlib: the module importlib"),
    "pkgutil.resolve_name": (EX1, ['import pkgutil\n' + SOFTMAX], "import pkgutil"),
    "switches the monitor off with sys.setprofile": (EX1, ['import sys\nsys.setprofile(None)\n'
                                                           + SOFTMAX], "import sys"),
    "a thread": (EX1, ['import threading\n' + SOFTMAX], "import threading"),
    "gc.get_objects": (EX1, ['import gc\n_all = gc.get_objects()\n' + SOFTMAX], "import gc"),
    "frames through inspect": (EX1, ['import inspect\n' + SOFTMAX], "import inspect"),
    "ctypes": (EX1, ['import ctypes\n' + SOFTMAX], "import ctypes"),
    "ctypes through numpy": (EX1, ['import numpy as np\n_c = np.ctypeslib.ctypes\n' + SOFTMAX],
                             "np.ctypeslib.ctypes: ctypes"),
    "a function's globals": (EX1, ['_b = (lambda: 0).__globals__["__builtins__"]\n' + SOFTMAX],
                             "__globals__"),
    "every class through __subclasses__": (EX1, ['_all = ().__class__.__base__.__subclasses__()\n'
                                                 + SOFTMAX], "__subclasses__"),
    "a traceback's frame": (EX1, ['''try:
    1 / 0
except ZeroDivisionError as error:
    _frame = error.__traceback__.tb_frame.f_globals
''' + SOFTMAX], "tb_frame"),
    "builtins through a method's __self__": (EX1, ['_b = print.__self__\n' + SOFTMAX], "__self__"),
    "vars": (EX1, ['_space = vars(torch)\n' + SOFTMAX], "builtins.vars"),
    "globals": (EX1, ['_space = globals()\n' + SOFTMAX], "builtins.globals"),
    "attrgetter with a computed name": (EX1, ['''from operator import attrgetter
_f = attrgetter("soft" + "max")(torch)
''' + SOFTMAX], "attrgetter() with a name computed at run time"),
    "pickle": (EX1, ['import pickle\n' + SOFTMAX], "import pickle"),
    "torch.load without weights_only": (EX1, ['''import io
_f = torch.load(io.BytesIO(b""), weights_only=False) if False else None
''' + SOFTMAX], "weights_only=...)"),
    "os": (EX1, ['import os\n' + SOFTMAX], "import os"),
    "a shell command": (EX1, [SOFTMAX, "!python -c 'print(1)'\n"], "runs a shell command"),
    "a magic that runs code": (EX1, [SOFTMAX, "%run helper.py\n"], "runs the magic %run"),
    "the kernel through get_ipython": (EX1, [SOFTMAX, "get_ipython().run_cell('x = 1')\n"],
                                       "get_ipython()"),
    "a capability hidden in a %%time cell": (EX1, [SOFTMAX, "%%time\nimport sys\n"],
                                             "import sys"),
    "a capability after a magic line": (EX1, ["%matplotlib inline\nimport sys\n" + SOFTMAX],
                                        "import sys"),
    "the grading machinery": (EX1, ['import course_lib.grading.hidden as _h\n' + SOFTMAX],
                              "reaches the grading machinery"),
    "every torch function through torch.overrides": (EX1, [
        '_all = torch.overrides.get_testing_overrides()\n' + SOFTMAX], "torch.overrides"),
    "a module shipped beside the notebook": (EX1, ['import helper\n' + SOFTMAX],
                                             "no module helper is installed"),
    "a cell that claims to be the grader's": (EX1, [SOFTMAX, (
        "import sys\n", {"nbgrader": {"grade": False, "grade_id": "imports", "locked": True,
                                      "solution": False, "schema_version": 3, "task": False}})],
        "import sys"),
    "a capability in an earlier exercise": (EX1, [SOFTMAX, "import sys\n"], "import sys"),
    "from sys import modules": (EX1, ["from sys import modules\n" + SOFTMAX],
                                "from sys import ...: the module sys"),
    "concurrent.futures": (EX1, ["from concurrent import futures\n" + SOFTMAX],
                           "the module concurrent"),
    "a relative import": (EX1, ["from . import helper\n" + SOFTMAX], "a module of the submission"),
    "a module's __dict__": (EX1, ["_f = torch.__dict__['soft' + 'max']\n" + SOFTMAX],
                            "torch.__dict__"),
    "a private name of torch.nn.functional": (EX1, [
        "import torch.nn.functional as G\n_f = G._in_projection\n" + SOFTMAX],
        "G._in_projection: a private torch name"),
    "from torch import _C": (EX1, ["from torch import _C\n" + SOFTMAX], "_C"),
    # Found by reading the check as an attacker would.
    "an attribute read by a match pattern": (EX1, [
        "match torch:\n    case object(sys=_s):\n        pass\n" + SOFTMAX], "sys=...): sys"),
    "a function's globals read by a match pattern": (EX1, [
        "match (lambda: 0):\n    case object(__globals__=_g):\n        pass\n" + SOFTMAX],
        "__globals__"),
    "getattr rebound in a parameter's name": (EX1, [
        "def _h(getattr=None):\n    pass\n\n\n_r = getattr(torch, 'soft' + 'max')\n" + SOFTMAX],
        "getattr() with a name computed at run time"),
    "eval rebound by a loop": (EX1, [
        "for eval in ():\n    pass\n_r = eval('torch.soft' + 'max')\n" + SOFTMAX],
        "builtins.eval"),
    "getattr rebound then deleted": (EX1, [
        "getattr = None\ndel getattr\n_r = getattr(torch, 'soft' + 'max')\n" + SOFTMAX],
        "with a name computed at run time"),
    "string.Formatter reads attributes by name": (EX1, [
        "import string\n_r = string.Formatter().get_field('0.soft' + 'max', [torch], {})[0]\n"
        + SOFTMAX], "string.Formatter"),
    "typing.get_type_hints evaluates text": (EX1, [
        "import typing\n\n\ndef _h(x: \"__import__('sys')\"):\n    pass\n\n\n"
        "_r = typing.get_type_hints(_h)['x']\n" + SOFTMAX], "typing.get_type_hints"),
    "timeit runs text": (EX1, [
        "import timeit\n_o = []\ntimeit.timeit(\"_o.append(__import__('sys'))\", number=1, "
        "globals={'_o': _o})\n" + SOFTMAX], "given code as text"),
    "doctest runs docstrings": (EX1, ["import doctest\n" + SOFTMAX], "the module doctest"),
    "pandas.eval": (EX1, [
        "import pandas as pd\n_r = pd.eval('t.softmax', local_dict={'t': torch}, "
        "engine='python')\n" + SOFTMAX], "pandas.eval"),
    "pydoc.locate": (EX1, ["import pydoc\n_r = pydoc.locate('s' + 'ys')\n" + SOFTMAX],
                     "the module pydoc"),
    "unittest.mock imports by name": (EX1, [
        "from unittest import mock\n_r = mock.patch('torch.soft' + 'max')\n" + SOFTMAX],
        "unittest.mock"),
    "cProfile switches the monitor": (EX1, [
        "import cProfile\n_p = cProfile.Profile()\n_p.enable()\n_p.disable()\n" + SOFTMAX],
        "the module cProfile"),
    "torch.profiler switches the monitor": (EX1, [
        "with torch.profiler.profile(with_stack=True):\n    pass\n" + SOFTMAX], "torch.profiler"),
    "%prun switches the monitor": (EX1, [SOFTMAX, "%prun -q stable_softmax(torch.ones(3))\n"],
                                   "runs the magic %prun"),
    "torch.jit compiles text": (EX1, [
        "_cu = torch.jit.CompilationUnit('def f(x):\\n    return x\\n')\n" + SOFTMAX],
        "torch.jit"),
    "torch.hub runs a hubconf": (EX1, [
        "_r = torch.hub.load('.', 'grab', source='local') if False else None\n" + SOFTMAX],
        "torch.hub"),
    "pandas.read_pickle": (EX1, [
        "import pandas as pd\n_r = pd.read_pickle('x.pkl') if False else None\n" + SOFTMAX],
        "pandas.read_pickle"),
    "torch.load with spread arguments": (EX1, [
        "import io\n_r = torch.load(io.BytesIO(b''), **{'weights_only': False}) if False else "
        "None\n" + SOFTMAX], "its arguments cannot be read"),
    "torch.load passed to partial": (EX1, [
        "import functools\n_l = functools.partial(torch.load, weights_only=False)\n" + SOFTMAX],
        "passed as a value"),
    "numpy.load with allow_pickle by position": (EX1, [
        "import numpy as np\n_r = np.load('x.npy', None, True) if False else None\n" + SOFTMAX],
        "allow_pickle given by position"),
    "a shell through torch.utils.collect_env": (EX1, [
        "from torch.utils.collect_env import run\n" + SOFTMAX], "torch.utils.collect_env"),
    "a module rebound by a loop": (EX1, [
        "import math as _m\nfor _m in [torch]:\n    pass\n_r = _m.sys\n" + SOFTMAX],
        "_m.sys may be the module sys"),
    "modules swapped in one assignment": (EX1, [
        "import math\n_a = torch\n_b = math\n_a, _b = _b, _a\n_r = _b._C\n" + SOFTMAX],
        "_b._C: a private torch name"),
    "a module rebound by a with": (EX1, [
        "import contextlib\nimport math as _m\nwith contextlib.nullcontext(torch) as _m:\n"
        "    pass\n_r = _m.sys\n" + SOFTMAX], "may be the module sys"),
    "a function named like a private torch name": (EX1, [
        "def _softmax(x):\n    return x\n\n\n_r = [torch][0]._softmax\n" + SOFTMAX],
        "may be _softmax, a private torch name"),
    "a private torch module on an unknown object": (EX1, [
        "_r = [torch][0].utils._pytree\n" + SOFTMAX], "_pytree"),
    "a frame through logging": (EX1, ["import logging\n_r = logging.currentframe()\n" + SOFTMAX],
                                "logging.currentframe"),
    "a thread through logging.handlers": (EX1, ["import logging.handlers\n" + SOFTMAX],
                                          "logging.handlers"),
    "code run when copied": (EX1, [
        "class _P:\n    def __reduce__(self):\n        return (print, ('x',))\n\n\n" + SOFTMAX],
        "defines __reduce__"),
    "frames through traceback.walk_stack": (EX1, [
        "import traceback\n_r = next(traceback.walk_stack(None))[0]\n" + SOFTMAX],
        "traceback.walk_stack"),
    "singledispatch evaluates a text annotation": (EX1, [
        "import functools\n\n\n@functools.singledispatch\ndef _f(x):\n    pass\n" + SOFTMAX],
        "functools.singledispatch"),
    "an annotation evaluated when its def runs": (EX1, [
        "def _h(x: torch.sys.modules):\n    pass\n\n\n" + SOFTMAX], "torch.sys: sys"),
}
"""Each evasion is held on its exercise; 'a capability in an earlier exercise' holds the later
exercises too (tests check EX4 for it)."""


def _cell_index(nb, grade_id):
    return next(i for i, c in enumerate(nb.cells)
                if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def with_cells(nb, exercise: str, cells) -> nbformat.NotebookNode:
    """``nb`` with ``exercise``'s solution cell replaced by ``cells``."""
    nb = copy.deepcopy(nb)
    index = _cell_index(nb, CODE_CELL[exercise])
    first, *more = cells
    nb.cells[index].source = first
    for offset, cell in enumerate(more, start=1):
        source, metadata = cell if isinstance(cell, tuple) else (cell, {})
        new = nbformat.v4.new_code_cell(source)
        new.metadata.update(copy.deepcopy(metadata))
        nb.cells.insert(index + offset, new)
    return nb


def honest_notebooks(nb) -> list[tuple[list[str], nbformat.NotebookNode]]:
    """The honest styles packed into as few notebooks as possible: each notebook takes at most
    one style per exercise. Returns (the styles, the notebook) pairs."""
    packs: list[dict[str, str]] = []
    for name, (exercise, _) in HONEST.items():
        pack = next((p for p in packs if exercise not in p), None)
        if pack is None:
            packs.append(pack := {})
        pack[exercise] = name
    found = []
    for pack in packs:
        notebook = nb
        for exercise, name in pack.items():
            notebook = with_cells(notebook, exercise, HONEST[name][1])
        found.append((list(pack.values()), notebook))
    return found
