"""The course's targets: what an experiment's numbers must reach on every seed.

Each :class:`Target` reads a value from one seed's results (the JSON ``course reproduce``
writes, gathered by experiment: ``results[EXPERIMENT]["models"][MODEL]``) and compares it with a
bound, a constant or a multiple of another measurement; :func:`seed_targets` checks a set of
them on one seed. Each experiment declares its own targets
(:class:`~course_lib.experiments.registry.Experiment`); ``docs/results.md`` and README's headline
report the verdicts (:mod:`course_lib.experiments.results_page`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """One target of the course: ``measure(results)`` gives the value (None when the seed lacks
    the experiment), which must be at least ``bound(results)`` (or at most, ``at_most``)."""

    name: str
    measure: Callable[[dict], float | None]
    bound: Callable[[dict], float | None]
    bound_text: str
    at_most: bool = False

    def check(self, results: dict) -> tuple[float | None, float | None, bool | None]:
        """``(value, bound, holds)``; ``holds`` is None when either side is missing."""
        try:
            value, bound = self.measure(results), self.bound(results)
        except KeyError:
            return None, None, None
        if value is None or bound is None:
            return value, bound, None
        return value, bound, (value <= bound if self.at_most else value >= bound)


def record_value(experiment: str, model: str, key: str, bucket: str | None = None
                 ) -> Callable[[dict], float | None]:
    """A measure reading ``key`` (with ``bucket``: ``key[bucket]``) from ``model``'s record in
    one seed's results of ``experiment``."""
    def measure(results: dict) -> float | None:
        value = results[experiment]["models"][model][key]
        return value if bucket is None else value.get(bucket)
    return measure


def bleu_of(experiment: str, model: str, bucket: str | None = None
            ) -> Callable[[dict], float | None]:
    """Test BLEU of a translation model, overall or on one source-length bucket."""
    if bucket is None:
        return record_value(experiment, model, "bleu")
    return record_value(experiment, model, "bleu_by_length", bucket)


def constant(value: float) -> Callable[[dict], float]:
    return lambda _results: value


def times(factor: float, measure: Callable[[dict], float | None]
          ) -> Callable[[dict], float | None]:
    def bound(results: dict) -> float | None:
        value = measure(results)
        return None if value is None else factor * value
    return bound


def seed_targets(results: dict, targets: tuple[Target, ...]
                 ) -> list[tuple[Target, float | None, float | None, bool | None]]:
    """Every target checked on one seed's results: ``(target, value, bound, holds)``."""
    return [(target, *target.check(results)) for target in targets]
