"""Where the course's files are: the source checkout the package sits in, and the caches.

``course_lib`` imports from anywhere (installed from a wheel, say), but the notebooks,
solutions, results and docs exist only in a checkout of the repository. What reads or writes
them asks :func:`require_checkout`, which says so plainly when there is none; the caches go in
the checkout's ``.cache/`` or, outside one, in the user's cache folder.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
COURSE_ROOT = PACKAGE_DIR.parent  # the checkout's root, when the package sits in one


class NotACheckout(RuntimeError):
    """What was asked for needs the repository's files, and course_lib is not in a checkout."""


def is_checkout(root: Path = COURSE_ROOT) -> bool:
    """True when ``root`` is a checkout of the course (its pyproject.toml and notebooks/)."""
    return (root / "pyproject.toml").is_file() and (root / "notebooks").is_dir()


def require_checkout(what: str) -> Path:
    """The checkout's root; :class:`NotACheckout`, naming ``what`` needs it, where there is none."""
    if is_checkout():
        return COURSE_ROOT
    raise NotACheckout(f"{what} needs the course's source checkout (notebooks/, solutions/, "
                       f"docs/), but course_lib is installed at {PACKAGE_DIR}, outside one: "
                       f"clone the repository and install it there with `pip install -e .`")


def display_path(path: Path) -> str:
    """``path`` as messages show it: relative to the checkout when inside it (``.cache/models``),
    else with the home folder written ``~``, so that outputs saved in a notebook or on the site
    do not carry one machine's folders. Links are not followed (a venv's python stays itself)."""
    absolute = Path(os.path.abspath(path))
    if absolute.is_relative_to(COURSE_ROOT):
        return str(absolute.relative_to(COURSE_ROOT))
    home = Path.home()
    if absolute.is_relative_to(home) and home != Path("/"):
        return str(Path("~") / absolute.relative_to(home))
    return str(absolute)


def cache_dir(name: str) -> Path:
    """The cache folder ``name``: ``.cache/<name>`` in the checkout; outside one,
    ``attention-course/<name>`` in ``$XDG_CACHE_HOME`` (default ``~/.cache``)."""
    if is_checkout():
        return COURSE_ROOT / ".cache" / name
    user_cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(user_cache) / "attention-course" / name
