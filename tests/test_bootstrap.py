"""tools/bootstrap.py picks the right torch wheel and skips work it has already done."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def bootstrap(monkeypatch):
    spec = importlib.util.spec_from_file_location("bootstrap", ROOT / "tools" / "bootstrap.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.delenv("TORCH_SPEC", raising=False)
    monkeypatch.delenv("TORCH_INDEX_URL", raising=False)
    return module


def test_linux_without_gpu_uses_the_cpu_index(bootstrap, monkeypatch):
    monkeypatch.setattr(bootstrap.platform, "system", lambda: "Linux")
    monkeypatch.setattr(bootstrap, "has_nvidia_gpu", lambda: False)
    monkeypatch.setattr(bootstrap, "reachable", lambda url: True)
    assert bootstrap.torch_install_args() == [bootstrap.DEFAULT_TORCH_SPEC, "--extra-index-url",
                                              bootstrap.CPU_INDEX_URL]


def test_unreachable_cpu_index_falls_back_to_the_configured_index(bootstrap, monkeypatch, capsys):
    monkeypatch.setattr(bootstrap.platform, "system", lambda: "Linux")
    monkeypatch.setattr(bootstrap, "has_nvidia_gpu", lambda: False)
    monkeypatch.setattr(bootstrap, "reachable", lambda url: False)
    assert bootstrap.torch_install_args() == [bootstrap.DEFAULT_TORCH_SPEC]
    assert "out of reach" in capsys.readouterr().out


@pytest.mark.parametrize(("system", "gpu"), [("Linux", True), ("Darwin", False)])
def test_gpu_linux_and_macos_use_pypi(bootstrap, monkeypatch, system, gpu):
    monkeypatch.setattr(bootstrap.platform, "system", lambda: system)
    monkeypatch.setattr(bootstrap, "has_nvidia_gpu", lambda: gpu)
    assert bootstrap.torch_install_args() == [bootstrap.DEFAULT_TORCH_SPEC]


def test_overrides_win(bootstrap, monkeypatch):
    monkeypatch.setenv("TORCH_SPEC", "torch==2.5.1")
    monkeypatch.setenv("TORCH_INDEX_URL", "https://download.pytorch.org/whl/cu124")
    assert bootstrap.torch_install_args() == ["torch==2.5.1", "--extra-index-url",
                                              "https://download.pytorch.org/whl/cu124"]


def test_default_torch_is_inside_the_declared_range(bootstrap):
    from packaging.requirements import Requirement

    pyproject = (ROOT / "pyproject.toml").read_text()
    declared = next(Requirement(line.strip().strip('",'))
                    for line in pyproject.splitlines() if line.strip().startswith('"torch>='))
    pinned = Requirement(bootstrap.DEFAULT_TORCH_SPEC)
    version = next(iter(pinned.specifier)).version
    assert declared.specifier.contains(version)


def test_second_run_is_a_no_op(bootstrap, monkeypatch):
    """With the stamp in place and imports working, nothing is installed again."""
    monkeypatch.setattr(bootstrap, "VENV", Path(sys.prefix))
    monkeypatch.setattr(bootstrap, "venv_python", lambda: Path(sys.executable))
    stamp = Path(sys.prefix) / ".course-installed"
    if not stamp.exists() or stamp.read_text() != bootstrap.stamp_text():
        pytest.skip("the running environment was not made by tools/bootstrap.py")
    commands = []
    monkeypatch.setattr(bootstrap, "run", lambda *args: commands.append(args))
    monkeypatch.setattr(bootstrap, "jupyter_kernel_dir",
                        lambda: Path(sys.prefix) / "no-kernel-check")
    bootstrap.main()
    assert all("pip" not in map(str, c) for c in commands)


def test_kernel_registered_by_setup_is_the_one_notebooks_declare(bootstrap):
    import course_lib
    from course_lib.nbhygiene import KERNELSPEC

    assert bootstrap.KERNEL_NAME == course_lib.KERNEL_NAME == KERNELSPEC["name"]
    assert bootstrap.KERNEL_DISPLAY_NAME == KERNELSPEC["display_name"]


def test_a_kernel_of_another_checkout_is_registered_again(bootstrap, tmp_path, monkeypatch):
    """Two checkouts on one machine: the kernel one registered must not serve the other, whose
    environment path ends the same way (``.venv/bin/python``)."""
    import json
    import os

    monkeypatch.chdir(tmp_path)
    python = Path(".venv") / "bin" / "python"
    (tmp_path / "kernel.json").write_text(json.dumps(
        {"argv": ["/elsewhere/checkout/.venv/bin/python", "-m", "ipykernel_launcher"]}))
    assert not bootstrap.kernel_runs(python, tmp_path)
    (tmp_path / "kernel.json").write_text(json.dumps(
        {"argv": [os.path.abspath(python), "-m", "ipykernel_launcher"]}))
    assert bootstrap.kernel_runs(python, tmp_path)
    (tmp_path / "kernel.json").write_text("not json")
    assert not bootstrap.kernel_runs(python, tmp_path)
    assert not bootstrap.kernel_runs(python, tmp_path / "missing")
