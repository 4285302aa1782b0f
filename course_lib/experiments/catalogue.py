"""The course's experiments: the one :class:`~course_lib.experiments.registry.Registry` that the
command line, ``course reproduce``, ``course results``, the results page and the lessons read.

Adding an experiment is its module (settings, training, measuring, its ``EXPERIMENT``
declaration) and one line here; ``docs/contributing.md`` walks through an example.
"""

from __future__ import annotations

from pathlib import Path

from course_lib.experiments import bottleneck, captioning, transformer
from course_lib.experiments.registry import Registry
from course_lib.experiments.results_page import load_seeds
from course_lib.experiments.runs import DEFAULT_SEED, RESULTS_DIR

REGISTRY = Registry()
REGISTRY.add(bottleneck.EXPERIMENT)
REGISTRY.add(captioning.EXPERIMENT)
REGISTRY.add(transformer.EXPERIMENT)


def measured_records(experiment: str, seed: int = DEFAULT_SEED, results_dir: Path = RESULTS_DIR
             ) -> dict[str, dict]:
    """The committed full-profile records of every model of ``experiment`` measured with
    ``seed`` (``results/seed-N/EXPERIMENT*.json``), keyed by model name: what a lesson can show
    without training. Empty when nothing was measured with that seed."""
    REGISTRY[experiment]  # an unknown name fails here, naming the choices
    return load_seeds(results_dir, REGISTRY).get(seed, {}).get(experiment, {}).get("models", {})
