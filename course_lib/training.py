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
``DistributedDataParallel`` model (:mod:`course_lib.distributed`); see :func:`fit`.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import distributed as dist
from torch import nn
from tqdm.auto import tqdm

from course_lib.device import get_device, to_device

LossFn = Callable[[nn.Module, Any], torch.Tensor]
Metric = Callable[[nn.Module], float]


class Callback(Protocol):
    def on_epoch_end(self, epoch: int, record: dict[str, float], model: nn.Module) -> None: ...


@dataclass
class EarlyStopping:
    """Stop when ``monitor`` has not improved by more than ``min_delta`` for ``patience`` epochs.

    ``mode="min"`` for losses, ``"max"`` for scores such as accuracy or BLEU. With
    ``restore_best=True`` the model ends with the weights of its best epoch.
    """

    monitor: str = "val_loss"
    mode: str = "min"
    patience: int = 3
    min_delta: float = 0.0
    restore_best: bool = True

    def __post_init__(self) -> None:
        if self.mode not in ("min", "max"):
            raise ValueError(f"EarlyStopping.mode must be 'min' or 'max', got {self.mode!r}")
        if self.patience < 1:
            raise ValueError(f"EarlyStopping.patience must be at least 1, got {self.patience}")
        if self.min_delta < 0:
            raise ValueError(f"EarlyStopping.min_delta must be >= 0, got {self.min_delta}")

    def improved(self, value: float, best: float | None) -> bool:
        if best is None:
            return True
        if self.mode == "min":
            return value < best - self.min_delta
        return value > best + self.min_delta


@dataclass
class History:
    """Per-epoch records of a run; ``history["val_loss"]`` gives one column as a list."""

    records: list[dict[str, float]] = field(default_factory=list)
    stopped_early: bool = False
    stopped_by_time: bool = False
    best_epoch: int | None = None

    def __getitem__(self, key: str) -> list[float]:
        if self.records and key not in self.records[0]:
            raise KeyError(f"no {key!r} in the history; it has {sorted(self.records[0])}")
        return [record[key] for record in self.records]

    def __len__(self) -> int:
        return len(self.records)

    @property
    def keys(self) -> list[str]:
        return list(self.records[0]) if self.records else []

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame(self.records).set_index("epoch")


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


