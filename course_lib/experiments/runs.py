"""What every ``course reproduce`` experiment shares: how one model is trained
(:class:`TrainSettings`, nested in every experiment's settings as ``train``), the switches of a
run (:class:`RunOptions`), where results and trained models live, training a model or loading the
one already trained with the same settings, and writing the JSON record and the figure of a run.

A trained model is kept in :data:`MODEL_CACHE` under a file name that digests everything that
decides it (the experiment's settings, the data, the torch version), so a changed setting
trains a new model and an unchanged one is loaded (when the caller asks with ``reuse=True``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from course_lib.paths import COURSE_ROOT, cache_dir, display_path
from course_lib.profile import get_profile
from course_lib.seeding import REPRODUCE_THREADS
from course_lib.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from course_lib.train.resume import TrainingInterrupted
from course_lib.train.schedules import cosine_decay, warmup_inverse_sqrt

DEFAULT_SEED = 0
# Trained models, keyed by their settings; COURSE_MODEL_CACHE moves the folder (read at import).
MODEL_CACHE = Path(os.environ.get("COURSE_MODEL_CACHE") or cache_dir("models"))
RESULTS_DIR = COURSE_ROOT / "results"


@dataclass(frozen=True)
class TrainSettings:
    """How one model of an experiment is trained: Adam at ``lr`` on batches of ``batch_size``
    for ``steps`` optimiser steps, the gradients' total norm clipped to ``clip_grad_norm``.

    The rate follows one schedule (:meth:`scheduler`): with ``warmup_steps`` it rises linearly
    for that many steps, then falls as 1/√step (the Transformer's, Vaswani et al. 2017);
    otherwise, with ``final_lr_fraction``, it falls along a cosine to that fraction of ``lr``
    by the last step; with neither it stays at ``lr``. ``max_minutes`` is an optional safety
    valve on training time, not a budget. The seed is not here: it belongs to the run (the data,
    the initialisation and the batch order all come from it)."""

    batch_size: int = 128
    lr: float = 3e-3
    clip_grad_norm: float = 1.0
    steps: int = 1000
    final_lr_fraction: float | None = 0.05
    warmup_steps: int | None = None
    max_minutes: float | None = None

    def __post_init__(self) -> None:
        for name in ("batch_size", "steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"train.{name} must be a positive int, got {value!r}")
        if self.warmup_steps is not None and self.final_lr_fraction is not None:
            raise ValueError(f"train: give warmup_steps ({self.warmup_steps}) or "
                             f"final_lr_fraction ({self.final_lr_fraction}), not both: a run "
                             f"follows one schedule")
        for name in ("lr", "clip_grad_norm", "max_minutes"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"train.{name} must be positive, got {value!r}")

    def scheduler(self, optimizer: torch.optim.Optimizer
                  ) -> torch.optim.lr_scheduler.LRScheduler | None:
        """The learning-rate schedule of this training (None: a constant rate)."""
        if self.warmup_steps is not None:
            return warmup_inverse_sqrt(optimizer, self.warmup_steps)
        if self.final_lr_fraction is not None:
            return cosine_decay(optimizer, self.steps, self.final_lr_fraction)
        return None

    @property
    def max_time_s(self) -> float | None:
        """``fit``'s ``max_time_s``: the safety valve in seconds (None: no limit)."""
        return None if self.max_minutes is None else 60.0 * self.max_minutes


@dataclass(frozen=True)
class RunOptions:
    """The switches of one run of an experiment's ``reproduce``, the same for every experiment
    and every seed; what decides a model (the seed and the experiment's settings) is not here.

    ``steps`` replaces the profile's step budget and ``max_minutes`` adds a safety valve on
    training time (both enter the settings, so a model trained with them is saved under a name
    of its own); ``threads`` sets the torch threads (None: :data:`REPRODUCE_THREADS`, the count
    the documented numbers were measured with). ``progress`` shows the progress bars and
    ``live_plot`` draws the curves as the model trains (None: in notebooks only). Trained models
    are saved in ``cache_dir`` (None: not saved); ``reuse`` loads a model saved there with
    exactly these settings instead of training it (lessons do; ``course reproduce`` does for the
    models ``course reproduce all`` trained), and ``use_shipped`` loads the reference model the
    course ships for these settings (:mod:`course_lib.experiments.shipped`)."""

    steps: int | None = None
    max_minutes: float | None = None
    threads: int | None = None
    progress: bool = True
    live_plot: bool | None = None
    reuse: bool = False
    use_shipped: bool = False
    cache_dir: Path | None = MODEL_CACHE

    def __post_init__(self) -> None:
        for name in ("steps", "threads"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ValueError(f"{name} must be a positive int or None, got {value!r}")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise ValueError(f"max_minutes must be positive or None, got {self.max_minutes!r}")
        if self.cache_dir is not None:
            object.__setattr__(self, "cache_dir", Path(self.cache_dir))

    @classmethod
    def of(cls, options: RunOptions | None = None, **switches: Any) -> RunOptions:
        """``options`` (None: the defaults) with the ``switches`` named as its fields replaced:
        ``reproduce_bottleneck("none", reuse=True)`` runs with ``RunOptions.of(reuse=True)``. A
        name that is not a field is refused as Python refuses an unknown keyword argument."""
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(switches) - set(known))
        if unknown:
            raise TypeError(f"unknown run option {unknown[0]!r}; the run options are "
                            f"{', '.join(known)}")
        if options is not None and not isinstance(options, cls):
            raise TypeError(f"options must be a RunOptions or None, got "
                            f"{type(options).__name__}")
        return replace(options or cls(), **switches)

    @property
    def torch_threads(self) -> int:
        """The torch threads the run trains and measures on."""
        return self.threads or REPRODUCE_THREADS


def seed_dir(seed: int, results_dir: Path = RESULTS_DIR) -> Path:
    """Where ``course reproduce`` writes the results of one seed: ``results/seed-N``."""
    return Path(results_dir) / f"seed-{seed}"


def cache_file(stem: str, key: list, cache_dir: Path = MODEL_CACHE) -> Path:
    """``cache_dir/STEM-DIGEST.pt``, the digest covering ``key`` (JSON-able) and the torch
    version: a model trained under anything else gets another file."""
    text = json.dumps([*key, torch.__version__], sort_keys=True)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return Path(cache_dir) / f"{stem}-{digest}.pt"


def load_saved(path: Path | None, model_class: type[nn.Module], device: torch.device
               ) -> tuple[nn.Module, dict[str, Any]] | None:
    """The model saved at ``path`` and its ``extra`` record, on ``device``; None when there is
    no file or it no longer fits ``model_class`` (a stale checkpoint is reported and ignored)."""
    if path is None or not path.is_file():
        return None
    try:
        model, extra = load_checkpoint(path, model_class)
    except CheckpointError as error:
        print(f"ignoring a stale checkpoint: {error}", file=sys.stderr)
        return None
    return model.to(device), extra


def resume_file(path: Path) -> Path:
    """Where the resumable state of the model being trained for ``path`` is kept."""
    return path.with_name(path.stem + ".resume.pt")


def train_or_load(path: Path | None, model_class: type[nn.Module], device: torch.device,
                  train: Callable[[Path | None], tuple[nn.Module, dict[str, Any]]], reuse: bool,
                  label: str, reference: Callable[[], Any] | None = None
                  ) -> tuple[nn.Module, dict[str, Any]]:
    """With ``reuse``, the model already saved at ``path`` (see :func:`load_saved`), else the
    shipped reference model ``reference()`` gives (None: none fits); otherwise
    ``train(resume_path)``'s model and ``extra`` record, saved at ``path`` (None: not saved).
    Training keeps a resumable state next to ``path``, so that a run stopped by Ctrl-C goes on
    where it stopped (:mod:`course_lib.train.resume`). ``label`` names the model in the
    messages."""
    saved = load_saved(path, model_class, device) if reuse else None
    if saved is not None:
        print(f"{label}: loaded the model trained with these settings from "
              f"{display_path(path.parent)}")
        return saved
    shipped = reference() if reference is not None else None
    if shipped is not None:
        return shipped
    try:
        model, extra = train(None if path is None else resume_file(path))
    except TrainingInterrupted as stopped:
        kept = "" if path is None else \
            f" Models this call finished before it are saved in {display_path(path.parent)}."
        raise TrainingInterrupted(f"{label}: {stopped.message}{kept}") from None
    if path is not None:
        save_checkpoint(path, model, model.config, extra=extra)
    return model, extra


def run_metadata(seed: int, device: torch.device, threads: int, corpus=None) -> dict:
    """What every ``course reproduce`` result records about its run: seed, profile, device,
    machine, torch threads and the corpus size (for translation). Each model's record holds
    its own complete settings."""
    metadata = {
        "seed": seed,
        "profile": get_profile(),
        "device": str(device),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
        "threads": threads,
    }
    if corpus is not None:
        metadata["corpus"] = {"size": corpus.config.size, "test_pairs": len(corpus.test)}
    return metadata


def write_json(result: dict, path: Path) -> Path:
    """Write ``result`` as indented JSON, atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")  # two processes never share one
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(path)
    return path


def save_figure(draw: Callable[[], Any], path: Path, dpi: int = 110) -> Path:
    """Draw a figure with ``draw()`` (which returns it) on the file-only Agg backend, save it at
    ``path`` and close it: a command-line run never opens a window."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    figure = draw()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return path
