"""Pictures the lessons share: attention heat maps (one or a grid of heads), training curves,
grouped bar charts, and :func:`show_source`, which shows the code of a course function in a
notebook. Pictures drawn on images are :mod:`course_lib.viz_images`."""

from __future__ import annotations

import functools
import inspect
import math
import textwrap
from collections.abc import Iterable, Mapping, Sequence
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
    vmax: float | None = None,
    colorbar: bool = True,
) -> plt.Axes:
    """Heat map of attention ``weights`` of shape (T, S): row t is output token
    ``target_tokens[t]``, column j is input token ``source_tokens[j]``; cell (t, j) is a_tj
    (both counting from 0).

    ``gold`` takes (t, j) pairs (e.g. gold word alignments) drawn as boxes on top. The colours
    run from 0 to ``vmax`` (default: the largest weight); ``colorbar=False`` leaves out the
    colour bar (as :func:`plot_attention_heads` does, which draws one for all its panels).
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
        vmax=max(1e-9, float(matrix.max()) if vmax is None else vmax),
        xticklabels=list(source_tokens),
        yticklabels=list(target_tokens),
        annot=annotate,
        fmt=".2f",
        square=True,
        cbar=colorbar,
        cbar_kws={"label": "attention weight", "shrink": 0.8} if colorbar else None,
    )
    for t, j in gold:
        if not (0 <= t < expected[0] and 0 <= j < expected[1]):
            raise ValueError(f"gold pair {(t, j)} lies outside the {expected} weight matrix")
        ax.add_patch(plt.Rectangle((j, t), 1, 1, fill=False, edgecolor="deepskyblue", lw=2))
    ax.set_xlabel("source (keys)")
    ax.set_ylabel("output (queries)")
    ax.tick_params(axis="x", labelrotation=90)
    ax.tick_params(axis="y", labelrotation=0)
    if title:
        ax.set_title(title)
    return ax


def plot_attention_heads(
    weights: Any,
    source_tokens: Sequence[str],
    target_tokens: Sequence[str],
    *,
    titles: Sequence[str] | None = None,
    columns: int = 4,
    gold: Iterable[tuple[int, int]] = (),
    vmax: float | None = None,
    panel_size: tuple[float, float] = (3.0, 3.0),
    tick_size: float | None = None,
    xlabel: str = "keys",
    ylabel: str = "queries",
    title: str | None = None,
) -> plt.Figure:
    """Several attention maps side by side on one colour scale, e.g. every head of a layer.

    ``weights`` is a sequence of (T, S) maps, or an (n, T, S) tensor such as one example's
    heads ``maps[layer][b]``; every map has the same labels (as in :func:`plot_attention`).
    Panels fill a grid of ``columns`` columns, row by row, each titled by ``titles`` (default
    ``"head i"``); ``gold`` boxes are drawn on every panel; the colours run from 0 to ``vmax``
    (default: the largest weight of all maps), with one colour bar for the whole figure.
    """
    if isinstance(weights, torch.Tensor):
        weights = list(weights.unbind(0)) if weights.dim() == 3 else [weights]
    matrices = [_as_matrix(w) for w in weights]
    if not matrices:
        raise ValueError("no attention maps to plot")
    shapes = {m.shape for m in matrices}
    if len(shapes) > 1:
        raise ValueError(f"all maps must have one shape, got {sorted(shapes)}")
    titles = list(titles) if titles is not None else [f"head {i}" for i in range(len(matrices))]
    if len(titles) != len(matrices):
        raise ValueError(f"{len(titles)} titles for {len(matrices)} maps")
    if vmax is None:
        vmax = max(float(m.max()) for m in matrices)
    gold = list(gold)
    columns = max(1, min(columns, len(matrices)))
    rows = math.ceil(len(matrices) / columns)
    fig, axes = plt.subplots(rows, columns, squeeze=False, layout="constrained",
                             figsize=(panel_size[0] * columns + 1.0, panel_size[1] * rows))
    for index, ax in enumerate(axes.flat):
        if index >= len(matrices):
            ax.axis("off")
            continue
        plot_attention(matrices[index], source_tokens, target_tokens, ax=ax, gold=gold,
                       title=titles[index], vmax=vmax, colorbar=False)
        ax.set_xlabel("")
        ax.set_ylabel("")
        if tick_size is not None:
            ax.tick_params(labelsize=tick_size)
    fig.colorbar(axes.flat[0].collections[0], ax=axes, shrink=0.6, label="attention weight")
    fig.supxlabel(xlabel)
    fig.supylabel(ylabel)
    if title:
        fig.suptitle(title)
    return fig


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


def _as_vector(values: Any) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.detach().float().cpu().numpy()
    vector = np.asarray(values, dtype=float)
    if vector.ndim != 1:
        raise ValueError(f"bar heights must be 1-D, got shape {tuple(vector.shape)}")
    return vector


def plot_grouped_bars(
    series: Mapping[str, Any],
    *,
    labels: Sequence[str] | None = None,
    errors: Mapping[str, Any] | None = None,
    ax: plt.Axes | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    title: str | None = None,
    width: float = 0.8,
) -> plt.Axes:
    """Bar charts of several series side by side, e.g. before/after or exact/estimated.

    ``series`` maps each legend label to its heights, one per position 0 ... n-1 (lists,
    arrays or tensors of one length n); the bars of position i share a slot of ``width``
    around x = i. ``labels`` names the positions on the x axis (default: their numbers);
    ``errors`` maps some series to their error bars (the same length as the heights).
    """
    heights = {name: _as_vector(values) for name, values in series.items()}
    if not heights:
        raise ValueError("no series to plot")
    lengths = {name: len(values) for name, values in heights.items()}
    n = next(iter(lengths.values()))
    if set(lengths.values()) != {n}:
        raise ValueError(f"every series needs the same number of bars, got {lengths}")
    if labels is not None and len(labels) != n:
        raise ValueError(f"{len(labels)} labels for {n} bars")
    errors = dict(errors or {})
    unknown = set(errors) - set(heights)
    if unknown:
        raise KeyError(f"errors for {sorted(unknown)}, which are not among the series")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 2.8))
    positions = np.arange(n)
    bar_width = width / len(heights)
    for k, (name, values) in enumerate(heights.items()):
        offset = (k - (len(heights) - 1) / 2) * bar_width
        error = errors.get(name)
        ax.bar(positions + offset, values, width=bar_width, label=name,
               yerr=None if error is None else _as_vector(error),
               capsize=3 if error is not None else 0)
    ax.set_xticks(positions, list(labels) if labels is not None else [str(i) for i in positions])
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend()
    return ax


@functools.cache
def _shown_code_type() -> type:
    """IPython's Code, displayed once: :func:`show_source` displays it as it is made, so a cell
    ending in ``show_source(...)`` does not show it a second time as the cell's result."""
    from IPython.display import Code, display

    class ShownCode(Code):
        shown = False

        def _ipython_display_(self) -> None:
            if not self.shown:
                self.shown = True
                display(Code(data=self.data, language=self.language))

    return ShownCode


def show_source(*objects: Any, language: str = "python") -> Any:
    """Show the source code of functions, classes or methods in a notebook, highlighted.

    The sources (``inspect.getsource``, each dedented) are joined with a blank line between
    them into one ``IPython.display.Code`` block, which is displayed at once (anywhere in a
    cell, like ``print``) and returned; the returned block is not displayed a second time as
    the cell's result. ``show_source(BahdanauDecoder.step, LuongDecoder.step)``.
    """
    from IPython.display import display

    if not objects:
        raise TypeError("show_source needs at least one function, class or method")
    text = "\n".join(textwrap.dedent(inspect.getsource(obj)) for obj in objects)
    code = _shown_code_type()(data=text, language=language)
    display(code)
    return code
