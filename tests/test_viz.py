import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from course_lib.training import History  # noqa: E402
from course_lib.viz import LivePlot, plot_attention, plot_history  # noqa: E402


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


def test_decision_boundary_draws_grid_and_points():
    from course_lib.viz import plot_decision_boundary

    probs = np.linspace(0, 1, 16).reshape(4, 4)
    ax = plot_decision_boundary(probs, 1.0, torch.zeros(3, 2), torch.tensor([0, 1, 1]))
    np.testing.assert_allclose(ax.images[0].get_array(), probs)
    assert len(ax.collections[0].get_offsets()) == 3
    with pytest.raises(ValueError, match=r"\(N, 2\)"):
        plot_decision_boundary(probs, 1.0, torch.zeros(3, 3), torch.zeros(3))
    with pytest.raises(ValueError, match="square"):
        plot_decision_boundary(np.zeros((2, 3)), 1.0, torch.zeros(3, 2), torch.zeros(3))


def test_bleu_by_length_plot_one_line_per_model():
    from course_lib.viz import plot_bleu_by_length

    ax = plot_bleu_by_length({"none": {"1-10": 90.0, "11-20": 50.0, "31+": None},
                              "bahdanau": {"1-10": 95.0, "11-20": 94.0, "31+": 93.0}})
    lines = {line.get_label(): line.get_ydata() for line in ax.get_lines()}
    np.testing.assert_allclose(lines["bahdanau"], [95.0, 94.0, 93.0])
    assert np.isnan(lines["none"][2])
    with pytest.raises(ValueError, match="buckets"):
        plot_bleu_by_length({"a": {"1-10": 1.0}, "b": {"11-20": 2.0}})
