"""Text alternatives: a figure is described from its own texts, a diagram from the config it is
drawn from, TeX made readable; in a kernel every figure the inline backend shows carries its
``alt`` in the output's metadata, which the site writes into the page."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import pytest  # noqa: E402

from course_lib.course.execute import execute  # noqa: E402
from course_lib.diagrams import bahdanau_diagram, draw  # noqa: E402
from course_lib.experiments.bottleneck import bottleneck_config  # noqa: E402
from course_lib.figure_text import describe_figure, figure_alt, plain_text  # noqa: E402


@pytest.mark.parametrize(("tex", "plain"), [
    (r"$e_{tj} = v^\top \tanh(W s_{t-1} + U h_j)$", "e_tj = vᵀ tanh(W s_t-1 + U h_j)"),
    (r"$c_t = \Sigma_j\, a_{tj} h_j$", "c_t = Σ_j a_tj h_j"),
    (r"scores / $\sqrt{d_k}$", "scores / √d_k"),
    (r"$\mathrm{softmax}(x / \tau)$", "softmax(x / τ)"),
    ("no TeX at all", "no TeX at all"),
])
def test_plain_text_reads_tex_aloud(tex, plain):
    assert plain_text(tex) == plain


def test_a_figure_is_described_by_its_titles_axes_and_legend():
    figure, axes = plt.subplots(1, 2)
    figure.suptitle("BLEU by length")
    axes[0].set_title("no attention")
    axes[0].set_xlabel("source words")
    axes[1].plot([0, 1], [0, 1], label="Bahdanau")
    axes[1].legend()
    text = describe_figure(figure)
    assert text.startswith("Figure: BLEU by length")
    for part in ("panel 1 of 2: no attention", "horizontal axis: source words",
                 "panel 2 of 2: legend: Bahdanau"):
        assert part in text
    plt.close(figure)
    empty = plt.figure()
    assert describe_figure(empty) == "Figure (no title or axis labels)"
    plt.close(empty)


def test_a_diagram_is_described_from_its_config():
    diagram = bahdanau_diagram(bottleneck_config("bahdanau"))
    figure = draw(diagram)
    alt = figure_alt(figure)
    plt.close(figure)
    assert alt.startswith(f"Diagram: {plain_text(diagram.title)}")
    for box in diagram.boxes:
        assert plain_text(" ".join(box.text.split())) in alt
    assert alt.count(" to ") >= len(diagram.arrows)
    assert "$" not in alt and "\\" not in alt


def test_in_a_kernel_every_shown_figure_carries_its_alt(tmp_path):
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nimport course_lib\n\n"
                                  "fig, ax = plt.subplots()\nax.set_title('$\\\\alpha$ by step')"
                                  "\nplt.show()"),
        nbformat.v4.new_code_cell("from course_lib.diagrams import bahdanau_diagram, draw\n"
                                  "from course_lib.experiments.bottleneck import "
                                  "bottleneck_config\n\n"
                                  "draw(bahdanau_diagram(bottleneck_config('bahdanau')));"),
    ])
    notebook.metadata["kernelspec"] = {"name": "attention-course", "display_name": "course",
                                       "language": "python"}
    source = tmp_path / "figures.ipynb"
    nbformat.write(notebook, source)
    execute(source, tmp_path / "done.ipynb", "fast")
    done = nbformat.read(tmp_path / "done.ipynb", as_version=4)
    alts = [output.get("metadata", {}).get("alt") for cell in done.cells
            for output in cell.outputs if "image/png" in output.get("data", {})]
    assert alts[0] == "Figure: α by step"
    assert alts[1].startswith("Diagram: Bahdanau attention")
