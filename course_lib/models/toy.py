"""A toy task and model for lesson 00's set-up check and for testing the training loop.

Two interleaved spirals in the plane, one per class: a small MLP separates them only if training
really works on this machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from course_lib.seeding import make_generator


def make_spirals(
    n_per_class: int, noise: float = 0.05, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Points of two spirals, ``x = r (cos θ, sin θ) + ε`` with θ offset by π for class 1.

    Shapes: returns ``points`` (2N, 2) float32 and ``labels`` (2N,) int64, on the CPU.
    """
    if n_per_class < 1:
        raise ValueError(f"n_per_class must be at least 1, got {n_per_class}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    generator = make_generator(seed)
    radius = torch.linspace(0.15, 1.0, n_per_class)
    angle = radius * 3 * math.pi  # one and a half turns
    points, labels = [], []
    for label in (0, 1):
        theta = angle + label * math.pi
        xy = torch.stack([radius * torch.cos(theta), radius * torch.sin(theta)], dim=1)  # (N, 2)
        points.append(xy + noise * torch.randn(xy.shape, generator=generator))
        labels.append(torch.full((n_per_class,), label, dtype=torch.long))
    return torch.cat(points), torch.cat(labels)


@dataclass
class ToyConfig:
    in_features: int = 2
    hidden: int = 64
    layers: int = 2
    classes: int = 2


class ToyClassifier(nn.Module):
    """An MLP, ``logits = W_L relu(... relu(W_1 x + b_1) ...) + b_L``.

    Shapes: ``x`` (B, in_features) -> logits (B, classes).
    """

    config_class = ToyConfig

    def __init__(self, config: ToyConfig) -> None:
        super().__init__()
        self.config = config
        sizes = [config.in_features] + [config.hidden] * config.layers
        blocks: list[nn.Module] = []
        for width_in, width_out in zip(sizes[:-1], sizes[1:], strict=True):
            blocks += [nn.Linear(width_in, width_out), nn.ReLU()]
        blocks.append(nn.Linear(sizes[-1], config.classes))
        self.net = nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.shape[-1] != self.config.in_features:
            raise ValueError(
                f"expected inputs of shape (B, {self.config.in_features}), got {tuple(x.shape)}"
            )
        return self.net(x)


def grid_points(extent: float = 1.3, steps: int = 60) -> torch.Tensor:
    """A square grid over [-extent, extent]², row by row. Shapes: returns (steps², 2)."""
    axis = torch.linspace(-extent, extent, steps)
    yy, xx = torch.meshgrid(axis, axis, indexing="ij")  # (steps, steps) each
    return torch.stack([xx.reshape(-1), yy.reshape(-1)], dim=1)  # (steps*steps, 2)


class BoundaryRecorder:
    """A training callback that records P(class 1) on :func:`grid_points` after every epoch.

    ``frames[e]`` is a (steps, steps) array for epoch ``e + 1``, ready for
    :func:`course_lib.viz_images.plot_decision_boundary`.
    """

    def __init__(self, extent: float = 1.3, steps: int = 60) -> None:
        self.extent, self.steps = extent, steps
        self.grid = grid_points(extent, steps)
        self.frames: list = []

    def on_epoch_end(self, epoch: int, record: dict, model: nn.Module) -> None:
        device = next(model.parameters()).device
        with torch.no_grad():
            probs = model(self.grid.to(device)).softmax(dim=-1)[:, 1]  # (steps*steps,)
        self.frames.append(probs.reshape(self.steps, self.steps).cpu().numpy())  # (steps, steps)
