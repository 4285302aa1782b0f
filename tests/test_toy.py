"""Lesson 00's toy problem: the spirals data, the classifier's input checks, and the recorder of
decision boundaries."""

import pytest
import torch

from course_lib.models.toy import (
    BoundaryRecorder,
    ToyClassifier,
    ToyConfig,
    grid_points,
    make_spirals,
)


def test_spirals_shapes_labels_and_determinism():
    x, y = make_spirals(30, seed=1)
    assert x.shape == (60, 2) and x.dtype == torch.float32 and x.device.type == "cpu"
    assert y.tolist() == [0] * 30 + [1] * 30
    x2, _ = make_spirals(30, seed=1)
    x3, _ = make_spirals(30, seed=2)
    assert torch.equal(x, x2) and not torch.equal(x, x3)


def test_spirals_without_noise_are_point_symmetric():
    # Class 1 is class 0 turned by pi: (x, y) -> (-x, -y).
    x, _ = make_spirals(20, noise=0.0)
    torch.testing.assert_close(x[20:], -x[:20])


@pytest.mark.parametrize("kwargs", [{"n_per_class": 0}, {"n_per_class": 5, "noise": -1.0}])
def test_bad_spiral_settings(kwargs):
    with pytest.raises(ValueError):
        make_spirals(**kwargs)


def test_classifier_rejects_wrong_input_shape():
    with pytest.raises(ValueError, match=r"\(B, 2\).*\(4, 3\)"):
        ToyClassifier(ToyConfig())(torch.zeros(4, 3))


def test_grid_and_recorder():
    grid = grid_points(1.0, 5)
    assert grid.shape == (25, 2)
    assert grid[0].tolist() == [-1.0, -1.0] and grid[4].tolist() == [1.0, -1.0]
    recorder = BoundaryRecorder(extent=1.0, steps=5)
    recorder.on_epoch_end(1, {}, ToyClassifier(ToyConfig()))
    frame = recorder.frames[0]
    assert frame.shape == (5, 5) and ((frame >= 0) & (frame <= 1)).all()
