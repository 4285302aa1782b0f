"""Same seed, same numbers: a short run of every experiment, twice, in fresh processes, the
second while a run of another seed keeps a core busy beside it, gives identical metrics and
identical weights; the other seed's are different.

Training is budgeted in optimiser steps and runs on a fixed number of torch threads, so nothing
the clock or the machine's load does can change a result."""

import json
import os
import subprocess
import sys

import pytest

from course_lib.experiments.bottleneck import bottleneck_training

from .reproduce_cli import without_times

# One process: the bottleneck experiment's no-attention and Bahdanau models, the digit
# captioner and the Transformer, fast profile, nothing cached; prints every measurement and a
# digest of every trained model's weights.
RUN = r"""
import hashlib, json, sys
from course_lib.experiments.captioning import reproduce_captioning
from course_lib.experiments.bottleneck import reproduce_bottleneck
from course_lib.experiments.transformer import reproduce_transformer

def digest(model):
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode()); h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()

seed = int(sys.argv[1])
bottleneck = reproduce_bottleneck(["none", "bahdanau"], seed=seed, progress=False, cache_dir=None)
captioning = reproduce_captioning("digits", seed=seed, progress=False, cache_dir=None)
transformer = reproduce_transformer(seed=seed, progress=False, cache_dir=None, step_times=False)
print(json.dumps({
    "bottleneck": bottleneck.result, "captioning": captioning.result,
    "transformer": transformer.result,
    "histories": {"none": bottleneck.histories["none"].records,
                  "bahdanau": bottleneck.histories["bahdanau"].records,
                  "digits": captioning.histories["digits"].records,
                  "transformer": transformer.history.records},
    "weights": {**{n: digest(m) for n, m in bottleneck.models.items()},
                "digits": digest(captioning.models["digits"]),
                "transformer": digest(transformer.model)},
}))
"""


def start_run(seed: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", RUN, str(seed)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COURSE_PROFILE": "fast", "COURSE_DEVICE": "cpu"})


def finished(run: subprocess.Popen) -> dict:
    try:
        stdout, stderr = run.communicate(timeout=600)
    finally:
        run.kill()
    assert run.returncode == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs() -> dict:
    """Seed 2 alone, then seed 2 again while a run of seed 3 keeps a core busy beside it."""
    quiet = finished(start_run(2))
    loaded, beside = start_run(2), start_run(3)
    try:
        return {"quiet": quiet, "loaded": finished(loaded), "other seed": finished(beside)}
    finally:
        beside.kill()  # when the loaded run failed, its neighbour is not left running


def test_a_run_repeats_exactly_even_on_a_busy_machine(runs):
    quiet = runs["quiet"]
    assert without_times(quiet) == without_times(runs["loaded"])
    # The comparison is not vacuous: every model trained for its full step budget and the
    # histories carry real losses.
    steps = bottleneck_training().steps
    assert quiet["bottleneck"]["models"]["bahdanau"]["steps"] == steps
    assert quiet["histories"]["bahdanau"][-1]["steps"] == steps
    assert all(len(h) >= 1 and h[0]["train_loss"] > 0 for h in quiet["histories"].values())
    assert len(set(quiet["weights"].values())) == len(quiet["weights"])


def test_another_seed_gives_other_numbers(runs):
    """The runs above agree because of the seed, not because the runs ignore it."""
    first, second = runs["quiet"], runs["other seed"]
    assert first["weights"] != second["weights"]
    assert first["histories"]["bahdanau"][0]["train_loss"] != \
        second["histories"]["bahdanau"][0]["train_loss"]
