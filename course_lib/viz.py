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


def _records(history: Any) -> list[dict[str, float]]:
    records = getattr(history, "records", history)
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise TypeError("history must be a training History or a list of per-epoch dicts")
    return records


# columns of a training history that count or set something rather than measure the model
CURVE_SKIP = {"epoch", "steps", "time_s", "train_s", "lr", "grad_norm"}
FRACTIONS = ("accuracy", "exact_match", "localization")  # metrics measured from 0 to 1
FRACTION = "fraction (0 to 1)"


def curve_unit(key: str) -> str:
    """The unit of a history column: ``"loss"``, :data:`FRACTION` for an accuracy-like metric,
    else the column's own name (a quantity of its own). Curves share an axis only when they
    share a unit."""
    if "loss" in key:
        return "loss"
    if any(word in key for word in FRACTIONS):
        return FRACTION
    return key


def plot_history(
    history: Any, keys: Sequence[str] | None = None, *, axes: Sequence[plt.Axes] | None = None
) -> list[plt.Axes]:
    """Training curves per epoch, one panel per unit (:func:`curve_unit`): the losses on the
    first, accuracy-like metrics (0 to 1) on the next, any other metric on one of its own.
    Counters and settings (the step count, the learning rate, the time) are not drawn unless
    ``keys`` names them.

    ``history`` is a :class:`course_lib.train.loop.History` or a list of per-epoch dicts.
    """
    records = _records(history)
    available = [k for k in (records[0] if records else {}) if k not in CURVE_SKIP]
    keys = list(keys) if keys is not None else available
    unknown = [k for k in keys if records and k not in records[0]]
    if unknown:
        raise KeyError(f"no {unknown} in the history; it has {sorted(records[0])}")
    panels: dict[str, list[str]] = {}
    for key in keys:
        panels.setdefault(curve_unit(key), []).append(key)
    if axes is None:
        count = max(len(panels), 1)
        _, axes = plt.subplots(1, count, figsize=(4.5 * count, 3.2), squeeze=False,
                               layout="constrained")
        axes = list(axes[0])
    epochs = [r["epoch"] for r in records]
    for ax, (unit, group) in zip(axes, panels.items(), strict=False):
        for key in group:
            ax.plot(epochs, [r[key] for r in records], marker="o", ms=3, label=key)
        ax.set_xlabel("epoch")
        ax.set_ylabel(unit)
        if unit == FRACTION:
            ax.set_ylim(0, 1.02)
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


def _is_single_history(history: Any) -> bool:
    """A History, a DataFrame or a dict of columns, rather than a dict of named histories."""
    if not isinstance(history, Mapping):
        return True
    return any(isinstance(v, (list, tuple, np.ndarray)) for v in history.values())


def plot_curves_by_step(
    histories: Any,
    key: str = "train_loss",
    *,
    ax: plt.Axes | None = None,
    ylabel: str | None = None,
    title: str | None = None,
    log: bool = False,
) -> plt.Axes:
    """``key`` (a column of the history, e.g. the training loss) against optimiser steps.

    ``histories`` is one history (a :class:`course_lib.train.loop.History`, or anything where
    ``history["steps"]`` and ``history[key]`` give one value per epoch) or a dict of them by
    name, drawn one line each with a legend. ``log`` puts the y axis on a log scale.
    """
    named = {None: histories} if _is_single_history(histories) else dict(histories)
    if not named:
        raise ValueError("no histories to plot")
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.5))
    for name, history in named.items():
        steps, values = list(history["steps"]), list(history[key])
        if len(steps) != len(values):
            raise ValueError(f"{name or 'history'}: {len(steps)} step counts but "
                             f"{len(values)} values of {key!r}")
        ax.plot(steps, values, marker="o", ms=3, label=name)
    ax.set_xlabel("optimiser steps")
    ax.set_ylabel(ylabel if ylabel is not None else key.replace("_", " "))
    if log:
        ax.set_yscale("log")
    if None not in named:
        ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
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
