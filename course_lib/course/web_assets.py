"""The scripts, fonts and styles the course site and the slides load, served from the site itself.

A page of the site must not load anything from another host, so every script a page needs is
copied into the build from a package registry:

- reveal.js 5 from the ``sphinx-revealjs`` wheel (PyPI, installed with the course);
- MathJax 3, require.js and the ipywidgets HTML manager (``embed-amd.js``, which draws saved
  widget state) from the npm registry (and axe-core, which the browser tests inject),
  downloaded once into ``.cache/web-assets`` by ordinary
  HTTPS and checked against the sha512 integrity the registry publishes, pinned below.
"""

from __future__ import annotations

import base64
import hashlib
import io
import shutil
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from course_lib.paths import cache_dir

CACHE = cache_dir("web-assets")


@dataclass(frozen=True)
class NpmFile:
    """Files taken from one npm package version, verified by the registry's integrity hash."""
    package: str
    version: str
    integrity: str  # "sha512-<base64>", as the npm registry publishes it
    members: tuple[str, ...]  # paths in the tarball's package/ folder; "x/" means the folder x
    skip_suffixes: tuple[str, ...] = ()
    strip: str = ""  # leading folders dropped from the paths written (the rest is kept)

    @property
    def tarball_url(self) -> str:
        name = self.package.rpartition("/")[2]
        return f"https://registry.npmjs.org/{self.package}/-/{name}-{self.version}.tgz"

    @property
    def folder(self) -> Path:
        return CACHE / f"{self.package.replace('/', '_')}-{self.version}"


REQUIRE_JS = NpmFile(
    "requirejs", "2.3.8",
    "sha512-7/cTSLOdYkNBNJcDMWf+luFvMriVm7eYxp4BcFCsAX0wF421Vyce5SXP17c+Jd5otXKGNehIonFlyQXSowL6Mw==",
    ("require.js",))
HTML_MANAGER = NpmFile(
    "@jupyter-widgets/html-manager", "1.0.15",
    "sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA==",
    ("dist/",), skip_suffixes=(".map", "embed.js", "libembed-amd.js"), strip="dist/")
# MathJax 3 with every TeX extension in one file, and the web fonts it loads next to it
MATHJAX = NpmFile(
    "mathjax", "3.2.2",
    "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
    ("es5/tex-chtml-full.js", "es5/output/chtml/fonts/woff-v2/"), strip="es5/")
# the accessibility checker the browser tests run over every page (tests/test_accessibility.py)
AXE_CORE = NpmFile(
    "axe-core", "4.14.1",
    "sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ==",
    ("axe.min.js",))


def check_integrity(data: bytes, integrity: str) -> None:
    """Raise ``ValueError`` unless ``data`` has the sha512 digest that ``integrity`` names."""
    algorithm, _, expected = integrity.partition("-")
    if algorithm != "sha512":
        raise ValueError(f"expected a sha512 integrity string, got {integrity!r}")
    actual = base64.b64encode(hashlib.sha512(data).digest()).decode()
    if actual != expected:
        raise ValueError(f"download does not match its published integrity: expected sha512-"
                         f"{expected[:16]}…, got sha512-{actual[:16]}…")


def unpack(data: bytes, spec: NpmFile, target: Path) -> list[Path]:
    """Write the members ``spec`` names from the npm tarball ``data`` under ``target``."""
    written = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for member in archive.getmembers():
            inner = member.name.partition("/")[2]  # drop the leading package/
            wanted = any(inner == m or (m.endswith("/") and inner.startswith(m))
                         for m in spec.members)
            if not member.isfile() or not wanted or inner.endswith(spec.skip_suffixes):
                continue
            path = target / inner.removeprefix(spec.strip)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(archive.extractfile(member).read())
            written.append(path)
    if not written:
        raise ValueError(f"{spec.package} {spec.version}: none of {spec.members} in the tarball")
    return written


def npm_folder(spec: NpmFile, fetch=None) -> Path:
    """The folder holding ``spec``'s files, downloading and verifying them the first time."""
    done = spec.folder / ".complete"
    if done.is_file():
        return spec.folder
    fetch = fetch or (lambda url: urllib.request.urlopen(url, timeout=60).read())
    print(f"[site] downloading {spec.package} {spec.version} from the npm registry", flush=True)
    data = fetch(spec.tarball_url)
    check_integrity(data, spec.integrity)
    shutil.rmtree(spec.folder, ignore_errors=True)
    unpack(data, spec, spec.folder)
    done.write_text(spec.integrity)
    return spec.folder


def revealjs_folder() -> Path:
    """reveal.js (``dist/`` and ``plugin/``) as the ``sphinx-revealjs`` wheel ships it."""
    import sphinx_revealjs

    return Path(sphinx_revealjs.__file__).parent / "_static" / "revealjs"


def copy_assets(static: Path, *, widgets: bool = True, reveal: bool = False) -> Path:
    """Fill ``static`` with ``mathjax/`` and, as asked, ``widgets/`` and ``revealjs/``."""
    static.mkdir(parents=True, exist_ok=True)
    shutil.copytree(npm_folder(MATHJAX), static / "mathjax", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(".complete"))
    if widgets:
        for spec in (REQUIRE_JS, HTML_MANAGER):
            shutil.copytree(npm_folder(spec), static / "widgets", dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns(".complete"))
    if reveal:
        source = revealjs_folder()
        for part in ("dist", "plugin"):
            shutil.copytree(source / part, static / "revealjs" / part, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("*.map", "*.esm.js"))
    return static
