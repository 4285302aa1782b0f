"""The course site and the slides, without a browser: the offline assets are verified, the scan
for other hosts finds them, the execution cache keys on the cells, and decks come from tags.
tests/test_browser.py loads the built pages in Chromium."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile

import pytest
from docutils import nodes
from docutils.utils import new_document

from course_lib.course import site, site_widgets, slides, web_assets
from course_lib.course.execute import cells_key, with_outputs
from course_lib.course.syllabus import COURSE_ROOT, LESSONS

PNG = base64.b64encode(b"\x89PNG fake").decode()


def tarball(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


# ---- offline assets ----------------------------------------------------------------------------

def test_integrity_accepts_the_published_digest_and_rejects_any_other():
    data = b"console.log(1)"
    web_assets.check_integrity(data, integrity(data))
    with pytest.raises(ValueError, match="does not match"):
        web_assets.check_integrity(data + b" ", integrity(data))
    with pytest.raises(ValueError, match="sha512"):
        web_assets.check_integrity(data, "sha1-abc")


def test_unpack_keeps_the_named_members_below_the_stripped_prefix(tmp_path):
    spec = web_assets.NpmFile("pkg", "1.0", "sha512-x", ("dist/", "README.md"),
                              skip_suffixes=(".map",), strip="dist/")
    data = tarball({"dist/a.js": b"a", "dist/fonts/b.woff": b"b", "dist/a.js.map": b"m",
                    "src/c.js": b"c", "README.md": b"r"})
    written = web_assets.unpack(data, spec, tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == \
        ["README.md", "a.js", "fonts/b.woff"]
    with pytest.raises(ValueError, match="none of"):
        web_assets.unpack(tarball({"other.js": b"o"}), spec, tmp_path / "empty")


def test_a_download_that_fails_its_integrity_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(web_assets, "CACHE", tmp_path)
    good = tarball({"require.js": b"define()"})
    spec = web_assets.NpmFile("requirejs", "9.9.9", integrity(good), ("require.js",))
    with pytest.raises(ValueError, match="integrity"):
        web_assets.npm_folder(spec, fetch=lambda url: tarball({"require.js": b"evil()"}))
    assert not (spec.folder / ".complete").exists()
    urls = []
    folder = web_assets.npm_folder(spec, fetch=lambda url: urls.append(url) or good)
    assert (folder / "require.js").read_bytes() == b"define()"
    assert urls == ["https://registry.npmjs.org/requirejs/-/requirejs-9.9.9.tgz"]
    web_assets.npm_folder(spec, fetch=lambda url: pytest.fail("downloaded twice"))


def test_scoped_npm_packages_get_the_registry_tarball_path():
    assert web_assets.HTML_MANAGER.tarball_url == ("https://registry.npmjs.org/@jupyter-widgets/"
                                                   "html-manager/-/html-manager-1.0.15.tgz")


# ---- the site ----------------------------------------------------------------------------------

def test_the_scan_finds_every_reference_to_another_host_and_nothing_local(tmp_path):
    (tmp_path / "page.html").write_text(
        '<script src="https://cdn.example/x.js"></script><a href="//cdn.example/y">y</a>'
        '<link href="_static/local.css"><img src="data:image/png;base64,AAAA">'
        "<p>see https://example.org in the text</p><a href='#top'>top</a>")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "style.css").write_text(
        "a { background: url('https://fonts.example/f.woff'); } b { src: url(fonts/f.woff) }")
    found = site.external_references(tmp_path)
    assert found == {"page.html": ["//cdn.example/y", "https://cdn.example/x.js"],
                     "sub/style.css": ["https://fonts.example/f.woff"]}
    (tmp_path / "page.html").write_text('<a href="notebooks/01.html">01</a>')
    (tmp_path / "sub" / "style.css").write_text("b { src: url(fonts/f.woff) }")
    assert site.external_references(tmp_path) == {}


def test_the_book_opens_on_the_course_map_and_holds_every_lesson_and_doc_page():
    toc = site.book_toc()
    assert toc["root"] == "notebooks/00_start_here"
    files = [chapter["file"] for part in toc["parts"] for chapter in part["chapters"]]
    lessons = [f"notebooks/{lesson.number}_{lesson.slug}" for lesson in LESSONS[1:]]
    assert files[:len(lessons)] == lessons
    docs = {p.stem for p in (COURSE_ROOT / "docs").glob("*.md")}
    assert {f.removeprefix("docs/") for f in files if f.startswith("docs/")} == docs
    assert "exercises" in files


def test_the_book_loads_mathjax_and_widgets_from_its_own_static_folder():
    config = site.book_config()["sphinx"]["config"]
    assert not config["mathjax_path"].startswith(("http", "//"))
    assert all(not path.startswith(("http", "//")) for path in config["nb_ipywidgets_js"])
    assert "sphinx_thebe" not in config["extensions"]


def test_the_exercises_page_offers_every_student_notebook(tmp_path):
    paths = sorted((COURSE_ROOT / "exercises").glob("*/*.ipynb"))
    page = site.exercises_page(paths)
    assert len(paths) == len(LESSONS)
    for path in paths:
        assert f"{{download}}`{path.name} <_exercises/{path.name}>`" in page


def test_the_execution_key_follows_the_code_and_the_profile_not_prose_outputs_or_tags(tmp_path):
    nb = {"cells": [{"cell_type": "code", "source": ["x = 1"], "metadata": {}, "outputs": []}],
          "metadata": {"kernelspec": {"name": "attention-course"}}, "nbformat": 4,
          "nbformat_minor": 5}
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(nb))
    key = cells_key(path, "fast")
    assert cells_key(path, "full") != key
    nb["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "1"}]
    nb["cells"][0]["metadata"]["tags"] = ["slide"]
    nb["cells"].append({"cell_type": "markdown", "source": ["# prose"], "metadata": {}})
    path.write_text(json.dumps(nb))
    assert cells_key(path, "fast") == key
    nb["cells"][0]["source"] = ["x = 2"]
    path.write_text(json.dumps(nb))
    assert cells_key(path, "fast") != key


def test_every_saved_widget_gets_the_note_that_moving_it_needs_the_lab():
    document = new_document("page")
    container = nodes.container()
    view = json.dumps({"model_id": "abc"})
    container += nodes.raw("", f'<script type="{site_widgets.WIDGET_VIEW}">{view}</script>',
                           format="html")
    container += nodes.raw("", "<p>not a widget</p>", format="html")
    document += container

    class App:
        class config:
            course_widget_note = "needs the live lab"

    site_widgets.add_widget_notes(App, document, "page")
    raws = [node.astext() for node in container.children]
    assert len(raws) == 3 and "needs the live lab" in raws[0]
    assert site_widgets.WIDGET_VIEW in raws[1]


# ---- the slides --------------------------------------------------------------------------------

def notebook(*cells: dict) -> dict:
    return {"cells": list(cells), "metadata": {}}


def md_cell(source: str, tags=(), cell_id="m") -> dict:
    return {"id": cell_id, "cell_type": "markdown", "source": source,
            "metadata": {"tags": list(tags)}}


def code_cell(outputs, tags=(), cell_id="c") -> dict:
    return {"id": cell_id, "cell_type": "code", "source": "draw(model)",
            "metadata": {"tags": list(tags)}, "outputs": outputs}


def figure(mime="image/png", data=PNG) -> dict:
    return {"output_type": "display_data", "data": {mime: data, "text/plain": "<Figure>"}}


def test_tagged_cells_become_slides_in_order_and_untagged_ones_do_not():
    nb = notebook(md_cell("## 2. The model\n\nSome prose."),
                  md_cell("Score: $e_{tj} = v^\\top \\tanh(W s + U h_j)$\n\n$$a = b < c$$",
                          ["slide"], "eq"),
                  code_cell([figure()], ["slide"], "fig"),
                  code_cell([figure()], [], "other"))
    made = slides.lesson_slides(nb)
    assert len(made) == 2
    assert "\\(e_{tj} = v^\\top \\tanh(W s + U h_j)\\)" in made[0].html
    assert "\\[a = b &lt; c\\]" in made[0].html
    assert made[1].html.startswith("<h3>2. The model</h3>")
    assert f'src="data:image/png;base64,{PNG}"' in made[1].html
    assert "draw(model)" not in made[1].html  # code never reaches a slide


def test_a_tagged_code_cell_without_a_figure_is_an_error():
    nb = notebook(md_cell("## Results"), code_cell([{"output_type": "stream", "name": "stdout",
                                                      "text": "BLEU 40"}], ["slide"]))
    with pytest.raises(ValueError, match="no figure"):
        slides.lesson_slides(nb)


def test_prose_and_tags_come_from_the_current_lesson_and_outputs_from_the_executed_copy():
    executed = notebook(md_cell("# Old title", [], "a"), code_cell([figure()], [], "b"))
    executed["metadata"]["widgets"] = {"saved": 1}
    current = notebook(md_cell("# New title", ["slide"], "a"), code_cell([], ["slide"], "b"))
    merged = with_outputs(current, executed)
    assert [cell["metadata"]["tags"] for cell in merged["cells"]] == [["slide"], ["slide"]]
    assert merged["cells"][0]["source"] == "# New title"
    assert merged["cells"][1]["outputs"] == [figure()] and merged["metadata"]["widgets"]
    assert current["cells"][1]["outputs"] == []  # the current notebook is not changed
    assert len(slides.lesson_slides(merged)) == 2


def test_a_deck_is_offline(tmp_path):
    lesson = LESSONS[4]
    page = slides.deck_html(lesson, slides.lesson_slides(
        notebook(md_cell("$$x$$", ["slide"]), code_cell([figure()], ["slide"]))))
    (tmp_path / "deck.html").write_text(page)
    assert site.external_references(tmp_path) == {}
    assert page.count("<section") == 3 and lesson.title in page


def test_an_unknown_lesson_number_names_the_valid_ones():
    with pytest.raises(ValueError, match="no lesson numbered.*00 to 11"):
        slides.build_slides("fast", ["12"])


def test_every_lesson_tags_a_deck_of_several_slides():
    for lesson in LESSONS:
        nb = json.loads((COURSE_ROOT / lesson.notebook).read_text())
        tagged = [cell for cell in nb["cells"] if slides.SLIDE_TAG in slides.cell_tags(cell)]
        assert len(tagged) >= 4, f"lesson {lesson.number} tags {len(tagged)} cells for its deck"
        assert any(cell["cell_type"] == "markdown" for cell in tagged)


def test_site_and_slides_are_make_targets():
    makefile = (COURSE_ROOT / "Makefile").read_text()
    assert "course site --profile $(PROFILE)" in makefile
    assert "course slides --profile $(PROFILE)" in makefile


def test_a_tagged_widget_shows_the_figure_its_saved_state_holds():
    state = {"box": {"state": {"children": ["IPY_MODEL_slider", "IPY_MODEL_out"]}},
             "slider": {"state": {"value": 3}},
             "out": {"state": {"outputs": [figure()]}}}
    view = {"output_type": "display_data",
            "data": {slides.WIDGET_VIEW: {"model_id": "box"}, "text/plain": "interactive"}}
    nb = notebook(md_cell("## 3. Hand-overs"), code_cell([view], ["slide"]))
    nb["metadata"]["widgets"] = {slides.WIDGET_STATE: {"state": state}}
    made = slides.lesson_slides(nb)
    assert len(made) == 1 and f"base64,{PNG}" in made[0].html
    del nb["metadata"]["widgets"]
    with pytest.raises(ValueError, match="no figure"):
        slides.lesson_slides(nb)


def test_lessons_execute_in_this_checkouts_python_whatever_kernel_is_registered(tmp_path,
                                                                              monkeypatch):
    """Another checkout may have registered the course kernel for its own environment; the site
    and the slides still run the lessons with this one's Python (and so this one's course_lib)."""
    import json
    import sys

    from course_lib import KERNEL_NAME
    from course_lib.course.execute import _kernel_manager

    kernels = tmp_path / "kernels" / KERNEL_NAME
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps(
        {"argv": ["/elsewhere/.venv/bin/python", "-m", "ipykernel_launcher", "-f",
                  "{connection_file}"], "display_name": "elsewhere", "language": "python"}))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path))
    manager = _kernel_manager(KERNEL_NAME)
    assert manager.kernel_spec.argv[0] == sys.executable
    assert _kernel_manager("python3").kernel_spec.argv[0] != "/elsewhere/.venv/bin/python"


def test_each_figure_on_the_site_gets_the_alt_text_its_output_carries(tmp_path):
    data = b"\x89PNG a figure"
    digest = hashlib.sha256(data).hexdigest()
    notebook = {"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "display_data", "data": {"image/png": base64.b64encode(data).decode()},
         "metadata": {"alt": 'Figure: "α" & <β>'}},
        {"output_type": "display_data", "data": {"image/png": PNG}, "metadata": {}}]}]}
    alts = site.image_alts(notebook)
    assert alts == {digest: 'Figure: "α" & <β>'}
    page = tmp_path / "lesson.html"
    page.write_text(f'<p><img alt="../_images/{digest}.png" src="../_images/{digest}.png" '
                    f'class="x"/><img alt="keep" src="../_images/{"0" * 64}.png"/></p>')
    assert site.finish_pages(tmp_path, alts) == 1
    written = page.read_text()
    assert f'<img alt="Figure: &quot;α&quot; &amp; &lt;β&gt;" src="../_images/{digest}.png"' \
        in written
    assert 'alt="keep"' in written and written.count("alt=") == 2


def test_the_theme_s_buttons_are_named_as_they_read():
    page = ('<button class="btn search-button-field search-button__button pst-js-only" '
            'title="Search" aria-label="Search" data-x="1"><span>Search</span></button>'
            '<i class="theme-switch fa-solid fa-sun" data-mode="light" title="Light"></i>')
    fixed = site.accessible_theme(page)
    assert 'aria-label="Search"' not in fixed and 'title="Light"' not in fixed
    assert 'data-mode="light" aria-hidden="true"' in fixed and "<span>Search</span>" in fixed
