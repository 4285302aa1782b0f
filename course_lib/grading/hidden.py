"""Hidden tests whose verdict the grader decides, outside the submission's process.

A hidden test block (between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS``, at the end
of an exercise's test cell in ``solutions/``) defines two functions and registers them::

    def _inputs(g):            # grader only: test inputs drawn from the grader's secret generator
        return {"scores": torch.randn(5, 9, generator=g), "lengths": ...}

    def _observe(x):           # what to look at: one zero-argument callable per observation
        return {"(B, S) batch": lambda: padded_softmax(x["scores"], x["lengths"]),
                "lengths too long": lambda: padded_softmax(torch.zeros(2, 3),
                                                           torch.tensor([1, 4]))}

    grade_with("ex2_padded_softmax", _inputs, _observe,
               reimplements=("course_lib.nn.attention.masked_softmax",))

``_observe`` runs twice on the same inputs: in the submission's kernel, where the names resolve
to the student's functions, and in the grader's own process, where they resolve to the
instructor's solution. The kernel sends back only data (values, or the names of the exceptions
raised); :mod:`course_lib.grading.verdicts.verdict` compares the two. An observation may raise: the
student's function must then raise the same exception class.

:func:`grade_with` behaves by context:

- **collecting** (the grader reading a source notebook in its own process): the test is recorded;
- **grading** (``COURSE_GRADING_DIR`` is set, in the sandboxed kernel): the inputs are read from
  that folder, the observations made, and the data written back there;
- **plain run** (a learner or ``make test`` running a solution notebook): the test runs once on
  seed 0 as a smoke test of the block itself (inputs are data, observations encodable).
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import secrets
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from course_lib.grading.config import GradingError
from course_lib.grading.runner import inputs_file, results_file

GRADING_DIR_VARIABLE = "COURSE_GRADING_DIR"
MAX_ELEMENTS = 2_000_000  # per observation: results are small by design
MAX_DEPTH = 12
MAX_TEXT = 300


class HiddenTestError(RuntimeError):
    """A hidden test block is malformed (an author's mistake, never a student's)."""


@dataclass(frozen=True)
class HiddenTest:
    """One exercise's hidden test: how to draw inputs and what to observe."""

    grade_id: str
    inputs: Callable[[torch.Generator], Any]
    observe: Callable[[Any], dict[str, Callable[[], Any]]]
    reimplements: tuple[str, ...] = ()
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)


# Registering


_collected: list[HiddenTest] | None = None


@contextlib.contextmanager
def collecting() -> Iterator[list[HiddenTest]]:
    """Record every :func:`grade_with` call made inside the block instead of running it."""
    global _collected
    outer, _collected = _collected, []
    try:
        yield _collected
    finally:
        _collected = outer


def grade_with(grade_id: str, inputs: Callable, observe: Callable, *,
               reimplements: tuple[str, ...] = (),
               tolerances: dict[str, tuple[float, float]] | None = None) -> None:
    """Register the hidden test of exercise ``grade_id``.

    ``reimplements``: dotted names of what the exercise re-implements (``course_lib``'s version,
    PyTorch's where the exercise forbids it); a submission that calls one is flagged for the
    instructor. ``tolerances``: ``{observation: (rtol, atol)}`` where the defaults of
    :func:`course_lib.grading.verdicts.verdict.compare` do not fit.
    """
    test = HiddenTest(grade_id, inputs, _frozen_globals(observe), tuple(reimplements),
                      dict(tolerances or {}))
    if _collected is not None:
        _collected.append(test)
    elif os.environ.get(GRADING_DIR_VARIABLE):
        _observe_for_grader(test, Path(os.environ[GRADING_DIR_VARIABLE]))
    else:
        smoke_test(test)


def _frozen_globals(function: Callable) -> Callable:
    """``function`` seeing the names its module had at registration, whatever comes later.

    In the kernel the observations run at once; in the grader they run after the whole solution
    notebook, where a later cell may have rebound a helper's name. A snapshot makes both see the
    same cell's world.
    """
    if not isinstance(function, types.FunctionType):
        raise HiddenTestError(f"observe must be a function, got {type(function).__name__}")
    return types.FunctionType(function.__code__, dict(function.__globals__), function.__name__,
                              function.__defaults__, function.__closure__)


# Observing: the same code in the kernel and in the grader


