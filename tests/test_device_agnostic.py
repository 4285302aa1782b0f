"""course_lib never pins tensors to a fixed device, proven without a GPU.

1. Static: no `.cuda()` call, no device chosen at import time (module level), no hard-coded
   device strings in calls, anywhere in the package.
2. Dynamic: every model runs forward with its weights and inputs on the `meta` device. A tensor
   that a model creates on the CPU by itself (instead of following its inputs) fails with a device
   mismatch there, exactly as it would on a GPU.
"""

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest
import torch
from torch import nn

import course_lib

from .model_zoo import ZOO

PACKAGE = Path(course_lib.__file__).parent
SOURCES = sorted(PACKAGE.rglob("*.py"))
DEVICE_NAMES = {"cuda", "mps", "cpu"}
# The one place that turns names into devices, and data generators that return CPU tensors.
ALLOWED_DEVICE_LITERALS = {"device.py"}


def trees():
    for path in SOURCES:
        yield path, ast.parse(path.read_text(), filename=str(path))


def call_name(node: ast.Call) -> str:
    return ast.unparse(node.func)


def test_sources_were_found():
    assert len(SOURCES) >= 10


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_cuda_calls(path):
    tree = ast.parse(path.read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr == "cuda"]
    assert not calls, f"{path.name}:{calls[0].lineno} calls .cuda(); use the inputs' device"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_device_chosen_at_import_time(path):
    tree = ast.parse(path.read_text())
    for statement in tree.body:  # module level only
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Call) and call_name(node).split(".")[-1] in (
                    "get_device", "device", "choose_device"):
                pytest.fail(f"{path.name}:{node.lineno} picks a device at import time")


@pytest.mark.parametrize("path", [p for p in SOURCES if p.name not in ALLOWED_DEVICE_LITERALS],
                         ids=lambda p: p.name)
def test_no_hard_coded_device_in_calls(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        keyword_values = [k.value for k in node.keywords if k.arg == "device"]
        positional = list(node.args) if call_name(node).split(".")[-1] in ("to", "device") else []
        for argument in positional + keyword_values:
            if (isinstance(argument, ast.Constant) and isinstance(argument.value, str)
                    and argument.value.split(":")[0] in DEVICE_NAMES):
                pytest.fail(f"{path.name}:{node.lineno} hard-codes device {argument.value!r}")


def package_module_classes():
    found = set()
    for info in pkgutil.walk_packages(course_lib.__path__, "course_lib."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if not issubclass(obj, nn.Module) or not obj.__module__.startswith("course_lib."):
                continue
            if obj.forward is not nn.Module.forward:  # skip base classes with no forward
                found.add(obj)
    return found


def test_every_model_is_in_the_zoo():
    covered = {entry.model_class for entry in ZOO}
    missing = sorted(c.__qualname__ for c in package_module_classes() - covered)
    assert not missing, f"add these course_lib modules to tests/model_zoo.py: {missing}"


@pytest.mark.parametrize("entry", ZOO, ids=lambda e: e.model_class.__name__)
def test_forward_on_meta_device(entry):
    model = entry.build().to("meta")
    inputs = entry.inputs(torch.device("meta"))
    outputs = model(*inputs)
    flat = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    tensors = [t for t in flat if isinstance(t, torch.Tensor)]
    assert tensors and all(t.device.type == "meta" for t in tensors)


def _moved(value, device):
    """``value`` (a tensor, None, or a tuple of them) on ``device``."""
    if isinstance(value, tuple):
        return tuple(_moved(v, device) for v in value)
    return None if value is None else value.to(device)


@pytest.mark.cuda
@pytest.mark.parametrize("entry", ZOO, ids=lambda e: e.model_class.__name__)
def test_forward_on_cuda_matches_cpu(entry, monkeypatch):
    # cuDNN's RNNs and convolutions use TF32 (10-bit mantissas) by default: compare float32 with
    # float32, or a correct model differs from the CPU by about 1e-3.
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    torch.manual_seed(0)
    model = entry.build().eval()
    inputs = entry.inputs(torch.device("cpu"))
    expected = model(*inputs)
    got = model.to("cuda")(*_moved(tuple(inputs), "cuda"))
    torch.testing.assert_close(_moved(got, "cpu"), expected, rtol=1e-4, atol=1e-4)
