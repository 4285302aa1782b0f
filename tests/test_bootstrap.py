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


@pytest.fixture
def installs(bootstrap, monkeypatch, tmp_path):
    """The commands ``install`` runs, with pip and uv as stand-ins: ``uv_fails`` makes uv fail;
    pip is configured with two find-links folders."""
    python = tmp_path / "bin" / "python"
    commands, behaviour = [], {"uv_fails": False}

    def run(*args):
        commands.append([str(a) for a in args])
        if behaviour["uv_fails"] and str(args[0]).endswith("uv"):
            raise bootstrap.subprocess.CalledProcessError(1, args)

    monkeypatch.setattr(bootstrap, "run", run)
    monkeypatch.setattr(bootstrap, "pip_find_links", lambda python: ["/opt/wheels", "/w2"])

    def install(uv=tmp_path / "bin" / "uv"):
        bootstrap.install(python, uv, ["torch==2.13.0+cpu", "-e", "ROOT[dev]"], "the course")
        return commands

    install.behaviour, install.python = behaviour, python
    return install


def test_uv_installs_with_the_wheel_folders_pip_is_configured_with(installs):
    ((uv, *rest),) = installs()
    assert uv == str(installs.python.parent / "uv")
    assert rest == ["pip", "install", "--python", str(installs.python), "--compile-bytecode",
                    "--find-links", "/opt/wheels", "--find-links", "/w2",
                    "torch==2.13.0+cpu", "-e", "ROOT[dev]"]


@pytest.mark.parametrize("why", ["no uv", "uv fails"])
def test_pip_installs_where_uv_is_missing_or_fails(installs, why):
    if why == "uv fails":
        installs.behaviour["uv_fails"] = True
    commands = installs(None if why == "no uv" else installs.python.parent / "uv")
    assert commands[-1] == [str(installs.python), "-m", "pip", "install",
                            "--disable-pip-version-check", "torch==2.13.0+cpu", "-e",
                            "ROOT[dev]"]
    assert len(commands) == (2 if why == "uv fails" else 1)


def test_pip_alone_when_asked(bootstrap, monkeypatch, tmp_path):
    """COURSE_INSTALLER=pip: uv is never installed; torch and the course go through pip."""
    monkeypatch.setenv("COURSE_INSTALLER", "pip")
    monkeypatch.setattr(bootstrap, "VENV", tmp_path / "venv")
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    monkeypatch.setattr(bootstrap, "venv_python", lambda: python)
    monkeypatch.setattr(bootstrap, "works", lambda *args: False)
    monkeypatch.setattr(bootstrap, "installed_uv", lambda python: pytest.fail("uv installed"))
    monkeypatch.setattr(bootstrap, "installed_torch", lambda python: "2.13.0+cpu")
    monkeypatch.setattr(bootstrap, "torch_install_args", lambda: ["torch==2.13.0"])
    monkeypatch.setattr(bootstrap, "kernel_runs", lambda python, folder: True)
    commands = []
    monkeypatch.setattr(bootstrap, "run", lambda *args: commands.append([str(a) for a in args]))
    assert bootstrap.main() == 0
    assert [c[1:4] for c in commands] == [["-m", "pip", "install"]] * 2
    assert commands[0][-1] == "torch==2.13.0" and commands[1][-2:] == ["-e", f"{ROOT}[dev]"]


def test_an_unknown_installer_is_refused_before_anything_is_installed(bootstrap, monkeypatch,
                                                                      capsys):
    monkeypatch.setenv("COURSE_INSTALLER", "conda")
    monkeypatch.setattr(bootstrap, "run", lambda *args: pytest.fail(f"ran {args}"))
    assert bootstrap.main() == 1
    said = capsys.readouterr().out
    assert "COURSE_INSTALLER" in said and "'conda'" in said and "uv, pip" in said


def test_the_find_links_pip_is_configured_with_are_read(bootstrap, monkeypatch, tmp_path):
    config = tmp_path / "pip.conf"
    config.write_text("[global]\nfind-links = /wheels/one\n    /wheels/two\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    monkeypatch.setenv("PIP_FIND_LINKS", "/wheels/env")
    links = bootstrap.pip_find_links(Path(sys.executable))
    assert {"/wheels/one", "/wheels/two", "/wheels/env"} <= set(links)
    assert len(links) == len(set(links))


def test_the_real_installed_torch_is_read_with_its_local_label(bootstrap):
    import torch

    assert bootstrap.installed_torch(Path(sys.executable)) == torch.__version__
