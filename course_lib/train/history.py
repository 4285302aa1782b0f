"""What a run of :func:`~course_lib.train.loop.fit` records, epoch by epoch, and the early
stopping rule that reads those records."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
from torch import nn


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



class BestWeights:
    """Early stopping inside :func:`~course_lib.train.loop.fit`: tracks the best value of the
    monitored record, keeps a copy of the weights of that epoch when asked to restore them, and
    says when to stop."""

    def __init__(self, rule: EarlyStopping | None) -> None:
        self.rule = rule
        self.value: float | None = None
        self.state: dict[str, torch.Tensor] | None = None
        self.epochs_without_gain = 0
        self.best_epoch: int | None = None

    def should_stop(self, record: dict[str, float], epoch: int, model: nn.Module,
                    history: History, epochs: int) -> bool:
        if self.rule is None:
            return False
        if self.rule.monitor not in record:
            raise ValueError(
                f"EarlyStopping monitors {self.rule.monitor!r}, which the history does "
                f"not have; it has {sorted(record)} (val_loss needs val_batches)."
            )
        value = record[self.rule.monitor]
        if self.rule.improved(value, self.value):
            self.value, self.epochs_without_gain = value, 0
            self.best_epoch = history.best_epoch = epoch
            if self.rule.restore_best:
                self.state = copy.deepcopy(model.state_dict())
            return False
        self.epochs_without_gain += 1
        if self.epochs_without_gain >= self.rule.patience:
            history.stopped_early = epoch < epochs
            return True
        return False

    def snapshot(self) -> dict:
        """What :mod:`course_lib.train.resume` saves of early stopping (plain values)."""
        return {"value": self.value, "state": self.state, "best_epoch": self.best_epoch,
                "without_gain": self.epochs_without_gain}

    def restore_snapshot(self, saved: dict, history: History) -> None:
        self.value, self.state = saved["value"], saved["state"]
        self.epochs_without_gain = saved["without_gain"]
        self.best_epoch = history.best_epoch = saved["best_epoch"]

    def restore(self, model: nn.Module) -> None:
        if self.state is not None:
            model.load_state_dict(self.state)
