"""Training that survives an interruption.

With a ``resume_path``, :func:`~course_lib.train.loop.fit` saves a resumable state there every
``save_every`` optimiser steps and when Ctrl-C stops it. The next call of ``fit`` with the same
path, model, optimiser and budget loads that state and goes on from the step where it stopped;
it ends with the weights an uninterrupted run ends with, bit for bit on the same machine and
thread count. The file is deleted when the run finishes.

Going on from step k needs everything that step k + 1 reads:

- the weights, the optimiser's moments, the learning-rate schedule and the gradient scaler;
- the batch order of the epoch in progress: the random states at the start of that epoch
  (torch's, and the batch iterator's own ``generator`` if it has one) regenerate the order,
  and the ``k`` batches already used are skipped;
- the random states after step k (dropout draws from them);
- the epoch's running sums (for its mean training loss), the history so far and early
  stopping's best epoch.

The state is a plain dict of tensors and numbers, loaded with ``weights_only=True``.
"""

from __future__ import annotations

import copy
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

FORMAT = "course-resumable-training-1"
SAVE_EVERY = 50  # optimiser steps between two saved states


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped :func:`~course_lib.train.loop.fit`. Its message says in one line what was
    saved and what was not; IPython shows that line instead of a traceback."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def _render_traceback_(self) -> list[str]:  # IPython's hook for an exception's own display
        return [self.message]


def random_states(device: torch.device) -> dict[str, Any]:
    """Every random state a training step may draw from: Python's, NumPy's, torch's (and the
    GPU's on CUDA), as plain values and tensors."""
    version, numbers, gauss = random.getstate()
    kind, keys, position, has_gauss, cached = np.random.get_state()  # noqa: NPY002
    states = {
        "python": [version, torch.tensor(numbers, dtype=torch.int64), gauss],
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), position, has_gauss, cached],
        "torch": torch.get_rng_state(),
    }
    if device.type == "cuda":
        states["cuda"] = torch.cuda.get_rng_state(device)
    return states


def set_random_states(states: dict[str, Any], device: torch.device) -> None:
    version, numbers, gauss = states["python"]
    random.setstate((version, tuple(numbers.tolist()), gauss))
    kind, keys, position, has_gauss, cached = states["numpy"]
    keys = keys.numpy().astype(np.uint32)
    np.random.set_state((kind, keys, position, has_gauss, cached))  # noqa: NPY002
    torch.set_rng_state(states["torch"])
    if "cuda" in states and device.type == "cuda":
        torch.cuda.set_rng_state(states["cuda"], device)


def batch_generator(batches: Any) -> torch.Generator | None:
    """The generator a batch iterator draws its order from (``batches.generator``), if any."""
    generator = getattr(batches, "generator", None)
    return generator if isinstance(generator, torch.Generator) else None


@dataclass
class EpochSums:
    """The running sums of the epoch in progress: batches used, loss·rows, rows, gradient norms."""

    batches: int = 0
    total: float = 0.0
    rows: int = 0
    norms: list[float] = field(default_factory=list)


