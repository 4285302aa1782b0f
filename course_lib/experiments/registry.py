"""The experiments of ``course reproduce``, each declared once as an :class:`Experiment`.

An experiment trains one or more named models from scratch with a seed, measures them on the
test split and writes ``results/seed-N/NAME.json`` (or ``NAME-MODEL.json`` for one model). Its
declaration says everything the rest of the course needs to know about it:

- what it is called and which models it trains (``models``; ``default_models`` is what a bare
  ``course reproduce NAME`` trains);
- its settings, one complete tree per model and seed (``settings(model, seed)``), and the step
  budget of each model (``steps(model)``, cheap: no data are built);
- how it trains and measures (``reproduce``, which writes the JSON and returns a run with
  ``result`` and ``table()``);
- what one step costs (``step_seconds``) and what the evaluation after training costs, for
  estimates only;
- its targets, and how the results page reads a record (``records``, ``metrics``, ``budget``).

:class:`Registry` holds them in order; the command line, ``course reproduce`` (estimates and
runs), ``course results``, the results page and the lessons' ``measured`` all read the one
registry of :mod:`course_lib.experiments.catalogue`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from course_lib.experiments.targets import Target

Records = Callable[[dict], dict[str, dict]]


def model_records(result: dict) -> dict[str, dict]:
    """The records of a result that keeps them under ``"models"`` (the default layout)."""
    return dict(result.get("models", {}))


def step_budget(name: str, record: dict) -> tuple[str, int, int, float]:
    """``(row label, optimiser steps, epochs, training seconds)`` of one model's record."""
    return name, record["steps"], record["epochs"], record["wall_s"]


@dataclass(frozen=True)
class Experiment:
    """One experiment of ``course reproduce``: see the module docstring for each part.

    ``reproduce(models, seed, out_dir=None, *, options=RunOptions())`` trains (or, as the
    :class:`~course_lib.experiments.runs.RunOptions` say, loads) ``models`` (a name or several),
    writes the result in ``out_dir`` under the name :meth:`result_stem` gives, and returns a run
    with ``result`` (the JSON) and ``table()`` (Markdown).
    ``model_option`` is the command-line flag that picks one model (``--model`` or
    ``--dataset``); ``after`` names experiments whose models must be trained first (``course
    reproduce all`` orders its jobs by it); ``family`` groups experiments whose metrics share
    a table block on the results page (translation models with translation models);
    ``headline`` names the translation models README's headline table shows, with their
    labels; ``checkpoint(model, settings, cache_dir)`` is where a trained model is saved (what
    ``--ship`` copies into the shipped reference models)."""

    name: str
    summary: str
    models: tuple[str, ...]
    settings: Callable[[str, int], Any]
    steps: Callable[[str], int]
    reproduce: Callable[..., Any]
    step_seconds: Mapping[str, float]
    evaluation_seconds: float
    metrics: Callable[[str, dict], list[tuple[str, float | None]]]
    default_models: tuple[str, ...] = ()
    targets: tuple[Target, ...] = ()
    records: Records = model_records
    budget: Callable[[str, dict], tuple[str, int, int, float]] = step_budget
    model_option: str = "model"
    after: tuple[str, ...] = ()
    family: str = ""
    command: str = ""
    headline: Mapping[str, str] = field(default_factory=dict)
    checkpoint: Callable[..., Path] | None = None

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name == "all":
            raise ValueError(f"an experiment's name must be a word other than 'all', got "
                             f"{self.name!r}")
        if not self.models:
            raise ValueError(f"experiment {self.name!r} declares no models")
        missing = [m for m in (*self.default_models, *self.step_seconds, *self.headline)
                   if m not in self.models]
        if missing:
            raise ValueError(f"experiment {self.name!r} names models it does not declare: "
                             f"{missing}; its models: {', '.join(self.models)}")
        uncosted = [m for m in self.models if m not in self.step_seconds]
        if uncosted:
            raise ValueError(f"experiment {self.name!r} gives no step_seconds for {uncosted}")
        if self.model_option not in ("model", "dataset"):
            raise ValueError(f"model_option must be 'model' or 'dataset', got "
                             f"{self.model_option!r}")
        if not self.default_models:
            object.__setattr__(self, "default_models", self.models)
        if not self.family:
            object.__setattr__(self, "family", self.name)
        if not self.command:
            option = f" --{self.model_option} {self.model_option.upper()}" \
                if len(self.models) > 1 else ""
            object.__setattr__(self, "command", f"course reproduce {self.name}{option} --seed N")

    def result_stem(self, models: tuple[str, ...]) -> str:
        """The name of the files a run of ``models`` writes (``STEM.json``, ``STEM.png``):
        ``NAME-MODEL`` for one model of an experiment that declares several (what ``course
        reproduce NAME --model MODEL`` writes), else ``NAME``, the experiment's own file, which
        the results page reads first."""
        if not models:
            raise ValueError(f"a run of {self.name} needs at least one model, got none")
        if len(models) == 1 and len(self.models) > 1:
            return f"{self.name}-{models[0]}"
        return self.name

    def check_model(self, model: str) -> str:
        """``model`` if this experiment trains it, else a ValueError naming the choices."""
        if model not in self.models:
            kind = "data set" if self.model_option == "dataset" else "model"
            raise ValueError(f"unknown {kind} {model!r} for {self.name}; "
                             f"available: {', '.join(self.models)}")
        return model


@dataclass
class Registry:
    """The experiments in the order ``course reproduce all`` and the results page list them."""

    experiments: dict[str, Experiment] = field(default_factory=dict)

    def add(self, experiment: Experiment) -> Experiment:
        if experiment.name in self.experiments:
            raise ValueError(f"an experiment named {experiment.name!r} is already registered")
        unknown = [name for name in experiment.after if name not in self.experiments]
        if unknown:
            raise ValueError(f"experiment {experiment.name!r} comes after {unknown}, which "
                             "are not registered before it")
        self.experiments[experiment.name] = experiment
        return experiment

    @contextmanager
    def added(self, experiment: Experiment) -> Iterator[Experiment]:
        """``experiment`` registered for the ``with`` block only (tests, one-off studies)."""
        self.add(experiment)
        try:
            yield experiment
        finally:
            self.experiments.pop(experiment.name, None)

    def names(self) -> tuple[str, ...]:
        return tuple(self.experiments)

    def __iter__(self) -> Iterator[Experiment]:
        return iter(list(self.experiments.values()))

    def __len__(self) -> int:
        return len(self.experiments)

    def __getitem__(self, name: str) -> Experiment:
        if name not in self.experiments:
            raise ValueError(f"unknown experiment {name!r}; available: "
                             f"{', '.join(self.experiments)}")
        return self.experiments[name]

    def targets(self) -> tuple[Target, ...]:
        """Every experiment's targets, experiment by experiment."""
        return tuple(target for experiment in self for target in experiment.targets)

    def phases(self) -> list[list[Experiment]]:
        """The experiments in groups that can train side by side: each group only after the
        experiments its members name in ``after``."""
        done: set[str] = set()
        phases = []
        left = list(self)
        while left:
            ready = [e for e in left if set(e.after) <= done]
            phases.append(ready)
            done |= {e.name for e in ready}
            left = [e for e in left if e.name not in done]
        return phases

    def by_family(self) -> list[Experiment]:
        """The experiments grouped by ``family``, families in order of first appearance."""
        families = dict.fromkeys(e.family for e in self)
        return [e for family in families for e in self if e.family == family]
