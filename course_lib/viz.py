"""Pictures the lessons share: attention heat maps, attention over images and training curves."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch


def _as_matrix(weights: Any) -> np.ndarray:
    if isinstance(weights, torch.Tensor):
        weights = weights.detach().float().cpu().numpy()
    matrix = np.asarray(weights, dtype=float)
    if matrix.ndim != 2:
        raise ValueError(
            f"attention weights must be 2-D (target length, source length), got shape "
            f"{tuple(matrix.shape)}; pick one example and one head first, e.g. weights[0]"
        )
    if not np.isfinite(matrix).all():
        raise ValueError("attention weights contain NaN or inf")
    return matrix


def plot_attention(
    weights: Any,
    source_tokens: Sequence[str],
    target_tokens: Sequence[str],
    *,
    ax: plt.Axes | None = None,
    gold: Iterable[tuple[int, int]] = (),
    title: str | None = None,
    annotate: bool = False,
    cmap: str = "rocket_r",
) -> plt.Axes:
    """Heat map of attention ``weights`` of shape (T, S): row t is output token
    ``target_tokens[t]``, column s is input token ``source_tokens[s]``; cell (t, s) is a_ts.

    ``gold`` takes (t, s) pairs (e.g. gold word alignments) drawn as boxes on top.
    """
    matrix = _as_matrix(weights)
    expected = (len(target_tokens), len(source_tokens))
    if matrix.shape != expected:
        raise ValueError(
            f"weights have shape {matrix.shape} but the labels need (len(target_tokens), "
            f"len(source_tokens)) = {expected}"
        )
    if ax is None:
        height, width = expected
        _, ax = plt.subplots(figsize=(min(2 + 0.45 * width, 16), min(1.5 + 0.4 * height, 14)))
    sns.heatmap(
        matrix,
        ax=ax,
        cmap=cmap,
        vmin=0.0,
        vmax=max(1e-9, float(matrix.max())),
        xticklabels=list(source_tokens),
        yticklabels=list(target_tokens),
        annot=annotate,
        fmt=".2f",
        square=True,
        cbar_kws={"label": "attention weight", "shrink": 0.8},
    )
    for t, s in gold:
        if not (0 <= t < expected[0] and 0 <= s < expected[1]):
            raise ValueError(f"gold pair {(t, s)} lies outside the {expected} weight matrix")
        ax.add_patch(plt.Rectangle((s, t), 1, 1, fill=False, edgecolor="deepskyblue", lw=2))
    ax.set_xlabel("source (keys)")
    ax.set_ylabel("output (queries)")
    ax.tick_params(axis="x", labelrotation=90)
    ax.tick_params(axis="y", labelrotation=0)
    if title:
        ax.set_title(title)
    return ax


def _records(history: Any) -> list[dict[str, float]]:
    records = getattr(history, "records", history)
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise TypeError("history must be a training History or a list of per-epoch dicts")
    return records


CURVE_SKIP = {"epoch", "time_s", "train_s", "lr", "grad_norm"}


def plot_history(
    history: Any, keys: Sequence[str] | None = None, *, axes: Sequence[plt.Axes] | None = None
) -> list[plt.Axes]:
    """Training curves per epoch: losses on the left panel, every other metric on the right.

    ``history`` is a :class:`course_lib.training.History` or a list of per-epoch dicts.
    """
    records = _records(history)
    available = [k for k in (records[0] if records else {}) if k not in CURVE_SKIP]
    keys = list(keys) if keys is not None else available
    unknown = [k for k in keys if records and k not in records[0]]
    if unknown:
        raise KeyError(f"no {unknown} in the history; it has {sorted(records[0])}")
    losses = [k for k in keys if "loss" in k]
    others = [k for k in keys if "loss" not in k]
    panels = [group for group in (losses, others) if group]
    if axes is None:
        _, axes = plt.subplots(1, max(len(panels), 1), figsize=(5 * max(len(panels), 1), 3.2),
                               squeeze=False)
        axes = list(axes[0])
    epochs = [r["epoch"] for r in records]
    for ax, group in zip(axes, panels, strict=False):
        for key in group:
            ax.plot(epochs, [r[key] for r in records], marker="o", ms=3, label=key)
        ax.set_xlabel("epoch")
        ax.set_ylabel("loss" if group is losses else "metric")
        ax.legend()
        ax.grid(alpha=0.3)
    return list(axes)


class LivePlot:
    """A training callback that redraws :func:`plot_history` in place after every epoch."""

    def __init__(self, keys: Sequence[str] | None = None) -> None:
        self.keys = keys
        self.records: list[dict[str, float]] = []
        self.handle = None

    def on_epoch_end(self, epoch: int, record: dict[str, float], model: Any) -> None:
        from IPython.display import display

        self.records.append(dict(record))
        plot_history(self.records, self.keys)
        figure = plt.gcf()
        if self.handle is None:
            self.handle = display(figure, display_id=True)
        else:
            self.handle.update(figure)
        plt.close(figure)


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


def plot_bleu_by_length(scores: dict[str, dict[str, float | None]], *,
                        ax: plt.Axes | None = None, title: str | None = None) -> plt.Axes:
    """BLEU per source-length bucket, one line per model: ``{"none": {"1-10": 91.0, ...}}``."""
    if not scores:
        raise ValueError("no scores to plot")
    buckets = list(next(iter(scores.values())))
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.5))
    for name, by_length in scores.items():
        if list(by_length) != buckets:
            raise ValueError(f"{name} has buckets {list(by_length)}, expected {buckets}")
        values = [np.nan if by_length[b] is None else by_length[b] for b in buckets]
        ax.plot(buckets, values, marker="o", label=name)
    ax.set_xlabel("source length (words)")
    ax.set_ylabel("BLEU")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(title="model")
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


def attention_on_image(image: Any, weights: Any, grid: tuple[int, int], *,
                       ax: plt.Axes | None = None, box: Sequence[int] | None = None,
                       title: str | None = None, alpha: float = 0.6) -> plt.Axes:
    """One step's attention over locations drawn on the image.

    ``weights`` (L,) with L = grid[0] · grid[1] is reshaped to the (H', W') grid, stretched over
    the (H, W) image (each cell covers H/H' × W/W' pixels) and overlaid; the peak cell is
    outlined, and ``box`` (x0, y0, x1, y1), e.g. the named object's, is drawn in blue.
    """
    picture, cmap = _image_array(image)
    flat = weights.detach().float().cpu().numpy() if isinstance(weights, torch.Tensor) \
        else np.asarray(weights, dtype=float)
    rows, cols = grid
    if flat.shape != (rows * cols,):
        raise ValueError(f"expected weights of shape ({rows * cols},) for a {rows}x{cols} grid, "
                         f"got {tuple(flat.shape)}")
    height, width = picture.shape[:2]
    if ax is None:
        _, ax = plt.subplots(figsize=(max(2.0, 3.0 * width / height), 3.0))
    ax.imshow(picture, cmap=cmap, vmin=0, vmax=1, extent=(0, width, height, 0))
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
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title)
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