def _world_size() -> int:
    """Processes training together: ``torch.distributed``'s world size once it is initialised
    (under ``torchrun``), else 1."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return 1


def _is_main_process() -> bool:
    """True on rank 0, and in a run that is not distributed."""
    return _world_size() == 1 or dist.get_rank() == 0


def _sum_over_ranks(values: Sequence[float], device: torch.device) -> list[float]:
    """Each value summed over every rank (an all-reduce); every rank gets the same sums."""
    summed = torch.tensor(list(values), dtype=torch.float64, device=device)  # (len(values),)
    dist.all_reduce(summed, op=dist.ReduceOp.SUM)
    return summed.tolist()


def _any_rank(flag: bool, device: torch.device) -> bool:
    """True on every rank if ``flag`` is True on any (an all-reduce of the maximum)."""
    agreed = torch.tensor([int(flag)], device=device)  # (1,)
    dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
    return bool(agreed.item())


def _mean_loss(model, loss_fn, batches, device, amp_dtype, epoch) -> float:
    total, rows = 0.0, 0
    with torch.no_grad():
        for step, batch in enumerate(batches):
            batch = to_device(batch, device)
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = _check_loss(loss_fn(model, batch), epoch, step)
            size = max(batch_size(batch), 1)
            total += loss.item() * size
            rows += size
    if _world_size() > 1:
        total, rows = _sum_over_ranks([total, rows], device)
    if rows == 0:
        raise ValueError("val_batches yielded no batches")
    return total / rows


def in_notebook() -> bool:
    """True inside a Jupyter kernel (where live curves can be drawn)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def cosine_decay(optimizer: torch.optim.Optimizer, total_steps: int,
                 final_fraction: float = 0.05) -> torch.optim.lr_scheduler.LambdaLR:
    """A cosine learning-rate decay over ``total_steps`` optimiser steps:

        lr(n) = lr₀ · (f + (1 − f) · ½ · (1 + cos(π · min(1, n / total_steps))))

    with n the steps already taken and f = ``final_fraction``: lr₀ at the first step, f · lr₀
    from step ``total_steps`` on. Counted in steps, it decays the same way on every machine.
    """
    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"total_steps must be a positive int, got {total_steps!r}")
    if not 0.0 <= final_fraction <= 1.0:
        raise ValueError(f"final_fraction must lie in [0, 1], got {final_fraction}")

    def factor(done: int) -> float:
        progress = min(1.0, done / total_steps)
        return final_fraction + (1.0 - final_fraction) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def transformer_lr(step: int, d_model: int, warmup_steps: int) -> float:
    """The Transformer paper's rate (Vaswani et al., 2017, eq. 3), step counted from 1:

        lr = D^(-1/2) · min(step^(-1/2), step · warmup^(-3/2))

    It rises linearly for ``warmup_steps`` steps, peaks at (D · warmup)^(-1/2), then decays as
    1/√step."""
    if step < 1 or d_model < 1 or warmup_steps < 1:
        raise ValueError(f"step, d_model and warmup_steps must be at least 1, got {step}, "
                         f"{d_model} and {warmup_steps}")
    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def warmup_inverse_sqrt(optimizer: torch.optim.Optimizer, warmup_steps: int
                        ) -> torch.optim.lr_scheduler.LambdaLR:
    """The paper's schedule scaled to peak at the optimiser's own rate lr₀:

        lr(step) = lr₀ · min(step / warmup, √(warmup / step)) = lr₀ · transformer_lr(step) /
                   transformer_lr(warmup)

    (the first optimiser step is step 1). Warm-up keeps Adam's early, badly estimated updates
    small while post-norm layers settle."""
    if warmup_steps < 1:
        raise ValueError(f"warmup_steps must be at least 1, got {warmup_steps}")

    def factor(done: int) -> float:
        step = done + 1  # LambdaLR calls with the number of steps already taken
        return min(step / warmup_steps, math.sqrt(warmup_steps / step))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class _Progress:
    """The progress bars of :func:`fit`: with a step budget, one bar over all ``max_steps``
    steps (its remaining time is estimated from the steps still to take); otherwise a bar over
    epochs and one over the batches of the current epoch."""

    def __init__(self, enabled: bool, epochs: int, max_steps: int | None) -> None:
        self.by_steps = max_steps is not None
        self.epochs = tqdm(total=epochs, desc="epochs", disable=not enabled or self.by_steps)
        self.batches = tqdm(total=max_steps, desc="steps" if self.by_steps else "batches",
                            leave=self.by_steps, disable=not enabled)

    def start_epoch(self, epoch: int, batches: int | None) -> None:
        if not self.by_steps:
            self.batches.reset(total=batches)
        self.batches.set_description(f"epoch {epoch}")

    def step(self, loss: float) -> None:
        self.batches.update(1)
        self.batches.set_postfix(loss=f"{loss:.4f}", refresh=False)

    def end_epoch(self, record: dict[str, float]) -> None:
        shown = {k: f"{v:.4g}" for k, v in record.items()
                 if k not in ("epoch", "grad_norm", "lr", "time_s", "train_s", "steps")}
        (self.batches if self.by_steps else self.epochs).set_postfix(shown)
        self.epochs.update(1)

    def close(self) -> None:
        self.batches.close()
        self.epochs.close()


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
    ``max_time_s`` is a safety valve, not a budget: only time in training steps counts
    (validation, metrics and callbacks do not); if it runs out first, training stops after the
    current batch and ``history.stopped_by_time`` is set, and the model is not the one the step
    budget would have given.

    Under ``torchrun`` with a ``DistributedDataParallel`` model (:mod:`course_lib.distributed`)
    the loop is the same on every rank; only three things change, and only when
    ``torch.distributed`` is initialised with more than one process:

    - ``train_loss`` and ``val_loss`` are means over every rank's rows (an all-reduce of the
      loss sums and row counts), so every rank records the same, global history and early
      stopping on them is decided alike on every rank;
    - the ``max_time_s`` stop is agreed (an all-reduce of the maximum of a stop flag after each
      step): one rank stopping alone would leave the others waiting in their next all-reduce;
    - progress bars show on rank 0 only.

    In every run, if ``train_batches`` has a ``sampler`` with ``set_epoch`` (a
    ``DistributedSampler``), ``sampler.set_epoch(epoch - 1)`` is called before each epoch:
    without it the sampler repeats its first epoch's order. ``metrics`` and ``callbacks`` run on
    every rank as given; a metric must run on every rank too (a DDP forward may synchronise
    buffers across ranks), or call ``model.module``.
    """
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int)
                                  or max_steps < 1):
        raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
    if epochs is None:
        if max_steps is None:
            raise ValueError("give epochs, max_steps or both")
        epochs = epochs_for(max_steps, train_batches)
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}")
    if clip_grad_norm is not None and clip_grad_norm <= 0:
        raise ValueError(f"clip_grad_norm must be positive, got {clip_grad_norm}")
    if max_time_s is not None and max_time_s <= 0:
        raise ValueError(f"max_time_s must be positive, got {max_time_s}")
    if amp_dtype not in (None, torch.float16, torch.bfloat16):
        raise ValueError(
            f"amp_dtype must be None, torch.float16 or torch.bfloat16, got {amp_dtype}"
        )
    device = torch.device(device) if device is not None else get_device()
    model.to(device)
    metrics = dict(metrics or {})
    callbacks = list(callbacks)
    if live_plot is None:
        live_plot = in_notebook()
    if live_plot:
        from course_lib.viz import LivePlot

        callbacks.append(LivePlot())
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype is torch.float16)

    history = History()
    best_value: float | None = None
    best_state: dict[str, torch.Tensor] | None = None
    epochs_without_gain = 0
    trained_s = 0.0  # seconds spent in training steps; evaluation does not count
    steps = 0  # optimiser steps taken
    distributed = _world_size() > 1
    bars = _Progress(progress and _is_main_process(), epochs, max_steps)
    sampler = getattr(train_batches, "sampler", None)
    for epoch in range(1, epochs + 1):
        start = time.perf_counter()
        if callable(getattr(sampler, "set_epoch", None)):
            sampler.set_epoch(epoch - 1)  # a new shuffle each epoch, counted from 0
        model.train()
        total, rows, norms = 0.0, 0, []
        bars.start_epoch(epoch, len(train_batches) if hasattr(train_batches, "__len__") else None)
        train_start = time.perf_counter()
        for step, batch in enumerate(train_batches):
            batch = to_device(batch, device)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = _check_loss(loss_fn(model, batch), epoch, step)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            params = [p for group in optimizer.param_groups for p in group["params"]]
            max_norm = clip_grad_norm if clip_grad_norm is not None else math.inf
            norms.append(float(nn.utils.clip_grad_norm_(params, max_norm)))
            scaler.step(optimizer)
            scaler.update()
            if scheduler is not None:
                scheduler.step()
            steps += 1
            size = max(batch_size(batch), 1)
            total += loss.item() * size
            rows += size
            bars.step(loss.item())
            if max_steps is not None and steps >= max_steps:
                break
            if max_time_s is not None:
                out_of_time = trained_s + time.perf_counter() - train_start >= max_time_s
                if distributed:
                    out_of_time = _any_rank(out_of_time, device)
                if out_of_time:
                    history.stopped_by_time = True
                    break
        trained_s += time.perf_counter() - train_start
        if distributed:
            total, rows = _sum_over_ranks([total, rows], device)
        if rows == 0:
            raise ValueError("train_batches yielded no batches")

        record: dict[str, float] = {"epoch": epoch, "train_loss": total / rows}
        model.eval()
        if val_batches is not None:
            record["val_loss"] = _mean_loss(model, loss_fn, val_batches, device, amp_dtype, epoch)
        with torch.no_grad():
            for name, metric in metrics.items():
                record[name] = float(metric(model))
        record["grad_norm"] = sum(norms) / len(norms)
        record["lr"] = float(optimizer.param_groups[0]["lr"])
        record["steps"] = steps
        record["time_s"] = time.perf_counter() - start
        record["train_s"] = trained_s
        history.records.append(record)
        bars.end_epoch(record)
        for callback in callbacks:
            callback.on_epoch_end(epoch, record, model)

        if early_stopping is not None:
            if early_stopping.monitor not in record:
                raise ValueError(
                    f"EarlyStopping monitors {early_stopping.monitor!r}, which the history does "
                    f"not have; it has {sorted(record)} (val_loss needs val_batches)."
                )
            value = record[early_stopping.monitor]
            if early_stopping.improved(value, best_value):
                best_value, history.best_epoch, epochs_without_gain = value, epoch, 0
                if early_stopping.restore_best:
                    best_state = copy.deepcopy(model.state_dict())
            else:
                epochs_without_gain += 1
                if epochs_without_gain >= early_stopping.patience:
                    history.stopped_early = epoch < epochs
                    break
        if history.stopped_by_time or (max_steps is not None and steps >= max_steps):
            break
    bars.close()
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    return history
