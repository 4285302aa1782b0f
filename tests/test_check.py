"""`course check`: a full report on a good environment, a clear failure on a broken one."""

import json
import os
import subprocess
import sys

import pytest
from packaging.requirements import Requirement

from course_lib.course.check import (
    check_kernel,
    check_requirements,
    course_requirements,
    environment_report,
    format_report,
)
from course_lib.course.cli import main


def run_course(*args, env=None, code=None):
    command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "course_lib", *args]
    merged = {**os.environ, **(env or {})}
    return subprocess.run(command, capture_output=True, text=True, env=merged, timeout=120)


@pytest.fixture
def registered_kernel(tmp_path, monkeypatch):
    """A course kernel spec for this Python, found through JUPYTER_PATH."""
    spec_dir = tmp_path / "kernels" / "attention-course"
    spec_dir.mkdir(parents=True)
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python (attention course)", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    return {"JUPYTER_PATH": str(tmp_path)}


def test_check_passes_and_reports_everything(registered_kernel, monkeypatch):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    done = run_course("check", env={**registered_kernel, "COURSE_DEVICE": ""})
    assert done.returncode == 0, done.stdout + done.stderr
    for expected in ("Python", "torch build", "device", "GPU", "MPS", "numpy", "seaborn",
                     "Jupyter kernel", "registered", "Everything the course needs is here"):
        assert expected in done.stdout


def test_report_lists_every_declared_dependency():
    names = {item.name for item in environment_report(kernel_name="attention-course")}
    declared = {Requirement(text).name for text in course_requirements()}
    assert "torch" in declared and "jupyterlab" in declared
    assert declared <= names


def test_json_output(registered_kernel):
    done = run_course("check", "--json", env=registered_kernel)
    items = json.loads(done.stdout)
    assert {"name", "value", "ok", "hint"} <= set(items[0])


def test_missing_torch_fails_with_a_message_naming_it():
    code = ("import sys; sys.modules['torch'] = None\n"
            "from course_lib.course.cli import main; sys.exit(main(['check']))")
    done = run_course(code=code)
    assert done.returncode == 1
    assert "torch is missing or broken" in done.stdout


def test_unknown_device_override_fails_the_check(registered_kernel):
    done = run_course("check", env={**registered_kernel, "COURSE_DEVICE": "tpu"})
    assert done.returncode == 1
    assert "COURSE_DEVICE='tpu' is not a device this course knows" in done.stdout


def test_missing_and_outdated_dependencies_are_named():
    items = {i.name: i for i in check_requirements(
        ["numpy>=1.0", "numpy-is-not-a-real-package>=1.0", "torch>=999"])}
    assert items["numpy"].ok
    missing = items["numpy-is-not-a-real-package"]
    assert not missing.ok and "is not installed" in missing.hint
    assert not items["torch"].ok and "is outside >=999" in items["torch"].hint


def test_requirements_for_other_platforms_are_skipped():
    assert check_requirements(['pywin32>=300; sys_platform == "nonexistent"']) == []


def test_unregistered_kernel_fails_with_the_fix():
    item = check_kernel("no-such-course-kernel")
    assert not item.ok
    assert "ipykernel install --user --name no-such-course-kernel" in item.hint


def test_kernel_pointing_at_a_missing_python(tmp_path, monkeypatch):
    spec_dir = tmp_path / "kernels" / "stale-kernel"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps(
        {"argv": ["/nowhere/python", "-m", "ipykernel_launcher"], "display_name": "x",
         "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    item = check_kernel("stale-kernel")
    assert not item.ok and "/nowhere/python, which does not exist" in item.value


def test_format_report_lists_failures_with_fixes():
    items = check_requirements(["numpy-is-not-a-real-package>=1"])
    text = format_report(items)
    assert "[FAIL]" in text and "1 problem(s) to fix" in text


def test_cli_needs_a_command(capsys):
    with pytest.raises(SystemExit) as stop:
        main([])
    assert stop.value.code == 2
