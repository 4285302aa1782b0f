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

The same loop runs unchanged on every process of a ``torchrun`` job with a
``DistributedDataParallel`` model; see :func:`fit` and :mod:`course_lib.train.ddp`.
Learning-rate schedules are :mod:`course_lib.train.schedules`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from course_lib.device import get_device, to_device
from course_lib.train.ddp import any_rank, is_main_process, sum_over_ranks, world_size
from course_lib.train.history import BestWeights, EarlyStopping, History
from course_lib.train.progress import Progress, in_notebook
from course_lib.train.resume import SAVE_EVERY, Checkpointer, EpochSums, TrainingInterrupted

LossFn = Callable[[nn.Module, Any], torch.Tensor]
Metric = Callable[[nn.Module], float]


class Callback(Protocol):
    """What :func:`fit` calls after each epoch. A callback may also have ``on_step_end(step,
    loss)``, called after every optimiser step, and ``on_resume(history)``, called when a run
    goes on from a saved state with the epochs recorded before it."""

    def on_epoch_end(self, epoch: int, record: dict[str, float], model: nn.Module) -> None: ...


def supervised_loss(criterion: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> LossFn:
    """``loss_fn`` for batches ``(inputs, targets)``: ``criterion(model(inputs), targets)``."""

    def loss_fn(model: nn.Module, batch: Sequence[torch.Tensor]) -> torch.Tensor:
        inputs, targets = batch
        return criterion(model(inputs), targets)

    return loss_fn


def batch_size(batch: Any) -> int:
    """Rows in a batch: the first dimension of the first tensor found in it (1 if none)."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else 1
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        return batch_size([getattr(batch, f.name) for f in dataclasses.fields(batch)])
    values = batch.values() if isinstance(batch, Mapping) else batch
    if isinstance(values, (list, tuple)) or isinstance(batch, Mapping):
        for value in values:
            size = batch_size(value)
            if size:
                return size
        return 0
    return 0


def _check_loss(loss: Any, epoch: int, step: int) -> torch.Tensor:
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise ValueError(f"loss_fn must return a scalar tensor (shape ()), got {shape}")
    if not torch.isfinite(loss):
        raise FloatingPointError(
            f"the loss is {loss.item()} at epoch {epoch}, step {step}; lower the learning rate, "
            f"clip gradients (clip_grad_norm=1.0) or check the inputs for NaN/inf."
        )
    return loss


def _mean_loss(model, loss_fn, batches, device, amp_dtype, epoch) -> float:
    """The row-weighted mean of ``loss_fn`` over ``batches``, without gradients (over every
    rank's rows in a distributed run)."""
    total, rows = 0.0, 0
    with torch.no_grad():
        for step, batch in enumerate(batches):
            batch = to_device(batch, device)
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = _check_loss(loss_fn(model, batch), epoch, step)
            size = max(batch_size(batch), 1)
            total += loss.item() * size
            rows += size
    if world_size() > 1:
        total, rows = sum_over_ranks([total, rows], device)
    if rows == 0:
        raise ValueError("val_batches yielded no batches")
    return total / rows


def epochs_for(max_steps: int, train_batches: Any) -> int:
    """Epochs that ``max_steps`` optimiser steps start: ⌈max_steps / batches per epoch⌉."""
    if not hasattr(train_batches, "__len__") or len(train_batches) == 0:
        raise ValueError("max_steps without epochs needs train_batches with a length > 0")
    return math.ceil(max_steps / len(train_batches))


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
    epochs = _check_budget(epochs, max_steps, train_batches)
    _check_options(clip_grad_norm, max_time_s, amp_dtype)
    device = torch.device(device) if device is not None else get_device()
    model.to(device)
    callbacks = list(callbacks)
    if live_plot if live_plot is not None else in_notebook():
        from course_lib.viz_training import LivePlot

        callbacks.append(LivePlot())
    bars = Progress(progress and is_main_process(), epochs, max_steps)
    stepper = _Stepper(model, optimizer, loss_fn, device, clip_grad_norm, amp_dtype, scheduler,
                       max_steps, max_time_s, bars)
    stepper.step_callbacks = [c for c in callbacks if callable(getattr(c, "on_step_end", None))]
    history = History()
    best = BestWeights(early_stopping)
    if resume_path is not None and world_size() > 1:
        raise ValueError("resume_path is for a run in one process; under torchrun every rank "
                         "would write the same file")
    saver = None if resume_path is None else Checkpointer(
        Path(resume_path), save_every, {"epochs": epochs, "max_steps": max_steps}, device)
    first_epoch = _resume(saver, stepper, train_batches, history, best, callbacks)
    try:
        _epochs(first_epoch, epochs, stepper, saver, train_batches, history, best, callbacks,
                val_batches, metrics, loss_fn, amp_dtype)
    except KeyboardInterrupt:
        bars.close()
        raise stepper.interrupted(saver) from None
    bars.close()
    if saver is not None:
        saver.finished()
    best.restore(model)
    model.eval()
    return history


def _resume(saver, stepper, train_batches, history, best, callbacks) -> int:
    """Load a saved state into the run if there is one; the epoch to start from."""
    state = None if saver is None else saver.load()
    if state is None:
        return 1
    stepper.resume_sums = saver.restore(state, stepper, train_batches)
    history.records = list(saver.history_at_epoch_start)
    best.restore_snapshot(saver.best_at_epoch_start, history)
    for callback in callbacks:
        if callable(getattr(callback, "on_resume", None)):
            callback.on_resume(history)
    print(f"resuming from step {stepper.steps}, saved in {saver.path}")
    return saver.epoch


def _epochs(first_epoch, epochs, stepper, saver, train_batches, history, best, callbacks,
            val_batches, metrics, loss_fn, amp_dtype) -> None:
    """Epochs ``first_epoch`` to ``epochs`` of :func:`fit`: train, evaluate, record."""
    model, device, optimizer = stepper.model, stepper.device, stepper.optimizer
    sampler = getattr(train_batches, "sampler", None)
    for epoch in range(first_epoch, epochs + 1):
        start = time.perf_counter()
        if callable(getattr(sampler, "set_epoch", None)):
            sampler.set_epoch(epoch - 1)  # a new shuffle each epoch, counted from 0
        train_loss, grad_norm = stepper.train_epoch(train_batches, epoch, saver, history, best)
        history.stopped_by_time = stepper.out_of_time
        record = {"epoch": epoch, "train_loss": train_loss}
        model.eval()
        if val_batches is not None:
            record["val_loss"] = _mean_loss(model, loss_fn, val_batches, device, amp_dtype, epoch)
        with torch.no_grad():
            for name, metric in (metrics or {}).items():
                record[name] = float(metric(model))
        record.update(grad_norm=grad_norm, lr=float(optimizer.param_groups[0]["lr"]),
                      steps=stepper.steps, time_s=time.perf_counter() - start,
                      train_s=stepper.trained_s)
        history.records.append(record)
        stepper.bars.end_epoch(record)
        for callback in callbacks:
            callback.on_epoch_end(epoch, record, model)
        if best.should_stop(record, epoch, model, history, epochs) or stepper.finished:
            break


def _check_budget(epochs: int | None, max_steps: int | None, train_batches: Any) -> int:
    """The number of epochs to run: ``epochs``, or those ``max_steps`` starts."""
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int)
                                  or max_steps < 1):
        raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
    if epochs is None:
        if max_steps is None:
            raise ValueError("give epochs, max_steps or both")
        epochs = epochs_for(max_steps, train_batches)
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}")
    return epochs


