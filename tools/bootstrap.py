"""Create or refresh the course's virtual environment (what `make lab` and `make test` run first).

Steps, each skipped when already done, so a second run takes about a second:

1. create `.venv` with the Python running this script (3.10 or newer);
2. install PyTorch: the CPU wheel on Linux without an NVIDIA GPU, the default PyPI wheel
   elsewhere (CUDA on Linux with a GPU, CPU/MPS on macOS); override with TORCH_SPEC and
   TORCH_INDEX_URL (see README, "GPU and other set-ups");
3. install the course (`pip install -e .[dev]`);
4. register the Jupyter kernel `attention-course` for this environment.

Steps 2 and 3 are done by uv where it can be installed (see `install`), by pip with
COURSE_INSTALLER=pip.

Only the standard library is used: this runs before anything is installed.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("COURSE_VENV", ROOT / ".venv"))
KERNEL_NAME = "attention-course"
KERNEL_DISPLAY_NAME = "Python (attention course)"
# The torch release the course is tested with; the project itself accepts a range (pyproject.toml).
DEFAULT_TORCH_SPEC = "torch==2.13.0"
CPU_INDEX_URL = "https://download.pytorch.org/whl/cpu"
# What installs torch and the course: uv by default, pip where asked (COURSE_INSTALLER).
INSTALLERS = ("uv", "pip")
UV_SPEC = "uv>=0.5,<1"


def say(message: str) -> None:
    print(f"[setup] {message}", flush=True)


def venv_python() -> Path:
    scripts = "Scripts" if os.name == "nt" else "bin"
    return VENV / scripts / ("python.exe" if os.name == "nt" else "python")


def run(*args: str | Path) -> None:
    say("$ " + " ".join(str(a) for a in args))
    subprocess.run([str(a) for a in args], check=True)


def works(*args: str | Path) -> bool:
    done = subprocess.run([str(a) for a in args], capture_output=True)
    return done.returncode == 0


def has_nvidia_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None and works("nvidia-smi", "-L")


def torch_install_args() -> list[str]:
    """pip arguments that install torch on this machine."""
    spec = os.environ.get("TORCH_SPEC", DEFAULT_TORCH_SPEC)
    index = os.environ.get("TORCH_INDEX_URL")
    if index:
        return [spec, "--extra-index-url", index]
    if platform.system() == "Linux" and not has_nvidia_gpu():
        # PyPI's Linux wheel bundles CUDA (several GB); the CPU build is a few hundred MB.
        # As an extra index, so torch's own dependencies still come from PyPI.
        if reachable(CPU_INDEX_URL + "/torch/"):
            return [spec, "--extra-index-url", CPU_INDEX_URL]
        say(f"{CPU_INDEX_URL} is out of reach; installing {spec} from the configured index "
            "(set TORCH_INDEX_URL to a CPU wheel index to avoid a CUDA build)")
    return [spec]


def reachable(url: str, timeout: float = 5.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def stamp_text() -> str:
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    return f"{digest} {os.environ.get('TORCH_SPEC', '')} {os.environ.get('TORCH_INDEX_URL', '')}\n"


def main() -> int:
    if sys.version_info < (3, 10):  # noqa: UP036 - this runs on whatever python3 the user has
        say(f"Python 3.10 or newer is needed; this is {platform.python_version()} "
            f"({sys.executable}).")
        return 1
    installer = os.environ.get("COURSE_INSTALLER", "uv")
    if installer not in INSTALLERS:
        say(f"COURSE_INSTALLER must be one of {', '.join(INSTALLERS)}; it is {installer!r}.")
        return 1
    python = venv_python()
    if not python.exists():
        say(f"creating the virtual environment {VENV}")
        run(sys.executable, "-m", "venv", VENV)

    stamp = VENV / ".course-installed"
    imports_ok = works(python, "-c", "import torch, course_lib, ipykernel")
    if imports_ok and stamp.exists() and stamp.read_text() == stamp_text():
        say(f"environment {VENV} is up to date")
    else:
        uv = installed_uv(python) if installer == "uv" else None
        if not works(python, "-c", "import torch"):
            install(python, uv, torch_install_args(), "torch")
        # torch pinned to the build just installed, so that no dependency can swap it
        install(python, uv, [f"torch=={installed_torch(python)}", "-e", f"{ROOT}[dev]"],
                "the course")
        stamp.write_text(stamp_text())

    kernel_dir = jupyter_kernel_dir()
    if not kernel_runs(python, kernel_dir):
        run(python, "-m", "ipykernel", "install", "--user",
            "--name", KERNEL_NAME, "--display-name", KERNEL_DISPLAY_NAME)
    return 0


def install(python: Path, uv: Path | None, args: list[str], what: str) -> None:
    """``pip install ARGS`` into the environment of ``python``: by ``uv`` where it is installed,
    by pip where it is not or where uv fails.

    uv installs several times faster than pip (it downloads, unpacks and compiles in parallel).
    It reads none of pip's configuration, so the local wheel folders pip is configured with
    (:func:`pip_find_links`) are passed to it; an index only pip knows about makes uv fail, and
    pip then does the work with its own configuration.
    """
    if uv is not None:
        links = [arg for folder in pip_find_links(python) for arg in ("--find-links", folder)]
        try:
            run(uv, "pip", "install", "--python", python, "--compile-bytecode", *links, *args)
            return
        except subprocess.CalledProcessError:
            say(f"uv could not install {what}; pip installs it")
    run(python, "-m", "pip", "install", "--disable-pip-version-check", *args)


def installed_uv(python: Path) -> Path | None:
    """uv, installed with pip next to ``python``, or None when it cannot be installed."""
    if not works(python, "-m", "pip", "install", "--disable-pip-version-check", "-q", UV_SPEC):
        say(f"{UV_SPEC} could not be installed; pip installs everything")
        return None
    uv = python.parent / ("uv.exe" if os.name == "nt" else "uv")
    return uv if uv.exists() else None


def pip_find_links(python: Path) -> list[str]:
    """The folders and pages of wheels pip is configured to look in (``find-links`` in a pip
    configuration file or ``PIP_FIND_LINKS``), as ``pip config list`` reports them."""
    done = subprocess.run([str(python), "-m", "pip", "config", "list"], capture_output=True,
                          text=True)
    links = []
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.endswith(".find-links"):
            try:  # pip prints each value as a Python string literal
                value = ast.literal_eval(value.strip())
            except (ValueError, SyntaxError):
                continue
            links += str(value).split()
    return list(dict.fromkeys(links))


def installed_torch(python: Path) -> str:
    """The version of torch in the environment of ``python``, local label included (2.13.0+cpu)."""
    done = subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def kernel_runs(python: Path, kernel_dir: Path) -> bool:
    """True when the course kernel in ``kernel_dir`` is registered and starts ``python`` (this
    checkout's environment), compared as absolute paths: another checkout's ``.venv`` is another
    environment, even though its path ends the same way."""
    try:
        argv = json.loads((kernel_dir / "kernel.json").read_text())["argv"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return bool(argv) and os.path.abspath(argv[0]) == os.path.abspath(python)


def jupyter_kernel_dir() -> Path:
    """Where `ipykernel install --user` puts the course kernel (per jupyter_core's rules)."""
    if os.environ.get("JUPYTER_DATA_DIR"):
        base = Path(os.environ["JUPYTER_DATA_DIR"])
    elif platform.system() == "Darwin":
        base = Path.home() / "Library" / "Jupyter"
    elif os.name == "nt":
        base = Path(os.environ.get("APPDATA", Path.home())) / "jupyter"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "jupyter"
    return base / "kernels" / KERNEL_NAME


if __name__ == "__main__":
    sys.exit(main())
