"""Create or refresh the course's virtual environment (what `make lab` and `make test` run first).

Steps, each skipped when already done, so a second run takes about a second:

1. create `.venv` with the Python running this script (3.10 or newer);
2. install PyTorch: the CPU wheel on Linux without an NVIDIA GPU, the default PyPI wheel
   elsewhere (CUDA on Linux with a GPU, CPU/MPS on macOS); override with TORCH_SPEC and
   TORCH_INDEX_URL (see README, "GPU and other set-ups");
3. install the course (`pip install -e .[dev]`);
4. register the Jupyter kernel `attention-course` for this environment.

Only the standard library is used: this runs before anything is installed.
"""

from __future__ import annotations

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
    python = venv_python()
    if not python.exists():
        say(f"creating the virtual environment {VENV}")
        run(sys.executable, "-m", "venv", VENV)

    stamp = VENV / ".course-installed"
    imports_ok = works(python, "-c", "import torch, course_lib, ipykernel")
    if imports_ok and stamp.exists() and stamp.read_text() == stamp_text():
        say(f"environment {VENV} is up to date")
    else:
        pip = [python, "-m", "pip", "install", "--disable-pip-version-check"]
        if not works(python, "-c", "import torch"):
            run(*pip, *torch_install_args())
        run(*pip, "-e", f"{ROOT}[dev]")
        stamp.write_text(stamp_text())

    kernel_dir = jupyter_kernel_dir()
    if not kernel_runs(python, kernel_dir):
        run(python, "-m", "ipykernel", "install", "--user",
            "--name", KERNEL_NAME, "--display-name", KERNEL_DISPLAY_NAME)
    return 0


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
