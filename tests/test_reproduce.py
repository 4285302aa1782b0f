"""`course reproduce bottleneck`: the command, its JSON, and (full profile only) its targets."""

import json
import os
import subprocess
import sys

import pytest

from course_lib.reproduce import reproduce_bottleneck


def test_command_writes_the_promised_json(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "course_lib", "reproduce", "bottleneck", "--model", "none",
         "--seed", "3", "--out-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "COURSE_PROFILE": "fast", "COURSE_DEVICE": "cpu"})
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "bottleneck-none.json").read_text())
    entry = result["models"]["none"]
    assert set(entry) >= {"bleu", "bleu_by_length", "alignment_accuracy", "params", "wall_s"}
    assert list(entry["bleu_by_length"]) == ["1-10", "11-20", "21-30", "31+"]
    assert entry["alignment_accuracy"] is None and entry["params"] > 0
    assert 0 <= entry["bleu"] <= 100 and result["seed"] == 3
    assert "BLEU" in done.stdout


def test_unknown_model_is_refused():
    with pytest.raises(ValueError, match="unknown model 'bahdanau'; available: none"):
        reproduce_bottleneck("bahdanau")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_no_attention_bleu_falls_with_length(seed, monkeypatch):
    """The headline of lesson 03, with the full 5-minute budget (run by `make test-full`)."""
    monkeypatch.setenv("COURSE_PROFILE", "full")
    entry = reproduce_bottleneck("none", seed=seed, progress=False).result["models"]["none"]
    short, long = entry["bleu_by_length"]["1-10"], entry["bleu_by_length"]["31+"]
    assert short >= 85, entry
    assert long <= 0.5 * short, entry
    assert entry["wall_s"] <= 330
