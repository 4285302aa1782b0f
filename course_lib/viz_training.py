"""Training curves: per epoch (:func:`plot_history`), per optimiser step
(:func:`plot_step_losses`, :func:`plot_curves_by_step`) and live while a model trains
(:class:`LivePlot`, the callback :func:`~course_lib.train.loop.fit` adds in notebooks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np


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


def _history_panels(records: list[dict], keys: Sequence[str] | None) -> dict[str, list[str]]:
    """The curves :func:`plot_history` draws, grouped by panel (one panel per unit)."""
    available = [k for k in (records[0] if records else {}) if k not in CURVE_SKIP]
    keys = list(keys) if keys is not None else available
    unknown = [k for k in keys if records and k not in records[0]]
    if unknown:
        raise KeyError(f"no {unknown} in the history; it has {sorted(records[0])}")
    panels: dict[str, list[str]] = {}
    for key in keys:
        panels.setdefault(curve_unit(key), []).append(key)
    return panels


def plot_history(
    history: Any, keys: Sequence[str] | None = None, *, axes: Sequence[plt.Axes] | None = None
) -> list[plt.Axes]:
    """Training curves per epoch, one panel per unit (:func:`curve_unit`): the losses on the
    first, accuracy-like metrics (0 to 1) on the next, any other metric on one of its own.
    Counters and settings (the step count, the learning rate, the time) are not drawn unless
    ``keys`` names them.

    ``history`` is a :class:`course_lib.train.history.History` or a list of per-epoch dicts.
    """
    records = _records(history)
    panels = _history_panels(records, keys)
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


def plot_step_losses(steps: Sequence[int], losses: Sequence[float], *, window: int = 20,
                     ax: plt.Axes | None = None) -> plt.Axes:
    """The training loss of every optimiser step (thin) and its running mean over ``window``
    steps (bold): the curve a run draws while it trains."""
    if len(steps) != len(losses):
        raise ValueError(f"{len(steps)} steps for {len(losses)} losses")
    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 3.2), layout="constrained")
    values = np.asarray(losses, dtype=float)
    ax.plot(steps, values, lw=0.6, alpha=0.4, label="loss of each step")
    if len(values) >= window:
        mean = np.convolve(values, np.ones(window) / window, mode="valid")  # (n - window + 1,)
        ax.plot(steps[window - 1:], mean, lw=1.8, label=f"mean of {window} steps")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("training loss")
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


class LivePlot:
    """A training callback that draws the curves as they grow: the loss of every optimiser step
    (:func:`plot_step_losses`, redrawn every ``every`` steps) beside the per-epoch curves of
    :func:`plot_history` (redrawn after every epoch), in place in the notebook."""

    def __init__(self, keys: Sequence[str] | None = None, every: int = 25) -> None:
        self.keys, self.every = keys, every
        self.records: list[dict[str, float]] = []
        self.steps: list[int] = []
        self.losses: list[float] = []
        self.handle = None

    def on_resume(self, history: Any) -> None:
        """A resumed run draws the epochs recorded before the interrupt too."""
        self.records = [dict(record) for record in history.records]

    def on_step_end(self, step: int, loss: float) -> None:
        self.steps.append(step)
        self.losses.append(loss)
        if step % self.every == 0:
            self.draw()

    def on_epoch_end(self, epoch: int, record: dict[str, float], model: Any) -> None:
        self.records.append(dict(record))
        self.draw()

    def draw(self) -> None:
        from IPython.display import display

        panels = len(_history_panels(self.records, self.keys)) if self.records else 0
        count = panels + (1 if self.steps else 0)
        figure, axes = plt.subplots(1, max(count, 1), figsize=(4.5 * max(count, 1), 3.2),
                                    squeeze=False, layout="constrained")
        axes = list(axes[0])
        if self.steps:
            plot_step_losses(self.steps, self.losses, ax=axes.pop(0))
        if self.records:
            plot_history(self.records, self.keys, axes=axes)
        if self.handle is None:
            self.handle = display(figure, display_id=True)
        else:
            self.handle.update(figure)
        plt.close(figure)


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
