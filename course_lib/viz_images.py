"""Pictures drawn on images: attention maps over a picture's grid of locations (lesson 07)
and a classifier's decision regions in the plane (lesson 00)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import torch

from course_lib.viz import _as_matrix


def plot_decision_boundary(
    probabilities: np.ndarray, extent: float, points: Any, labels: Any, *,
    ax: plt.Axes | None = None, title: str | None = None,
) -> plt.Axes:
    """P(class 1) over the square [-extent, extent]² as colour, with the labelled points on top."""
    probabilities = np.asarray(probabilities)
    if probabilities.ndim != 2 or probabilities.shape[0] != probabilities.shape[1]:
        raise ValueError(f"probabilities must be a square (steps, steps) grid, got "
                         f"{probabilities.shape}")
    points = np.asarray(points.cpu() if isinstance(points, torch.Tensor) else points)
    labels = np.asarray(labels.cpu() if isinstance(labels, torch.Tensor) else labels)
    if points.ndim != 2 or points.shape[1] != 2 or labels.shape != points.shape[:1]:
        raise ValueError(f"expected points (N, 2) and labels (N,), got {points.shape} and "
                         f"{labels.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(4, 4))
    ax.imshow(probabilities, origin="lower", extent=(-extent, extent, -extent, extent),
              cmap="coolwarm", vmin=0, vmax=1, alpha=0.6)
    ax.scatter(points[:, 0], points[:, 1], c=labels, cmap="coolwarm", s=8, edgecolors="k",
               linewidths=0.2)
    ax.set_xlim(-extent, extent)
    ax.set_ylim(-extent, extent)
    ax.set_aspect("equal")
    if title:
        ax.set_title(title)
    return ax


def _image_array(image: Any) -> tuple[np.ndarray, str | None]:
    """(C, H, W) tensor or array in [0, 1] -> an (H, W) or (H, W, 3) array and its colour map."""
    if isinstance(image, torch.Tensor):
        image = image.detach().float().cpu().numpy()
    array = np.asarray(image, dtype=float)
    if array.ndim != 3 or array.shape[0] not in (1, 3):
        raise ValueError(f"expected an image of shape (1, H, W) or (3, H, W), got "
                         f"{tuple(array.shape)}")
    if array.shape[0] == 1:
        return array[0], "gray"
    return array.transpose(1, 2, 0).clip(0, 1), None  # (H, W, 3)


def show_image(image: Any, ax: plt.Axes | None = None, title: str | None = None) -> plt.Axes:
    """Draw a (1, H, W) grey or (3, H, W) colour image in [0, 1] with pixel (x, y) covering
    [x, x + 1) × [y, y + 1), so boxes and grid lines in pixel coordinates land where they
    belong; no ticks."""
    picture, cmap = _image_array(image)
    height, width = picture.shape[:2]
    if ax is None:
        _, ax = plt.subplots(figsize=(max(2.0, 3.0 * width / height), 3.0))
    ax.imshow(picture, cmap=cmap, vmin=0, vmax=1, extent=(0, width, height, 0))
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title)
    return ax


def attention_on_image(image: Any, weights: Any, grid: tuple[int, int], *,
                       ax: plt.Axes | None = None, box: Sequence[int] | None = None,
                       title: str | None = None, alpha: float = 0.6) -> plt.Axes:
    """One step's attention over locations drawn on the image.

    ``weights`` (L,) with L = grid[0] · grid[1] is reshaped to the (H', W') grid, stretched over
    the (H, W) image (each cell covers H/H' × W/W' pixels) and overlaid; the peak cell is
    outlined, and ``box`` (x0, y0, x1, y1), e.g. the named object's, is drawn in blue.
    """
    flat = weights.detach().float().cpu().numpy() if isinstance(weights, torch.Tensor) \
        else np.asarray(weights, dtype=float)
    rows, cols = grid
    if flat.shape != (rows * cols,):
        raise ValueError(f"expected weights of shape ({rows * cols},) for a {rows}x{cols} grid, "
                         f"got {tuple(flat.shape)}")
    ax = show_image(image, ax, title)
    height, width = np.shape(image)[-2:]  # (C, H, W), checked by show_image
    ax.imshow(flat.reshape(rows, cols), cmap="magma", alpha=alpha,  # (H', W')
              extent=(0, width, height, 0), interpolation="bilinear")
    row, col = divmod(int(flat.argmax()), cols)
    cell_h, cell_w = height / rows, width / cols
    ax.add_patch(plt.Rectangle((col * cell_w, row * cell_h), cell_w, cell_h, fill=False,
                               edgecolor="lime", lw=1.5))
    if box is not None:
        x0, y0, x1, y1 = box
        ax.add_patch(plt.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False,
                                   edgecolor="deepskyblue", lw=1.5))
    return ax


def plot_caption_attention(image: Any, words: Sequence[str], weights: Any,
                           grid: tuple[int, int], *, boxes: Sequence | None = None,
                           columns: int = 4) -> plt.Figure:
    """One panel per generated word: where the decoder looked while producing it.

    Shapes: ``weights`` (T', L) with at least one row per word; ``boxes`` one box or None per
    word (the object each word names), drawn in blue.
    """
    matrix = _as_matrix(weights)
    if matrix.shape[0] < len(words):
        raise ValueError(f"{len(words)} words but attention for only {matrix.shape[0]} steps")
    picture, _ = _image_array(image)
    rows = -(-len(words) // columns)
    aspect = picture.shape[1] / picture.shape[0]
    fig, axes = plt.subplots(rows, columns, squeeze=False,
                             figsize=(columns * min(2.2 * aspect, 5.5), rows * 2.4))
    for t, ax in enumerate(axes.flat):
        if t >= len(words):
            ax.axis("off")
            continue
        box = boxes[t] if boxes is not None and t < len(boxes) else None
        attention_on_image(image, matrix[t], grid, ax=ax, box=box, title=f"{t}: {words[t]}")
    fig.tight_layout()
    return fig
