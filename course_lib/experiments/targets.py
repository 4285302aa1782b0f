"""The course's targets: what each experiment's numbers must reach on every seed.

Each :class:`Target` reads a value from one seed's results (the JSON ``course reproduce``
writes, gathered by experiment) and compares it with a bound, a constant or a multiple of another
measurement; :func:`seed_targets` checks them all on one seed. ``docs/results.md`` and README's
headline report the verdicts (:mod:`course_lib.experiments.results_page`).
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


def _bleu(experiment: str, model: str, bucket: str | None = None) -> Callable[[dict], float]:
    def measure(results: dict) -> float:
        entry = results[experiment]["models"][model]
        return entry["bleu"] if bucket is None else entry["bleu_by_length"][bucket]
    return measure


def _alignment(model: str) -> Callable[[dict], float]:
    return lambda results: results["bottleneck"]["models"][model]["alignment_accuracy"]


def _caption(dataset: str, metric: str) -> Callable[[dict], float]:
    return lambda results: results["captioning"][dataset][metric]


def _constant(value: float) -> Callable[[dict], float]:
    return lambda _results: value


def _times(factor: float, measure: Callable[[dict], float]) -> Callable[[dict], float]:
    return lambda results: factor * measure(results)


TARGETS = (
    Target("no attention: BLEU on 1-10 words", _bleu("bottleneck", "none", "1-10"),
           _constant(85.0), "≥ 85"),
    Target("no attention: BLEU on 31+ words", _bleu("bottleneck", "none", "31+"),
           _times(0.5, _bleu("bottleneck", "none", "1-10")), "≤ 0.5 × its 1-10", at_most=True),
    Target("Bahdanau: BLEU overall", _bleu("bottleneck", "bahdanau"), _constant(95.0), "≥ 95"),
    Target("Bahdanau: BLEU on 31+ words", _bleu("bottleneck", "bahdanau", "31+"),
           _times(0.95, _bleu("bottleneck", "bahdanau", "1-10")), "≥ 0.95 × its 1-10"),
    Target("Bahdanau: BLEU on 31+ words vs no attention", _bleu("bottleneck", "bahdanau", "31+"),
           _times(2.5, _bleu("bottleneck", "none", "31+")), "≥ 2.5 × no attention's 31+"),
    Target("Bahdanau: alignment accuracy", _alignment("bahdanau"), _constant(0.9), "≥ 0.9"),
    Target("Luong general: alignment accuracy", _alignment("luong-general"), _constant(0.9),
           "≥ 0.9"),
    Target("digit strips: exact match", _caption("digits", "exact_match"), _constant(0.95),
           "≥ 0.95"),
    Target("digit strips: localisation", _caption("digits", "localization"), _constant(0.95),
           "≥ 0.95"),
    Target("shape scenes: exact match", _caption("shapes", "exact_match"), _constant(0.80),
           "≥ 0.80"),
    Target("shape scenes: localisation", _caption("shapes", "localization"), _constant(0.80),
           "≥ 0.80"),
    Target("Transformer: BLEU overall", _bleu("transformer", "transformer"), _constant(95.0),
           "≥ 95"),
    Target("Transformer: BLEU on 31+ words", _bleu("transformer", "transformer", "31+"),
           _times(0.95, _bleu("transformer", "transformer", "1-10")), "≥ 0.95 × its 1-10"),
)


def seed_targets(results: dict) -> list[tuple[Target, float | None, float | None, bool | None]]:
    """Every target checked on one seed's results: ``(target, value, bound, holds)``."""
    return [(target, *target.check(results)) for target in TARGETS]
