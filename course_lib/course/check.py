"""``course check``: is this environment ready for the course, and what will it run on?

Reports Python and torch versions, the torch build (CPU or CUDA), the device chosen and why, GPU
names and memory or MPS availability, the versions of the course's dependencies against the
ranges in pyproject.toml, and whether the course's Jupyter kernel is registered. Anything missing
makes the check fail with a line saying what and how to fix it.

This module imports torch only inside functions, so it still reports when torch is broken.
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

from course_lib import KERNEL_NAME
from course_lib.paths import display_path

DISTRIBUTION = "attention-course"
MIN_PYTHON = (3, 10)
SETUP_HINT = "run `make lab` (or `pip install -e .`) from the course folder"


@dataclass
class CheckItem:
    """One line of the report; ``ok=False`` makes ``course check`` fail."""

    name: str
    value: str
    ok: bool = True
    hint: str = ""


def course_requirements() -> list[str]:
    """The course's runtime requirements (PEP 508 strings) from its installed metadata."""
    requirements = metadata.requires(DISTRIBUTION) or []
    return [r for r in requirements if "extra ==" not in r]


def check_python() -> CheckItem:
    version = platform.python_version()
    ok = sys.version_info[:2] >= MIN_PYTHON
    hint = "" if ok else f"the course needs Python {'.'.join(map(str, MIN_PYTHON))} or newer"
    return CheckItem("Python", f"{version} ({display_path(Path(sys.executable))})", ok, hint)


def check_course_package() -> CheckItem:
    location = str(Path(__file__).resolve().parents[1])
    try:
        version = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return CheckItem("course_lib", f"imported from {location}, not installed", False,
                         SETUP_HINT)
    return CheckItem("course_lib", f"{version} ({location})")


def check_requirements(requirements: list[str]) -> list[CheckItem]:
    """One item per requirement: installed version against the declared range."""
    from packaging.requirements import Requirement

    items = []
    for text in requirements:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        wanted = str(requirement.specifier) or "any version"
        try:
            installed = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            items.append(CheckItem(requirement.name, f"missing (needs {wanted})", False,
                                   f"{requirement.name} is not installed: {SETUP_HINT}"))
            continue
        ok = requirement.specifier.contains(installed, prereleases=True)
        hint = "" if ok else f"{requirement.name} {installed} is outside {wanted}: {SETUP_HINT}"
        items.append(CheckItem(requirement.name, f"{installed} (needs {wanted})", ok, hint))
    return items


def check_torch_and_device() -> list[CheckItem]:
    try:
        import torch
    except Exception as error:  # ImportError, or a broken build raising something else
        return [CheckItem("torch", f"cannot be imported ({error})", False,
                          f"torch is missing or broken: {SETUP_HINT}")]
    from course_lib.device import choose_device, mps_available

    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU only"
    items = [CheckItem("torch build", f"{torch.__version__} ({build})")]
    try:
        choice = choose_device()
        items.append(CheckItem("device", f"{choice.device} ({choice.reason})"))
    except (ValueError, RuntimeError) as error:
        items.append(CheckItem("device", "cannot be chosen", False, str(error)))
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            memory = props.total_memory / 2**30
            items.append(CheckItem(f"GPU {index}", f"{props.name}, {memory:.1f} GiB"))
    else:
        items.append(CheckItem("GPU", "none visible to torch"))
    mps_built = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_built())
    mps = "available" if mps_available() else ("built but not available" if mps_built else
                                               "not in this build (macOS only)")
    items.append(CheckItem("MPS", mps))
    return items


def check_kernel(kernel_name: str = KERNEL_NAME) -> CheckItem:
    hint = (f"register it with `make lab`, or `{display_path(Path(sys.executable))} -m ipykernel "
            f"install --user "
            f"--name {kernel_name}`")
    try:
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    except ImportError:
        return CheckItem("Jupyter kernel", "jupyter_client is not installed", False, hint)
    try:
        spec = KernelSpecManager().get_kernel_spec(kernel_name)
    except NoSuchKernel:
        return CheckItem("Jupyter kernel", f"'{kernel_name}' is not registered", False, hint)
    python = spec.argv[0] if spec.argv else ""
    if not Path(python).exists():
        return CheckItem("Jupyter kernel", f"'{kernel_name}' runs {display_path(Path(python))}, "
                         "which does not exist", False, hint)
    same = Path(python).resolve() == Path(sys.executable).resolve()
    where = "this Python" if same else f"{display_path(Path(python))} (not this Python)"
    return CheckItem("Jupyter kernel", f"'{kernel_name}' registered, runs {where}")


def environment_report(
    requirements: list[str] | None = None, kernel_name: str = KERNEL_NAME
) -> list[CheckItem]:
    """Every check, in the order ``course check`` prints them."""
    items = [check_python(), check_course_package()]
    items += check_torch_and_device()
    if requirements is None:
        try:
            requirements = course_requirements()
        except metadata.PackageNotFoundError:
            requirements = []  # check_course_package has already failed and said why
    items += check_requirements(requirements)
    items.append(check_kernel(kernel_name))
    return items


def format_report(items: list[CheckItem]) -> str:
    width = max(len(item.name) for item in items)
    lines = ["Attention course: environment check", ""]
    for item in items:
        mark = "ok " if item.ok else "FAIL"
        lines.append(f"  [{mark}] {item.name:<{width}}  {item.value}")
    failures = [item for item in items if not item.ok]
    lines.append("")
    if failures:
        lines.append(f"{len(failures)} problem(s) to fix:")
        lines += [f"  - {item.name}: {item.hint or item.value}" for item in failures]
    else:
        lines.append("Everything the course needs is here.")
    return "\n".join(lines)


def report_table(items: list[CheckItem]):
    """The report as a pandas DataFrame, for lesson 00."""
    import pandas as pd

    return pd.DataFrame(
        [{"check": i.name, "value": i.value, "ok": i.ok, "fix": i.hint} for i in items]
    ).set_index("check")


def run_check(as_json: bool = False) -> int:
    """Print the report; exit status 0 if everything is in place, else 1."""
    items = environment_report()
    if as_json:
        print(json.dumps([item.__dict__ for item in items], indent=2))
    else:
        print(format_report(items))
    return 0 if all(item.ok for item in items) else 1