def observe_all(test: HiddenTest, inputs: Any, *, watch: tuple[str, ...] = ()
                ) -> tuple[dict[str, tuple], list[str]]:
    """Run every observation of ``test`` on ``inputs``: ``({name: record}, reference calls)``.

    A record is ``("value", data)`` or ``("raised", qualified class names from the most
    specific, text)``.
    While the functions named in ``watch`` run, calls into ``test.reimplements`` are counted.
    """
    thunks = test.observe(inputs)
    if not isinstance(thunks, dict) or not all(callable(t) for t in thunks.values()):
        raise HiddenTestError(f"{test.grade_id}: observe must return {{name: callable}}")
    spy = ReferenceSpy(test.reimplements, test.observe.__globals__, watch)
    records = {}
    with spy:
        for name, thunk in thunks.items():
            records[str(name)] = capture(thunk)
    return records, sorted(spy.called)


def capture(thunk: Callable[[], Any]) -> tuple:
    try:
        value = thunk()
    except Exception as error:  # noqa: BLE001 - an exception is an observation like any other
        names = tuple(f"{cls.__module__}.{cls.__qualname__}" for cls in type(error).__mro__
                      if cls not in (object, BaseException))
        return ("raised", names, _text(error))
    return ("value", encode(value))


def _text(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text[:MAX_TEXT]


def encode(value: Any, depth: int = 0) -> Any:
    """``value`` as plain data that ``torch.load(weights_only=True)`` reads back.

    Tensors become detached, dense CPU tensors; Python scalars, strings and None stay; lists,
    tuples and dicts are encoded item by item; dtypes, devices and types become their names.
    Anything else becomes ``{"unsupported": type name}``, which never equals a real result.
    """
    if depth > MAX_DEPTH:
        return {"unsupported": "nested too deeply"}
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided or value.is_quantized or value.device.type == "meta":
            return {"unsupported": f"{value.layout} tensor"}
        if value.numel() > MAX_ELEMENTS:
            return {"unsupported": f"tensor of {value.numel()} elements"}
        return value.detach().cpu().as_subclass(torch.Tensor).clone()
    for kind in (bool, int, float, str):  # bool before int: True is an int too
        if isinstance(value, kind):
            return kind(value)[:100_000] if kind is str else kind(value)
    if value is None:
        return None
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    if isinstance(value, torch.Size):
        return tuple(int(v) for v in value)
    if isinstance(value, type):
        return f"<class {value.__qualname__}>"
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        return encode(value.item(), depth + 1)
    if isinstance(value, (list, tuple)):
        if len(value) > 10_000:
            return {"unsupported": f"{type(value).__name__} of {len(value)} items"}
        items = [encode(item, depth + 1) for item in value]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, dict) and all(isinstance(k, (str, int)) for k in value):
        return {("key:" + k if isinstance(k, str) else k): encode(v, depth + 1)
                for k, v in value.items()}
    return {"unsupported": type(value).__name__}


