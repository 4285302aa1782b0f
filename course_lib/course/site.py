"""`course site`: the course as a static website, with every lesson's outputs in place.

The site is a Jupyter Book 1.x (Sphinx + MyST-NB) built from a staging folder,
``build/site/<profile>/src``, that holds:

- the lessons, executed in the chosen profile (``execute.execute_cached``: only notebooks whose
  cells changed run again, and the full-profile lessons load the models ``course reproduce``
  saved, as they do in the lab);
- the pages of ``docs/``, at the same relative place, so links between lessons and docs work;
- the students' exercise notebooks, offered as downloads on a generated page;
- MathJax, require.js and the ipywidgets manager (``web_assets``), so no page loads anything from
  another host. After the build every page is scanned and any ``src``/``href`` to another host
  fails the build.

The HTML lands in ``build/site/<profile>/_build/html``; open its ``index.html``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from course_lib.course.execute import execute_cached, executed_cache, with_outputs
from course_lib.course.links import broken_html_links
from course_lib.course.syllabus import COURSE_ROOT, LESSONS
from course_lib.course.web_assets import copy_assets
from course_lib.widgets.embed import site_script, site_styles

TITLE = "Attention, from dot products to Transformers"
DOC_PAGES = ("setup", "notation", "results", "experiments", "reproducibility", "performance",
             "benchmarks", "instructors", "contributing", "layout", "api", "distributed",
             "errata")
WIDGET_NOTE = ("This control shows the state it was saved in. Moving it needs the live lab "
               "(<code>make lab</code>), where a kernel redraws the figure.")
FAVICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" '
           'height="16" rx="3" fill="#1f4e79"/><text x="8" y="12.5" font-size="12" '
           'text-anchor="middle" fill="#fff">α</text></svg>')
MATHJAX = "mathjax/tex-chtml-full.js"
# an attribute that loads or links something: src=, href=, or a url(...) in an inline style
_REFERENCE = re.compile(r"""(?:\b(?:src|href|action|poster|data)\s*=\s*["']|url\(\s*["']?)"""
                        r"""((?:https?:)?//[^"')\s>]+)""", re.IGNORECASE)


@dataclass
class SiteReport:
    html: Path
    executed: dict[str, float | None] = field(default_factory=dict)  # None: reused from cache
    build_s: float = 0.0
    size_bytes: int = 0
    alts: dict[str, str] = field(default_factory=dict)  # image sha256 -> its text alternative


def site_folder(profile: str, root: Path = COURSE_ROOT) -> Path:
    return root / "build" / "site" / profile


def external_references(html_root: Path) -> dict[str, list[str]]:
    """Every ``src``/``href``/``url()`` in the built HTML and CSS that names another host, by
    file. An offline site has none."""
    found = {}
    for path in sorted([*html_root.rglob("*.html"), *html_root.rglob("*.css")]):
        hits = sorted(set(_REFERENCE.findall(path.read_text(errors="replace"))))
        if hits:
            found[str(path.relative_to(html_root))] = hits
    return found


def book_config(root: Path = COURSE_ROOT) -> dict:
    """The Jupyter Book ``_config.yml``, as a dictionary."""
    return {
        "title": TITLE, "author": "the course authors", "copyright": "",
        "only_build_toc_files": True,
        "exclude_patterns": ["_build", "_exercises", "**.ipynb_checkpoints"],
        "execute": {"execute_notebooks": "off"},  # the staging step executed them
        "parse": {"myst_enable_extensions": ["colon_fence", "dollarmath", "amsmath"]},
        "html": {"use_multitoc_numbering": False, "home_page_in_navbar": True},
        "sphinx": {
            "config": {
                # Jupyter Book's defaults without the ones that reach other hosts (thebe's
                # launcher, comments, intersphinx), plus the widget note
                "extensions": ["sphinx_togglebutton", "sphinx_copybutton", "myst_nb",
                               "jupyter_book", "sphinx_external_toc", "sphinx_design",
                               "sphinx_book_theme", "course_lib.course.site_widgets"],
                "html_context": {"default_mode": "light"},
                "html_favicon": "_assets/favicon.svg",  # else browsers ask for /favicon.ico
                # not _static, whose scripts Jupyter Book adds to every page
                "html_static_path": ["_assets"],
                "html_show_copyright": False,
                "html_copy_source": False,  # the executed notebooks would double the site
                "html_theme_options": {"use_download_button": False,
                                       "use_fullscreen_button": False,
                                       "repository_url": "", "use_repository_button": False},
                "mathjax_path": MATHJAX,
                "myst_dmath_double_inline": True,
                "myst_heading_anchors": 3,
                "nb_ipywidgets_js": {
                    "widgets/require.js": {},
                    "widgets/embed-amd.js": {"data-jupyter-widgets-cdn": "_static/widgets/",
                                             "crossorigin": "anonymous"}},
                "course_widget_note": WIDGET_NOTE,
                # the course's widgets save a static copy as HTML beside the live view: the
                # site draws the copy (course_lib/widgets/embed.py)
                "nb_mime_priority_overrides": [["html", "text/html", 5]],
                # lessons print results as Markdown tables, which CommonMark does not have
                "nb_render_markdown_format": "gfm",
                "suppress_warnings": ["myst.header", "mystnb.unknown_mime_type"],
            },
        },
    }


def book_toc() -> dict:
    """The ``_toc.yml``: lesson 00 (the course map) as the front page, then the lessons, the
    exercises page and the reference pages."""
    lessons = [{"file": f"notebooks/{lesson.number}_{lesson.slug}"} for lesson in LESSONS[1:]]
    return {"format": "jb-book", "root": f"notebooks/{LESSONS[0].number}_{LESSONS[0].slug}",
            "parts": [{"caption": "Lessons", "chapters": lessons},
                      {"caption": "Practice", "chapters": [{"file": "exercises"}]},
                      {"caption": "Reference",
                       "chapters": [{"file": f"docs/{page}"} for page in DOC_PAGES]}]}


def exercises_page(exercise_paths: list[Path]) -> str:
    """The Markdown of the page that offers every student notebook as a download."""
    lines = ["# Exercises", "",
             "Each lesson has a set of graded exercises. Download a notebook, open it in the "
             "course's JupyterLab (`make lab`) and run its self-check cells: each prints a "
             "pass line or names what is wrong. See the [instructors' guide](docs/instructors.md) "
             "for how the sets are graded.", "",
             "| lesson | exercises |", "|---|---|"]
    titles = {lesson.number: lesson.title for lesson in LESSONS}
    for path in exercise_paths:
        number = path.name[:2]
        lines.append(f"| {number} · {titles.get(number, path.stem)} | "
                     f"{{download}}`{path.name} <_exercises/{path.name}>` |")
    return "\n".join(lines) + "\n"


# a lesson's link to its exercise set, ``[label](../exercises/<lesson>/<name>.ipynb)``
_EXERCISE_LINK = re.compile(r"\[([^\]]+)\]\(\.\./exercises/[^/)\s]+/([^/)\s]+\.ipynb)\)")


def site_links(notebook: dict) -> dict:
    """``notebook`` with its links to exercise notebooks turned into downloads of the copies the
    site offers: in the lab they open the notebook, on the site they download it."""
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            source = "".join(cell["source"])
            cell["source"] = _EXERCISE_LINK.sub(
                lambda m: f"{{download}}`{m[1].replace('`', '')} <../_exercises/{m[2]}>`", source)
    return notebook


def stage(profile: str, root: Path = COURSE_ROOT, *, rerun: bool = False,
          report: SiteReport | None = None) -> Path:
    """Fill ``build/site/<profile>/src`` with everything the book is built from."""
    folder = site_folder(profile, root)
    src = folder / "src"
    shutil.rmtree(src, ignore_errors=True)
    (src / "notebooks").mkdir(parents=True)
    for lesson in LESSONS:
        notebook = root / lesson.notebook
        print(f"[site] lesson {lesson.number}: executing in the {profile} profile "
              f"(reused if unchanged)", flush=True)
        done = execute_cached(notebook, executed_cache(folder / "executed"), profile,
                              rerun=rerun)
        if report is not None:
            report.executed[lesson.number] = done.seconds
        merged = site_links(with_outputs(json.loads(notebook.read_text()),
                                         json.loads(done.executed.read_text())))
        # every widget's output carries a static copy, which the site draws; the live views'
        # saved state would only make the page load modules no kernel will answer
        merged["metadata"].pop("widgets", None)
        if report is not None:
            report.alts.update(image_alts(merged))
        (src / lesson.notebook).write_text(json.dumps(merged, indent=1, ensure_ascii=False))
    shutil.copytree(root / "docs", src / "docs", ignore=shutil.ignore_patterns("*.py"))
    exercises = sorted((root / "exercises").glob("*/*.ipynb"))
    (src / "_exercises").mkdir()
    for path in exercises:
        shutil.copyfile(path, src / "_exercises" / path.name)
    (src / "exercises.md").write_text(exercises_page(exercises))
    (src / "_config.yml").write_text(yaml.safe_dump(book_config(root), sort_keys=False))
    (src / "_toc.yml").write_text(yaml.safe_dump(book_toc(), sort_keys=False))
    copy_assets(src / "_assets", widgets=True)
    (src / "_assets" / "course").mkdir()
    (src / "_assets" / "course" / "widgets.js").write_text(site_script())
    (src / "_assets" / "course" / "widgets.css").write_text(site_styles())
    (src / "_assets" / "favicon.svg").write_text(FAVICON)
    return src


def image_alts(notebook: dict) -> dict[str, str]:
    """The text alternative of every figure in ``notebook``'s outputs (the ``alt`` that
    ``course_lib.figure_text`` puts in a figure's metadata), keyed by the sha256 of the image,
    which is the name MyST-NB gives its file."""
    alts = {}
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            png, alt = output.get("data", {}).get("image/png"), output.get("metadata", {})
            alt = alt.get("alt") or alt.get("image/png", {}).get("alt")
            if png and alt:
                data = base64.b64decode("".join(png) if isinstance(png, list) else png)
                alts[hashlib.sha256(data).hexdigest()] = alt
    return alts


_IMAGE = re.compile(r'<img\b[^>]*>')
# The theme's search buttons name themselves "Search" but show "Search Ctrl+K", and its colour
# mode button reads its icons' titles; screen readers and speech input need the two to agree.
_THEME_FIXES = (
    (re.compile(r'(<button class="btn search-button-field search-button__button[^"]*") '
                r'title="Search" aria-label="Search"'), r"\1"),
    (re.compile(r'(<i class="theme-switch [^"]*" data-mode="\w+") +title="[^"]*"'),
     r'\1 aria-hidden="true"'),
)


def with_alts(page: str, alts: dict[str, str]) -> tuple[str, int]:
    """``page`` with each ``<img>`` whose file is in ``alts`` given its text alternative (Sphinx
    writes the file's path), and the number of images changed."""
    changed = 0

    def with_alt(match: re.Match) -> str:
        nonlocal changed
        tag = match.group(0)
        found = re.search(r'src="[^"]*?([0-9a-f]{64})\.png"', tag)
        if not found or found.group(1) not in alts:
            return tag
        changed += 1
        tag = re.sub(r'\salt="[^"]*"', "", tag)
        return tag.replace("<img", f'<img alt="{html.escape(alts[found.group(1)])}"', 1)

    return _IMAGE.sub(with_alt, page), changed


def accessible_theme(page: str) -> str:
    """``page`` with the theme's controls whose names disagree with their text fixed."""
    for pattern, replacement in _THEME_FIXES:
        page = pattern.sub(replacement, page)
    return page


def finish_pages(html_root: Path, alts: dict[str, str]) -> int:
    """One pass over the built pages: figures' text alternatives, the theme's labels. Returns
    the number of images given their text."""
    changed = 0
    for path in html_root.rglob("*.html"):
        text = path.read_text()
        new, count = with_alts(text, alts)
        new = accessible_theme(new)
        changed += count
        if new != text:
            path.write_text(new)
    return changed


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build_site(profile: str = "full", root: Path = COURSE_ROOT, *,
               rerun: bool = False) -> SiteReport:
    """Stage and build the site; raise if Sphinx fails or a page references another host."""
    start = time.perf_counter()
    folder = site_folder(profile, root)
    report = SiteReport(html=folder / "_build" / "html")
    src = stage(profile, root, rerun=rerun, report=report)
    shutil.rmtree(folder / "_build", ignore_errors=True)
    book = Path(sys.executable).parent / "jupyter-book"
    subprocess.run([str(book), "build", str(src), "--path-output", str(folder), "--keep-going"],
                   check=True)
    finish_pages(report.html, report.alts)
    broken = broken_html_links(report.html)
    if broken:
        raise RuntimeError("the site has broken links: " + "; ".join(broken))
    external = external_references(report.html)
    if external:
        listed = "; ".join(f"{page}: {', '.join(urls)}" for page, urls in external.items())
        raise RuntimeError(f"the site must load nothing from another host, but: {listed}")
    report.build_s = time.perf_counter() - start
    report.size_bytes = folder_size(report.html)
    return report