@dataclass
class Checkpointer:
    """Saves and restores the resumable state of one run of a
    :class:`~course_lib.train.trainer.Trainer` at ``path``.

    The trainer tells it when an epoch starts (:meth:`epoch_started`) and when a step ends
    (:meth:`step_done`); it saves every ``every`` steps and, through :meth:`save`, on Ctrl-C.
    It reads and restores the trainer's ``model``, ``optimizer``, ``scheduler``, ``scaler``,
    ``steps`` and ``trained_s``.
    """

    path: Path
    every: int
    budget: dict[str, int | None]
    device: torch.device
    epoch_states: dict[str, Any] = field(default_factory=dict)
    step_states: dict[str, Any] = field(default_factory=dict)
    epoch: int = 1
    history_at_epoch_start: list[dict[str, float]] = field(default_factory=list)
    best_at_epoch_start: dict[str, Any] = field(default_factory=dict)
    saved_steps: int | None = None  # the step of the state on disk

    def __post_init__(self) -> None:
        if isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 1:
            raise ValueError(f"save_every must be a positive int, got {self.every!r}")
        self.path = Path(self.path)

    def epoch_started(self, epoch: int, batches: Any, history: list, best: Any) -> None:
        """Remember what regenerates this epoch's batch order, and the records before it."""
        self.epoch = epoch
        generator = batch_generator(batches)
        self.epoch_states = {"random": random_states(self.device),
                             "batches": None if generator is None else generator.get_state()}
        self.step_states = self.epoch_states["random"]
        self.history_at_epoch_start = copy.deepcopy(history)
        self.best_at_epoch_start = best.snapshot()

    def step_done(self, trainer: Any, sums: EpochSums) -> None:
        self.step_states = random_states(self.device)
        if trainer.steps % self.every == 0:
            self.save(trainer, sums)

    def save(self, trainer: Any, sums: EpochSums) -> None:
        """Write the state after the last completed step, atomically."""
        payload = {
            "format": FORMAT, "budget": dict(self.budget), "steps": trainer.steps,
            "epoch": self.epoch, "sums": [sums.batches, sums.total, sums.rows, list(sums.norms)],
            "model": {k: v.detach().cpu() for k, v in trainer.model.state_dict().items()},
            "optimizer": trainer.optimizer.state_dict(),
            "scheduler": None if trainer.scheduler is None else trainer.scheduler.state_dict(),
            "scaler": trainer.scaler.state_dict(), "trained_s": trainer.trained_s,
            "epoch_random": self.epoch_states["random"],
            "epoch_batches": self.epoch_states["batches"], "step_random": self.step_states,
            "history": self.history_at_epoch_start, "best": self.best_at_epoch_start,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")  # per process
        torch.save(payload, temporary)
        os.replace(temporary, self.path)  # a crash never leaves half a state under the name
        self.saved_steps = trainer.steps

    def load(self) -> dict[str, Any] | None:
        """The saved state, or None when there is none. A state saved for another budget or
        another model is refused, naming the file to delete."""
        if not self.path.is_file():
            return None
        state = torch.load(self.path, map_location="cpu", weights_only=True)
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise ValueError(f"{self.path} is not a resumable training state; delete it")
        if state["budget"] != self.budget:
            raise ValueError(
                f"{self.path} was saved for a run with budget {state['budget']}, not "
                f"{self.budget}; delete it to train from the start"
            )
        return state

    def restore(self, state: dict[str, Any], trainer: Any, batches: Any) -> EpochSums:
        """Put the model, optimiser, schedule and scaler back as they were after the saved step,
        replay the epoch's batch order up to it, and return the epoch's running sums."""
        trainer.model.load_state_dict(state["model"])
        trainer.optimizer.load_state_dict(state["optimizer"])
        if trainer.scheduler is not None:
            trainer.scheduler.load_state_dict(state["scheduler"])
        trainer.scaler.load_state_dict(state["scaler"])
        trainer.steps, trainer.trained_s = state["steps"], state["trained_s"]
        self.saved_steps = state["steps"]
        self.epoch = state["epoch"]
        self.epoch_states = {"random": state["epoch_random"], "batches": state["epoch_batches"]}
        self.step_states = state["step_random"]
        self.history_at_epoch_start = state["history"]
        self.best_at_epoch_start = state["best"]
        done, total, rows, norms = state["sums"]
        return EpochSums(done, total, rows, list(norms))

    def replay_epoch(self, batches: Any, done: int):
        """An iterator over this epoch's batches after the first ``done``, in the order the
        interrupted run drew, with the random states as they were after its last step."""
        set_random_states(self.epoch_states["random"], self.device)
        generator = batch_generator(batches)
        if generator is not None and self.epoch_states["batches"] is not None:
            generator.set_state(self.epoch_states["batches"])
        iterator = iter(batches)
        for _ in range(done):
            next(iterator)
        if done:  # before the first step, the iterator's own draws are still to come
            set_random_states(self.step_states, self.device)
        return iterator

    def finished(self) -> None:
        self.path.unlink(missing_ok=True)
