"""The course's plots: attention heat maps, training curves with one panel per unit, live plots,
decision boundaries, images with attention, BLEU by length and ``show_source``."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from course_lib.models.toy import ToyClassifier, ToyConfig, make_spirals  # noqa: E402
from course_lib.train.history import History  # noqa: E402
from course_lib.train.loop import fit, supervised_loss  # noqa: E402
from course_lib.viz import plot_attention  # noqa: E402
from course_lib.viz_training import LivePlot, plot_history  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_heat_map_labels_both_axes_and_shows_the_weights():
    weights = torch.softmax(torch.randn(3, 4), dim=-1)
    source, target = ["le", "chat", "noir", "<eos>"], ["the", "black", "cat"]
    ax = plot_attention(weights, source, target, gold=[(0, 0), (2, 1)])
    assert [t.get_text() for t in ax.get_xticklabels()] == source
    assert [t.get_text() for t in ax.get_yticklabels()] == target
    drawn = ax.collections[0].get_array().reshape(3, 4)
    np.testing.assert_allclose(drawn, weights.numpy(), rtol=1e-6)
    boxes = [p for p in ax.patches if isinstance(p, plt.Rectangle)]
    assert {(b.get_x(), b.get_y()) for b in boxes} >= {(0, 0), (1, 2)}


def test_heat_map_refuses_labels_that_do_not_fit():
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(2, 4\)"):
        plot_attention(torch.rand(3, 4), list("abcd"), list("xy"))


def test_heat_map_needs_a_matrix_and_finite_weights():
    with pytest.raises(ValueError, match=r"2-D.*\(2, 3, 4\)"):
        plot_attention(torch.rand(2, 3, 4), list("abcd"), list("xyz"))
    with pytest.raises(ValueError, match="NaN"):
        plot_attention(np.full((1, 1), np.nan), ["a"], ["x"])
    with pytest.raises(ValueError, match="gold pair"):
        plot_attention(torch.rand(1, 1), ["a"], ["x"], gold=[(1, 0)])


def test_history_plot_puts_losses_and_metrics_on_separate_panels():
    history = History([{"epoch": e, "train_loss": 1 / e, "val_loss": 1.2 / e, "accuracy": e / 3,
                        "time_s": 0.1, "lr": 0.1, "grad_norm": 1.0} for e in (1, 2, 3)])
    loss_ax, metric_ax = plot_history(history)
    assert {line.get_label() for line in loss_ax.get_lines()} == {"train_loss", "val_loss"}
    assert [line.get_label() for line in metric_ax.get_lines()] == ["accuracy"]
    np.testing.assert_allclose(metric_ax.get_lines()[0].get_ydata(), [1 / 3, 2 / 3, 1.0])
    with pytest.raises(KeyError, match="bleu"):
        plot_history(history, ["bleu"])


def test_quantities_share_an_axis_only_when_they_share_a_unit():
    from course_lib.viz_training import FRACTION, curve_unit

    units = {"train_loss": "loss", "val_loss": "loss", "val_accuracy": FRACTION,
             "exact_match": FRACTION, "bleu": "bleu"}
    history = History([{"epoch": e, "train_loss": 2 / e, "val_loss": 2.2 / e,
                        "val_accuracy": e / 4, "exact_match": e / 5, "bleu": 10.0 * e,
                        "grad_norm": 1.0, "lr": 0.01, "steps": 40 * e, "time_s": 0.2,
                        "train_s": 0.1} for e in (1, 2, 3)])
    axes = plot_history(history)
    drawn = [{line.get_label() for line in ax.get_lines()} for ax in axes]
    assert drawn == [{"train_loss", "val_loss"}, {"val_accuracy", "exact_match"}, {"bleu"}]
    for ax, labels in zip(axes, drawn, strict=True):  # one unit per axis, named on it
        assert {units[label] for label in labels} == {ax.get_ylabel()}
        assert {curve_unit(label) for label in labels} == {ax.get_ylabel()}
    assert axes[1].get_ylim() == (0, 1.02)
    explicit = plot_history(history, ["val_accuracy", "steps"])  # a counter, asked for by name
    assert [[line.get_label() for line in ax.get_lines()] for ax in explicit] == [
        ["val_accuracy"], ["steps"]]


def test_the_live_plot_of_lesson_00_keeps_accuracy_off_the_step_axis(monkeypatch):
    monkeypatch.setattr("IPython.display.display", lambda figure, display_id: None)
    captured = []
    monkeypatch.setattr(plt, "close", lambda figure: captured.append(figure))
    live = LivePlot()
    record = {"epoch": 1, "train_loss": 0.6, "val_loss": 0.5, "val_accuracy": 0.8,
              "grad_norm": 1.2, "lr": 0.01, "steps": 13, "time_s": 0.3, "train_s": 0.2}
    live.on_epoch_end(1, record, model=None)
    panels = [[line.get_label() for line in ax.get_lines()] for ax in captured[0].axes]
    assert panels == [["train_loss", "val_loss"], ["val_accuracy"]]


def test_live_plot_updates_one_display(monkeypatch):
    shown = []

    class Handle:
        def update(self, figure):
            shown.append(("update", figure))

    def fake_display(figure, display_id):
        shown.append(("display", figure))
        return Handle()

    monkeypatch.setattr("IPython.display.display", fake_display)
    live = LivePlot()
    for epoch in (1, 2, 3):
        live.on_epoch_end(epoch, {"epoch": epoch, "train_loss": 1.0 / epoch}, model=None)
    assert [kind for kind, _ in shown] == ["display", "update", "update"]
    assert len(live.records) == 3


def test_live_plot_draws_every_steps_loss_as_it_goes(monkeypatch):
    """Inside fit: redrawn every ``every`` steps, the step curve first, then the epoch curves;
    the running mean is the mean of the last ``window`` losses."""
    shown = []

    class Handle:
        def update(self, figure):
            shown.append(figure)

    monkeypatch.setattr("IPython.display.display",
                        lambda figure, display_id: (shown.append(figure), Handle())[1])
    monkeypatch.setattr(plt, "close", lambda figure: None)
    live = LivePlot(every=10)
    model = ToyClassifier(ToyConfig(hidden=8))
    x, y = make_spirals(40, seed=0)
    fit(model, torch.optim.SGD(model.parameters(), lr=0.1),
        DataLoader(TensorDataset(x, y), batch_size=8), supervised_loss(F.cross_entropy),
        max_steps=30, device="cpu", callbacks=[live], progress=False, live_plot=False)
    assert live.steps == list(range(1, 31))
    assert len(shown) == 3 + 3  # at steps 10, 20 and 30, and at the end of each 10-step epoch
    step_panel, loss_panel = shown[-1].axes
    raw, mean = step_panel.get_lines()
    assert list(raw.get_xdata()) == live.steps
    np.testing.assert_allclose(mean.get_ydata()[0], np.mean(live.losses[:20]))
    assert [line.get_label() for line in loss_panel.get_lines()] == ["train_loss"]


def test_decision_boundary_draws_grid_and_points():
    from course_lib.viz_images import plot_decision_boundary

    probs = np.linspace(0, 1, 16).reshape(4, 4)
    ax = plot_decision_boundary(probs, 1.0, torch.zeros(3, 2), torch.tensor([0, 1, 1]))
    np.testing.assert_allclose(ax.images[0].get_array(), probs)
    assert len(ax.collections[0].get_offsets()) == 3
    with pytest.raises(ValueError, match=r"\(N, 2\)"):
        plot_decision_boundary(probs, 1.0, torch.zeros(3, 3), torch.zeros(3))
    with pytest.raises(ValueError, match="square"):
        plot_decision_boundary(np.zeros((2, 3)), 1.0, torch.zeros(3, 2), torch.zeros(3))


def test_images_are_drawn_in_pixel_coordinates_with_attention_on_top():
    from course_lib.viz_images import attention_on_image, show_image

    grey = torch.rand(1, 6, 10)  # (C, H, W)
    ax = show_image(grey, title="grey")
    np.testing.assert_allclose(ax.images[0].get_array(), grey[0].numpy())
    assert ax.images[0].get_extent() == [0, 10, 6, 0] and ax.get_title() == "grey"
    colour = show_image(torch.rand(3, 4, 4))
    assert colour.images[0].get_array().shape == (4, 4, 3)
    weights = torch.zeros(6)
    weights[4] = 1.0  # row 1, column 1 of a (2, 3) grid
    ax = attention_on_image(grey, weights, (2, 3), box=(1, 1, 3, 2))
    np.testing.assert_allclose(ax.images[1].get_array(), weights.reshape(2, 3).numpy())
    peak, box = ax.patches
    assert peak.get_xy() == (10 / 3, 3.0) and (box.get_x(), box.get_y()) == (1, 1)
    with pytest.raises(ValueError, match=r"\(1, H, W\) or \(3, H, W\), got \(2, 4, 4\)"):
        show_image(torch.rand(2, 4, 4))
    with pytest.raises(ValueError, match=r"shape \(6,\) for a 2x3 grid, got \(5,\)"):
        attention_on_image(grey, torch.rand(5), (2, 3))


def test_bleu_by_length_plot_one_line_per_model():
    from course_lib.viz import plot_bleu_by_length

    ax = plot_bleu_by_length({"none": {"1-10": 90.0, "11-20": 50.0, "31+": None},
                              "bahdanau": {"1-10": 95.0, "11-20": 94.0, "31+": 93.0}})
    lines = {line.get_label(): line.get_ydata() for line in ax.get_lines()}
    np.testing.assert_allclose(lines["bahdanau"], [95.0, 94.0, 93.0])
    assert np.isnan(lines["none"][2])
    with pytest.raises(ValueError, match="buckets"):
        plot_bleu_by_length({"a": {"1-10": 1.0}, "b": {"11-20": 2.0}})


def _two_functions():
    from course_lib.device import synchronize
    from course_lib.timing import median_seconds

    return synchronize, median_seconds


def test_show_source_returns_the_highlighted_code_of_every_object(capsys):
    from IPython.display import Code

    from course_lib.viz import show_source

    synchronize, median_seconds = _two_functions()
    code = show_source(synchronize)
    assert isinstance(code, Code) and code.language == "python"
    assert code.data.startswith("def synchronize(device")
    both = show_source(synchronize, median_seconds)
    assert "def synchronize(device" in both.data and "def median_seconds(fn" in both.data
    assert both.data.index("def synchronize") < both.data.index("def median_seconds")
    assert "\n\ndef median_seconds" in both.data  # a blank line between the two
    with pytest.raises(TypeError, match="at least one"):
        show_source()


def test_show_source_dedents_methods():
    from course_lib.viz import show_source

    code = show_source(History.__getitem__)
    assert code.data.startswith("def __getitem__(self, key")


def test_attention_heads_share_one_colour_scale_and_one_colour_bar():
    from course_lib.viz import plot_attention_heads

    weights = torch.softmax(torch.randn(5, 3, 4), dim=-1)  # (h, T, S)
    fig = plot_attention_heads(weights, list("abcd"), list("xyz"), columns=2, gold=[(0, 1)],
                               title="cross-attention")
    panels = [ax for ax in fig.axes if ax.get_title().startswith("head")]
    assert [ax.get_title() for ax in panels] == [f"head {i}" for i in range(5)]
    assert len(fig.axes) == 3 * 2 + 1  # a 3 x 2 grid (one panel off) and one colour bar
    assert not fig.axes[5].axison
    top = float(weights.max())
    for ax, expected in zip(panels, weights, strict=True):
        drawn = ax.collections[0]
        np.testing.assert_allclose(drawn.get_array().reshape(3, 4), expected.numpy(), rtol=1e-6)
        assert drawn.get_clim() == pytest.approx((0.0, top))
        assert [t.get_text() for t in ax.get_xticklabels()] == list("abcd")
        assert any(isinstance(p, plt.Rectangle) and (p.get_x(), p.get_y()) == (1, 0)
                   for p in ax.patches)
    assert fig._suptitle.get_text() == "cross-attention"
    fig = plot_attention_heads([weights[0], weights[1]], list("abcd"), list("xyz"),
                               titles=["layer 0", "layer 1"], vmax=1.0)
    assert [ax.get_title() for ax in fig.axes[:2]] == ["layer 0", "layer 1"]
    assert fig.axes[0].collections[0].get_clim() == (0.0, 1.0)


def test_attention_heads_refuse_maps_that_do_not_match():
    from course_lib.viz import plot_attention_heads

    with pytest.raises(ValueError, match="one shape"):
        plot_attention_heads([torch.rand(3, 4), torch.rand(2, 4)], list("abcd"), list("xyz"))
    with pytest.raises(ValueError, match="2 titles for 3 maps"):
        plot_attention_heads(torch.rand(3, 3, 4), list("abcd"), list("xyz"), titles=["a", "b"])


def test_curves_by_step_one_line_per_history():
    from course_lib.viz_training import plot_curves_by_step

    none = History([{"epoch": e, "steps": 10 * e, "train_loss": 4.0 / e, "lr": 0.1}
                    for e in (1, 2, 3)])
    attention = History([{"epoch": e, "steps": 10 * e, "train_loss": 2.0 / e, "lr": 0.1}
                         for e in (1, 2)])
    ax = plot_curves_by_step({"none": none, "bahdanau": attention}, log=True,
                             ylabel="training loss", title="same steps")
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines) == ["none", "bahdanau"]
    np.testing.assert_allclose(lines["none"].get_xdata(), [10, 20, 30])
    np.testing.assert_allclose(lines["bahdanau"].get_ydata(), [2.0, 1.0])
    assert ax.get_yscale() == "log" and ax.get_xlabel() == "optimiser steps"
    assert ax.get_ylabel() == "training loss" and ax.get_title() == "same steps"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["none", "bahdanau"]

    single = plot_curves_by_step(none, "lr")  # one history: one line, no legend
    assert len(single.get_lines()) == 1 and single.get_legend() is None
    assert single.get_ylabel() == "lr" and single.get_yscale() == "linear"
    with pytest.raises(KeyError, match="bleu"):
        plot_curves_by_step(none, "bleu")


def test_grouped_bars_put_the_series_side_by_side():
    from matplotlib.container import BarContainer

    from course_lib.viz import plot_grouped_bars

    ax = plot_grouped_bars({"before": torch.tensor([1.0, 2.0, 3.0]), "after": [0.5, 0.0, 4.0]},
                           labels=["a", "b", "c"], errors={"after": [0.1, 0.1, 0.2]},
                           xlabel="item", ylabel="height", title="change")
    before, after = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert [b.get_height() for b in before] == [1.0, 2.0, 3.0]
    assert [b.get_height() for b in after] == [0.5, 0.0, 4.0]
    np.testing.assert_allclose([b.get_x() + b.get_width() / 2 for b in before], [-0.2, 0.8, 1.8])
    np.testing.assert_allclose([b.get_x() + b.get_width() / 2 for b in after], [0.2, 1.2, 2.2])
    np.testing.assert_allclose([b.get_width() for b in after], [0.4] * 3)
    assert before.errorbar is None and after.errorbar is not None
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["before", "after"]
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("item", "height", "change")

    three = plot_grouped_bars({"x": [1, 2], "y": [3, 4], "z": [5, 6]})
    centres = [[b.get_x() + b.get_width() / 2 for b in c] for c in three.containers
               if isinstance(c, BarContainer)]
    np.testing.assert_allclose(centres, [[-0.8 / 3, 1 - 0.8 / 3], [0, 1], [0.8 / 3, 1 + 0.8 / 3]])
    assert [t.get_text() for t in three.get_xticklabels()] == ["0", "1"]
    with pytest.raises(ValueError, match="same number of bars"):
        plot_grouped_bars({"x": [1, 2], "y": [1]})
    with pytest.raises(KeyError, match="not among the series"):
        plot_grouped_bars({"x": [1, 2]}, errors={"y": [0, 0]})
