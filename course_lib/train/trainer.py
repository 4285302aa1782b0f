"""The trainer behind :func:`~course_lib.train.loop.fit`, one object a reader can follow.

A :class:`Trainer` holds what a run needs from its first step to its last: the model, the
optimiser and its schedule, the batches, the history, early stopping's best weights, the
checkpointer that saves a resumable state (:mod:`course_lib.train.resume`), and the counters
(optimiser steps, training seconds). How the run goes is a frozen :class:`TrainOptions`; the
callbacks are told of every epoch (and, if they ask, of every step). :meth:`Trainer.run` is
the loop::

    for each epoch:
        for each batch:   loss, backward, clip, optimiser step, schedule step   (train_step)
        evaluate:         val_loss and the metrics, without gradients             (evaluate)
        record:           one row of the history, the callbacks, early stopping   (end_epoch)

:func:`~course_lib.train.loop.fit` builds the options and the trainer and runs it, in one call.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
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
    """What the trainer calls after each epoch. A callback may also have ``on_step_end(step,
    loss)``, called after every optimiser step, and ``on_resume(history)``, called when a run
    goes on from a saved state with the epochs recorded before it."""

    def on_epoch_end(self, epoch: int, record: dict[str, float], model: nn.Module) -> None: ...


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


def epochs_for(max_steps: int, train_batches: Any) -> int:
    """Epochs that ``max_steps`` optimiser steps start: ⌈max_steps / batches per epoch⌉."""
    if not hasattr(train_batches, "__len__") or len(train_batches) == 0:
        raise ValueError("max_steps without epochs needs train_batches with a length > 0")
    return math.ceil(max_steps / len(train_batches))


def check_loss(loss: Any, epoch: int, step: int) -> torch.Tensor:
    """``loss`` if it is a finite scalar tensor; otherwise an error that says what to try."""
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise ValueError(f"loss_fn must return a scalar tensor (shape ()), got {shape}")
    if not torch.isfinite(loss):
        raise FloatingPointError(
            f"the loss is {loss.item()} at epoch {epoch}, step {step}; lower the learning rate, "
            f"clip gradients (clip_grad_norm=1.0) or check the inputs for NaN/inf."
        )
    return loss


@dataclass(frozen=True)
class TrainOptions:
    """How a :class:`Trainer` runs; each field is the :func:`~course_lib.train.loop.fit`
    keyword of the same name, checked here once.

    The budget is ``max_steps`` optimiser steps or ``epochs`` epochs (whichever ends first when
    both are given). ``clip_grad_norm`` clips the gradients' total norm; ``amp_dtype``
    (``torch.bfloat16`` or ``torch.float16``) turns on autocast; ``early_stopping`` is the rule
    that may end the run before its budget. ``progress`` shows the bars, ``live_plot`` draws the
    curves (None: in notebooks only). ``max_time_s`` is a safety valve on training time, not a
    budget. ``resume_path`` is where a resumable state is saved every ``save_every`` steps."""

    epochs: int | None = None
    max_steps: int | None = None
    device: torch.device | str | None = None
    clip_grad_norm: float | None = None
    amp_dtype: torch.dtype | None = None
    early_stopping: EarlyStopping | None = None
    live_plot: bool | None = None
    progress: bool = True
    max_time_s: float | None = None
    resume_path: str | Path | None = None
    save_every: int = SAVE_EVERY

    def __post_init__(self) -> None:
        steps = self.max_steps
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int)
                                  or steps < 1):
            raise ValueError(f"max_steps must be a positive int, got {steps!r}")
        if self.epochs is None and steps is None:
            raise ValueError("give epochs, max_steps or both")
        if self.epochs is not None and self.epochs < 1:
            raise ValueError(f"epochs must be at least 1, got {self.epochs}")
        if self.clip_grad_norm is not None and self.clip_grad_norm <= 0:
            raise ValueError(f"clip_grad_norm must be positive, got {self.clip_grad_norm}")
        if self.max_time_s is not None and self.max_time_s <= 0:
            raise ValueError(f"max_time_s must be positive, got {self.max_time_s}")
        if self.amp_dtype not in (None, torch.float16, torch.bfloat16):
            raise ValueError(
                f"amp_dtype must be None, torch.float16 or torch.bfloat16, got {self.amp_dtype}"
            )


class Trainer:
    """Trains ``model`` on ``train_batches`` with ``optimizer``, minimising ``loss_fn(model,
    batch)``, as ``options`` say; :meth:`run` trains and returns the :class:`History`.

    ``val_batches`` give ``val_loss`` after each epoch; ``metrics`` map names to
    ``metric(model) -> float``, evaluated after each epoch; ``scheduler.step()`` runs after every
    optimiser step; ``callbacks`` are told of each epoch. The attributes are the run's state:
    ``steps`` (optimiser steps taken), ``trained_s`` (seconds in training steps, evaluation
    excluded), ``history``, ``best`` (early stopping and its best weights) and ``checkpointer``
    (the resumable state, None without ``options.resume_path``)."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer,
                 train_batches: Iterable[Any], loss_fn: LossFn, options: TrainOptions, *,
                 val_batches: Iterable[Any] | None = None,
                 metrics: Mapping[str, Metric] | None = None, scheduler: Any | None = None,
                 callbacks: Sequence[Callback] = ()) -> None:
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.train_batches, self.val_batches = train_batches, val_batches
        self.metrics, self.scheduler, self.options = dict(metrics or {}), scheduler, options
        self.epochs = options.epochs if options.epochs is not None else \
            epochs_for(options.max_steps, train_batches)
        self.device = torch.device(options.device) if options.device is not None else \
            get_device()
        self.callbacks = self._with_live_plot(list(callbacks))
        self.step_callbacks = [c for c in self.callbacks
                               if callable(getattr(c, "on_step_end", None))]
        self.max_norm = math.inf if options.clip_grad_norm is None else options.clip_grad_norm
        self.scaler = torch.amp.GradScaler(self.device.type,
                                           enabled=options.amp_dtype is torch.float16)
        self.distributed = world_size() > 1
        self.history, self.best = History(), BestWeights(options.early_stopping)
        self.checkpointer = self._checkpointer()
        self.bars = Progress(False, self.epochs, options.max_steps)  # run() shows its own
        self.steps = 0  # optimiser steps taken
        self.trained_s = 0.0  # seconds spent in training steps; evaluation does not count
        self.out_of_time = False  # the max_time_s safety valve ended the run
        self.updating = False  # inside the parameter update of a step
        self.sums: EpochSums | None = None  # the running sums of the epoch in progress
        self.resume_sums: EpochSums | None = None  # those of the epoch a resumed run goes on in

    def _with_live_plot(self, callbacks: list[Any]) -> list[Any]:
        """``callbacks`` and, when ``options.live_plot`` asks (None: in a notebook), a
        :class:`~course_lib.viz_training.LivePlot`."""
        live_plot = self.options.live_plot
        if live_plot if live_plot is not None else in_notebook():
            from course_lib.viz_training import LivePlot

            callbacks.append(LivePlot())
        return callbacks

    def _checkpointer(self) -> Checkpointer | None:
        """The checkpointer of ``options.resume_path`` (None without one)."""
        if self.options.resume_path is None:
            return None
        if self.distributed:
            raise ValueError("resume_path is for a run in one process; under torchrun every "
                             "rank would write the same file")
        budget = {"epochs": self.epochs, "max_steps": self.options.max_steps}
        return Checkpointer(Path(self.options.resume_path), self.options.save_every, budget,
                            self.device)

    @property
    def steps_spent(self) -> bool:
        """The step budget is spent (never, without ``max_steps``)."""
        return self.options.max_steps is not None and self.steps >= self.options.max_steps

    @property
    def finished(self) -> bool:
        return self.out_of_time or self.steps_spent

    def run(self) -> History:
        """Train until the budget is spent (or early stopping ends the run) and return the
        history; the model ends in eval mode, with its best epoch's weights when early stopping
        keeps them. Ctrl-C raises :class:`TrainingInterrupted`, which says what was saved."""
        self.model.to(self.device)
        self.bars = Progress(self.options.progress and is_main_process(), self.epochs,
                             self.options.max_steps)
        first_epoch = self._resume()
        try:
            for epoch in range(first_epoch, self.epochs + 1):
                if self.run_epoch(epoch):
                    break
        except KeyboardInterrupt:
            self.bars.close()
            raise self._interrupted() from None
        self.bars.close()
        if self.checkpointer is not None:
            self.checkpointer.finished()
        self.best.restore(self.model)
        self.model.eval()
        return self.history

    def _resume(self) -> int:
        """Load the saved state into the run if there is one; the epoch to start from."""
        state = None if self.checkpointer is None else self.checkpointer.load()
        if state is None:
            return 1
        saved = self.checkpointer
        self.resume_sums = saved.restore(state, self, self.train_batches)
        self.history.records = list(saved.history_at_epoch_start)
        self.best.restore_snapshot(saved.best_at_epoch_start, self.history)
        for callback in self.callbacks:
            if callable(getattr(callback, "on_resume", None)):
                callback.on_resume(self.history)
        print(f"resuming from step {self.steps}, saved in {saved.path}")
        return saved.epoch

    def run_epoch(self, epoch: int) -> bool:
        """Train one epoch, evaluate the model and record the epoch; True when the run ends."""
        start = time.perf_counter()
        sampler = getattr(self.train_batches, "sampler", None)
        if callable(getattr(sampler, "set_epoch", None)):
            sampler.set_epoch(epoch - 1)  # a new shuffle each epoch, counted from 0
        train_loss, grad_norm = self.train_epoch(epoch)
        self.history.stopped_by_time = self.out_of_time
        record = {"epoch": epoch, "train_loss": train_loss, **self.evaluate(epoch)}
        record.update(grad_norm=grad_norm, lr=float(self.optimizer.param_groups[0]["lr"]),
                      steps=self.steps, time_s=time.perf_counter() - start,
                      train_s=self.trained_s)
        self.history.records.append(record)
        self.bars.end_epoch(record)
        for callback in self.callbacks:
            callback.on_epoch_end(epoch, record, self.model)
        stop = self.best.should_stop(record, epoch, self.model, self.history, self.epochs)
        return stop or self.finished

    def evaluate(self, epoch: int) -> dict[str, float]:
        """``val_loss`` (with ``val_batches``) and every metric, in eval mode, no gradients."""
        self.model.eval()
        record = {}
        if self.val_batches is not None:
            record["val_loss"] = self.mean_loss(self.val_batches, epoch)
        with torch.no_grad():
            for name, metric in self.metrics.items():
                record[name] = float(metric(self.model))
        return record

    def mean_loss(self, batches: Iterable[Any], epoch: int) -> float:
        """The row-weighted mean of ``loss_fn`` over ``batches``, without gradients (over every
        rank's rows in a distributed run)."""
        total, rows = 0.0, 0
        amp_dtype = self.options.amp_dtype
        with torch.no_grad():
            for step, batch in enumerate(batches):
                batch = to_device(batch, self.device)
                with torch.autocast(self.device.type, dtype=amp_dtype,
                                    enabled=amp_dtype is not None):
                    loss = check_loss(self.loss_fn(self.model, batch), epoch, step)
                size = max(batch_size(batch), 1)
                total += loss.item() * size
                rows += size
        if self.distributed:
            total, rows = sum_over_ranks([total, rows], self.device)
        if rows == 0:
            raise ValueError("val_batches yielded no batches")
        return total / rows

    def train_epoch(self, epoch: int) -> tuple[float, float]:
        """Steps over the epoch's batches until they or the budget run out. Returns the
        row-weighted mean training loss (over every rank) and the mean gradient norm."""
        self.model.train()
        batches = self.train_batches
        self.bars.start_epoch(epoch, len(batches) if hasattr(batches, "__len__") else None)
        epoch_batches = self._epoch_batches(epoch)
        started = time.perf_counter()
        for index, batch in enumerate(epoch_batches, start=self.sums.batches):
            if self.finished:
                break
            batch = to_device(batch, self.device)
            loss, norm = self.train_step(batch, epoch, index)
            self._step_done(batch, index, loss, norm)
            if self.steps_spent:
                break
            if self._time_is_up(started):
                self.out_of_time = True
                break
        self.trained_s += time.perf_counter() - started
        return self._epoch_means()

    def _epoch_batches(self, epoch: int) -> Iterable[Any]:
        """This epoch's batches: all of them, or, in the epoch a resumed run goes on in, those
        after the ones the interrupted run used."""
        if self.resume_sums is not None:
            self.sums, self.resume_sums = self.resume_sums, None
            self.bars.skip(self.steps, self.sums.batches)
            return self.checkpointer.replay_epoch(self.train_batches, self.sums.batches)
        self.updating = True  # Ctrl-C in the epoch's bookkeeping falls back to the last save
        self.sums = EpochSums()
        if self.checkpointer is not None:
            self.checkpointer.epoch_started(epoch, self.train_batches, self.history.records,
                                            self.best)
        self.updating = False
        return self.train_batches

    def train_step(self, batch: Any, epoch: int, index: int) -> tuple[float, float]:
        """One optimiser step: loss, backward, clipping ``g <- g · min(1, c / ||g||)``, update,
        schedule. Returns the loss and the gradient norm before clipping."""
        amp_dtype = self.options.amp_dtype
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = check_loss(self.loss_fn(self.model, batch), epoch, index)
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

    def _step_done(self, batch: Any, index: int, loss: float, norm: float) -> None:
        """The step's bookkeeping: the epoch's sums, the periodic save, the bar, the callbacks."""
        sums, size = self.sums, max(batch_size(batch), 1)
        sums.batches, sums.total, sums.rows = index + 1, sums.total + loss * size, \
            sums.rows + size
        sums.norms.append(norm)
        if self.checkpointer is not None:
            self.checkpointer.step_done(self, sums)
        self.updating = False  # the step and its bookkeeping are complete
        self.bars.step(loss)
        for callback in self.step_callbacks:
            callback.on_step_end(self.steps, loss)

    def _time_is_up(self, started: float) -> bool:
        """The ``max_time_s`` safety valve ran out (agreed by every rank under torchrun)."""
        if self.options.max_time_s is None:
            return False
        out_of_time = self.trained_s + time.perf_counter() - started >= self.options.max_time_s
        return any_rank(out_of_time, self.device) if self.distributed else out_of_time

    def _epoch_means(self) -> tuple[float, float]:
        """The epoch's row-weighted mean training loss (over every rank) and mean gradient
        norm."""
        total, rows = self.sums.total, self.sums.rows
        if self.distributed:
            total, rows = sum_over_ranks([total, rows], self.device)
        if rows == 0:
            raise ValueError("train_batches yielded no batches")
        return total / rows, sum(self.sums.norms) / len(self.sums.norms)

    def _interrupted(self) -> TrainingInterrupted:
        """Save what Ctrl-C leaves (see :mod:`course_lib.train.resume`) and say so in one line."""
        budget = self.options.max_steps
        where = f"stopped at step {self.steps}" + (f" of {budget}" if budget is not None else "")
        saver = self.checkpointer
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
