"""One training loop for every model in the course.

The loop knows nothing about the model: it is given a ``loss_fn(model, batch) -> loss`` that
computes the mean loss of one batch, so a classifier, a seq2seq model with teacher forcing and a
captioner all train through the same code::

    history = fit(model, optimizer, train_batches, loss_fn, epochs=10, val_batches=val_batches,
                  metrics={"accuracy": lambda m: accuracy_of(m, val_set)},
                  clip_grad_norm=1.0, early_stopping=EarlyStopping("val_loss", patience=3))

Per epoch the history records ``train_loss`` (the batch-size-weighted mean of the batch losses),
``val_loss`` (same, on ``val_batches``), every metric, ``grad_norm`` (mean norm before clipping),
``lr``, ``steps`` (optimiser steps so far), ``time_s`` (the epoch's wall time, evaluation
included) and ``train_s`` (training time so far: the seconds spent in training steps, evaluation
excluded).

A run's length is counted in optimiser steps (``max_steps``) or epochs, never in seconds, so the
same seed gives the same model on a fast machine, a slow one and a busy one. ``max_time_s`` is
only a safety valve that a learner sets on purpose; a run it cuts short says so
(``history.stopped_by_time``).

``fit`` is the one-call form of :class:`~course_lib.train.trainer.Trainer`: it gathers its
keywords into a :class:`~course_lib.train.trainer.TrainOptions`, builds the trainer and runs
it; the trainer is where to read how a step, an epoch and a resumed run go.

The same loop runs unchanged on every process of a ``torchrun`` job with a
``DistributedDataParallel`` model; see :func:`fit` and :mod:`course_lib.train.ddp`.
Learning-rate schedules are :mod:`course_lib.train.schedules`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from course_lib.train.history import EarlyStopping, History
from course_lib.train.resume import SAVE_EVERY
from course_lib.train.trainer import Callback, LossFn, Metric, Trainer, TrainOptions


def supervised_loss(criterion: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> LossFn:
    """``loss_fn`` for batches ``(inputs, targets)``: ``criterion(model(inputs), targets)``."""

    def loss_fn(model: nn.Module, batch: Sequence[torch.Tensor]) -> torch.Tensor:
        inputs, targets = batch
        return criterion(model(inputs), targets)

    return loss_fn


def fit(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    train_batches: Iterable[Any],
    loss_fn: LossFn,
    *,
    epochs: int | None = None,
    max_steps: int | None = None,
    val_batches: Iterable[Any] | None = None,
    metrics: Mapping[str, Metric] | None = None,
    device: torch.device | str | None = None,
    clip_grad_norm: float | None = None,
    amp_dtype: torch.dtype | None = None,
    scheduler: Any | None = None,
    early_stopping: EarlyStopping | None = None,
    callbacks: Sequence[Callback] = (),
    live_plot: bool | None = None,
    progress: bool = True,
    max_time_s: float | None = None,
    resume_path: str | Path | None = None,
    save_every: int = SAVE_EVERY,
) -> History:
    """Train ``model`` for ``max_steps`` optimiser steps or ``epochs`` epochs (whichever ends
    first when both are given) and return its :class:`History`.

    Each step: ``loss = loss_fn(model, batch)``; backward; gradients clipped to total norm
    ``clip_grad_norm`` if given (``g <- g * min(1, c / ||g||)``); ``optimizer.step()``.
    ``scheduler.step()`` runs after every optimiser step. ``amp_dtype`` (``torch.bfloat16`` or
    ``torch.float16``) turns on ``torch.autocast``, with gradient scaling for float16.
    ``metrics`` maps names to ``metric(model) -> float``, evaluated after each epoch in eval mode
    without gradients. ``live_plot`` draws the curves as they grow (default: in notebooks only).

    ``max_steps`` ends training after that many optimiser steps; the epoch it ends in is the
    last, and is recorded as usual. Without ``epochs`` it trains ⌈max_steps / len(batches)⌉
    epochs at most. The progress bar then counts steps and estimates the time left from them.
    ``max_time_s`` is a safety valve, not a budget: only time in training steps counts; if it
    runs out first, training stops after the current batch and ``history.stopped_by_time`` is
    set. Under ``torchrun`` the loop is the same on every rank (:mod:`course_lib.train.ddp`).

    With ``resume_path``, a resumable state is saved there every ``save_every`` steps and on
    Ctrl-C, and a later call with the same path goes on from it to the same final weights
    (:mod:`course_lib.train.resume`). Ctrl-C raises :class:`TrainingInterrupted`, whose one-line
    message says what was saved.
    """
    options = TrainOptions(
        epochs=epochs, max_steps=max_steps, device=device, clip_grad_norm=clip_grad_norm,
        amp_dtype=amp_dtype, early_stopping=early_stopping, live_plot=live_plot,
        progress=progress, max_time_s=max_time_s, resume_path=resume_path,
        save_every=save_every)
    trainer = Trainer(model, optimizer, train_batches, loss_fn, options,
                      val_batches=val_batches, metrics=metrics, scheduler=scheduler,
                      callbacks=callbacks)
    return trainer.run()