def roundtrip(data: Any) -> Any:
    """A deep copy of ``data`` through torch's safe format: fails if it is not plain data."""
    buffer = io.BytesIO()
    torch.save(data, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


class ReferenceSpy:
    """Notes calls into the re-implemented references while watched functions run.

    The watched functions are wrapped in ``namespace`` for the duration; a profile hook, set for
    this thread and for threads started meanwhile, notes every Python frame whose code is a
    reference's and every C function that is one (by identity; a bound method by its class and
    name), made between entering and leaving a watched function. Inside the kernel this is
    advisory (code there can switch it off); the grader's static check does not depend on it.
    """

    def __init__(self, reimplements: tuple[str, ...], namespace: dict, watch: tuple[str, ...]):
        self.namespace, self.watch = namespace, [n for n in watch if callable(namespace.get(n))]
        self.codes, self.functions, self.methods = {}, {}, {}
        for dotted in reimplements:
            target = resolve(dotted)
            target = getattr(target, "forward", target) if isinstance(target, type) else target
            code = getattr(target, "__code__", None)
            if code is not None:
                self.codes[code] = dotted
            elif getattr(target, "__objclass__", None) is not None:  # a method descriptor
                self.methods[(target.__objclass__, target.__name__)] = dotted
            elif target is not None:
                self.functions[id(target)] = (target, dotted)
        self.called: set[str] = set()
        self.depth = 0
        self.saved: dict[str, Any] = {}

    def __enter__(self):
        if not (self.codes or self.functions or self.methods) or not self.watch:
            return self
        import threading

        for name in self.watch:
            self.saved[name] = original = self.namespace[name]
            self.namespace[name] = self._watched(original)
        self.previous = sys.getprofile()
        sys.setprofile(self._profile)
        threading.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        if self.saved:
            import threading

            sys.setprofile(self.previous)
            threading.setprofile(None)
            self.namespace.update(self.saved)
        return False

    def _watched(self, function):
        def watched(*args, **kwargs):
            self.depth += 1
            try:
                return function(*args, **kwargs)
            finally:
                self.depth -= 1
        return watched

    def _profile(self, frame, event, arg):
        if self.depth <= 0:
            return
        if event == "call" and frame.f_code in self.codes:
            self.called.add(self.codes[frame.f_code])
        elif event == "c_call":
            known = self.functions.get(id(arg))
            if known is not None and known[0] is arg:
                self.called.add(known[1])
                return
            owner = getattr(arg, "__self__", None)
            for cls in type(owner).__mro__ if owner is not None else ():
                dotted = self.methods.get((cls, getattr(arg, "__name__", None)))
                if dotted is not None:
                    self.called.add(dotted)
                    break


@functools.lru_cache(maxsize=256)
def reference_aliases(reimplements: tuple[str, ...]) -> frozenset[str]:
    """Every name under which the grader finds a re-implemented object: its own last name and
    the names of every attribute of torch's and course_lib's loaded modules (and of
    ``torch.Tensor``) that is the same object."""
    targets = {}
    for dotted in reimplements:
        target = resolve(dotted)
        if target is not None:
            targets[id(target)] = target
    names = {dotted.rsplit(".", 1)[-1] for dotted in reimplements}
    if not targets:
        return frozenset(names)
    spaces = [vars(module) for name, module in list(sys.modules.items())
              if module is not None and name.split(".")[0] in ("torch", "course_lib")]
    spaces.append(vars(torch.Tensor))
    for space in spaces:
        for name, value in list(space.items()):
            if id(value) in targets and targets[id(value)] is value:
                names.add(name)
    return frozenset(names)


def resolve(dotted: str) -> Any:
    """The object a dotted name points to (``torch.nn.functional.softmax``), or None."""
    import importlib

    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            target = getattr(target, attribute, None)
        return target
    return None


# The three contexts


def _observe_for_grader(test: HiddenTest, folder: Path) -> None:
    """In the sandboxed kernel: read the grader's inputs, observe, write the data back. The
    runner put the inputs file there as this test cell started, and takes the results file the
    moment the cell ends (:class:`course_lib.grading.runner.Sealer`).

    Nothing here can raise into the test cell: a failure simply leaves no results, which the
    grader scores as zero.
    """
    try:
        given = torch.load(inputs_file(folder, test.grade_id), weights_only=True)
        records, called = observe_all(test, given["inputs"], watch=tuple(given["functions"]))
        target = results_file(folder, test.grade_id)
        target.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"observations": records, "reference_calls": called}, target)
    except Exception as error:  # noqa: BLE001 - reported through the missing results
        print(f"(the grader's cases for {test.grade_id} could not run: "
              f"{type(error).__name__})")


def smoke_test(test: HiddenTest, seed: int = 0) -> dict[str, tuple]:
    """Run ``test`` once on its own (a solution notebook run outside grading)."""
    try:
        inputs = roundtrip(test.inputs(torch.Generator().manual_seed(seed)))
    except Exception as error:
        raise HiddenTestError(f"{test.grade_id}: _inputs must return plain data (tensors, "
                              f"numbers, strings, lists, tuples, dicts): {error}") from error
    records, _ = observe_all(test, inputs)
    try:
        roundtrip(records)
    except Exception as error:
        raise HiddenTestError(f"{test.grade_id}: an observation is not plain data: "
                              f"{error}") from error
    return records


def key_file_for(out: Path) -> Path:
    """Where the secret grading key is kept by default: beside the gradebook."""
    return out.with_name(out.stem + ".key")


def load_or_create_key(path: Path) -> str:
    """The hex key in ``path``; a new random one (readable by its owner only) if it is absent.

    The hidden tests' inputs are drawn from it: keep it with the gradebook and out of students'
    reach. The inputs of a run come from it and the run's nonce
    (:mod:`course_lib.grading.workflow.runs`).
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(handle, "w") as file:
            file.write(secrets.token_hex(32) + "\n")
    key = path.read_text().strip()
    try:
        if len(bytes.fromhex(key)) < 16:
            raise ValueError
    except ValueError:
        raise GradingError(f"{path} must hold a hex key of at least 32 digits") from None
    return key
