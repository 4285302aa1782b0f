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


def measured_training(experiment: str, model: str, results_dir: Path = RESULTS_DIR
                      ) -> dict | None:
    """The training minutes committed for ``model`` of ``experiment`` over every seed measured
    (what docs/results.md lists): mean, min, max, the number of seeds, and the machine and
    torch threads they were measured with. None when nothing is committed."""
    minutes, where = [], None
    for results in load_seeds(results_dir, REGISTRY).values():
        result = results.get(experiment, {})
        record = result.get("models", {}).get(model)
        if record is not None:
            minutes.append(REGISTRY[experiment].budget(model, record)[3] / 60)
            where = where or (result.get("machine", "an unnamed machine"), result.get("threads"))
    if not minutes:
        return None
    return {"mean": sum(minutes) / len(minutes), "min": min(minutes), "max": max(minutes),
            "seeds": len(minutes), "machine": where[0], "threads": where[1]}