def _check_options(clip_grad_norm: float | None, max_time_s: float | None,
                   amp_dtype: torch.dtype | None) -> None:
    if clip_grad_norm is not None and clip_grad_norm <= 0:
        raise ValueError(f"clip_grad_norm must be positive, got {clip_grad_norm}")
    if max_time_s is not None and max_time_s <= 0:
        raise ValueError(f"max_time_s must be positive, got {max_time_s}")
    if amp_dtype not in (None, torch.float16, torch.bfloat16):
        raise ValueError(
            f"amp_dtype must be None, torch.float16 or torch.bfloat16, got {amp_dtype}"
        )


class _Stepper:
    """The optimiser steps of :func:`fit`: one pass over the training batches per call of
    :meth:`train_epoch`, counting steps and training time until the step budget (or the
    ``max_time_s`` safety valve) ends the run."""

    def __init__(self, model, optimizer, loss_fn, device, clip_grad_norm, amp_dtype, scheduler,
                 max_steps, max_time_s, bars: Progress) -> None:
        self.model, self.optimizer, self.loss_fn, self.device = model, optimizer, loss_fn, device
        self.max_norm = clip_grad_norm if clip_grad_norm is not None else math.inf
        self.amp_dtype, self.scheduler, self.bars = amp_dtype, scheduler, bars
        self.max_steps, self.max_time_s = max_steps, max_time_s
        self.scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype is torch.float16)
        self.distributed = world_size() > 1
        self.steps = 0  # optimiser steps taken
        self.updating = False  # inside the parameter update of a step
        self.step_callbacks: list[Any] = []  # callbacks told of every step's loss
        self.sums: EpochSums | None = None  # the running sums of the epoch in progress
        self.resume_sums: EpochSums | None = None  # those of the epoch a resumed run goes on in
        self.trained_s = 0.0  # seconds spent in training steps; evaluation does not count
        self.out_of_time = False

    @property
    def finished(self) -> bool:
        return self.out_of_time or (self.max_steps is not None and self.steps >= self.max_steps)

    def step(self, batch: Any, epoch: int, index: int) -> tuple[float, float]:
        """One optimiser step: loss, backward, clipping ``g <- g · min(1, c / ||g||)``, update,
        schedule. Returns the loss and the gradient norm before clipping."""
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device.type, dtype=self.amp_dtype,
                            enabled=self.amp_dtype is not None):
            loss = _check_loss(self.loss_fn(self.model, batch), epoch, index)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        norm = float(nn.utils.clip_grad_norm_(params, self.max_norm))
        self.updating = True  # Ctrl-C from here to the step's bookkeeping leaves half an update
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.scheduler is not None:
            self.scheduler.step()
        self.steps += 1
        return loss.item(), norm

    def _time_is_up(self, started: float) -> bool:
        if self.max_time_s is None:
            return False
        out_of_time = self.trained_s + time.perf_counter() - started >= self.max_time_s
        return any_rank(out_of_time, self.device) if self.distributed else out_of_time

    def _batches(self, batches: Iterable[Any], saver: Checkpointer | None, history: History,
                 best: BestWeights, epoch: int) -> Iterable[Any]:
        """This epoch's batches: all of them, or, in the epoch a resumed run goes on in, those
        after the ones the interrupted run used."""
        if self.resume_sums is not None:
            self.sums, self.resume_sums = self.resume_sums, None
            self.bars.skip(self.steps, self.sums.batches)
            return saver.replay_epoch(batches, self.sums.batches)
        self.updating = True  # Ctrl-C in the epoch's bookkeeping falls back to the last save
        self.sums = EpochSums()
        if saver is not None:
            saver.epoch_started(epoch, batches, history.records, best)
        self.updating = False
        return batches

    def train_epoch(self, batches: Iterable[Any], epoch: int, saver: Checkpointer | None = None,
                    history: History | None = None, best: BestWeights | None = None
                    ) -> tuple[float, float]:
        """Steps over ``batches`` until they or the budget run out. Returns the row-weighted
        mean training loss (over every rank) and the mean gradient norm."""
        self.model.train()
        self.bars.start_epoch(epoch, len(batches) if hasattr(batches, "__len__") else None)
        epoch_batches = self._batches(batches, saver, history or History(), best, epoch)
        started = time.perf_counter()
        sums = self.sums
        for index, batch in enumerate(epoch_batches, start=sums.batches):
            if self.finished:
                break
            batch = to_device(batch, self.device)
            loss, norm = self.step(batch, epoch, index)
            size = max(batch_size(batch), 1)
            sums.batches, sums.total, sums.rows = index + 1, sums.total + loss * size, \
                sums.rows + size
            sums.norms.append(norm)
            if saver is not None:
                saver.step_done(self, sums)
            self.updating = False  # the step and its bookkeeping are complete
            self.bars.step(loss)
            for callback in self.step_callbacks:
                callback.on_step_end(self.steps, loss)
            if self.max_steps is not None and self.steps >= self.max_steps:
                break
            if self._time_is_up(started):
                self.out_of_time = True
                break
        self.trained_s += time.perf_counter() - started
        total, rows = sums.total, sums.rows
        if self.distributed:
            total, rows = sum_over_ranks([total, rows], self.device)
        if rows == 0:
            raise ValueError("train_batches yielded no batches")
        return total / rows, sum(sums.norms) / len(sums.norms)

    def interrupted(self, saver: Checkpointer | None) -> TrainingInterrupted:
        """Save what Ctrl-C leaves (see :mod:`course_lib.train.resume`) and say so in one line."""
        where = f"stopped at step {self.steps}" + \
            (f" of {self.max_steps}" if self.max_steps is not None else "")
        if saver is None:
            return TrainingInterrupted(
                f"Training {where}; the model holds the weights of that step and nothing was "
                f"saved (fit(..., resume_path=...) keeps a state to go on from)."
            )
        if not self.updating and self.sums is not None:
            saver.save(self, self.sums)
        elif not saver.path.is_file():
            return TrainingInterrupted(
                f"Training {where}, in the middle of an update; nothing was saved, and the next "
                f"run starts from step 0."
            )
        return TrainingInterrupted(
            f"Training {where}; the state after step {saver.saved_steps} is saved in "
            f"{saver.path}, and the same call goes on from there (the unfinished model was not "
            f"saved as trained)."
        )
