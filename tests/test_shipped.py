"""experiments/shipped.py: the reference models that ship with the course. A model is shipped
with its sha256, size, settings key, command and test metrics; a lesson loads it instead of
training; a stale, damaged, oversized or code-carrying file is refused; training it yourself
gives it bit for bit; and every model the repository ships measures what its manifest and
results/seed-0 say."""

import json
import os
import pickle
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from course_lib.experiments import shipped
from course_lib.experiments.bottleneck import (
    BottleneckSettings,
    bottleneck_training,
    reproduce_bottleneck,
)
from course_lib.experiments.catalogue import REGISTRY, measured_records
from course_lib.experiments.shipped import (
    SHIPPED_DIR,
    ShippedModelError,
    read_manifest,
    settings_key,
    ship,
    shipped_checkpoint,
)
from course_lib.experiments.translation import (
    evaluate_alignment,
    evaluate_translator,
    translator_class,
)
from course_lib.seeding import fixed_threads

ROOT = Path(__file__).resolve().parent.parent
BOTTLENECK = REGISTRY["bottleneck"]


@pytest.fixture(scope="module")
def shipped_none(tmp_path_factory):
    """The fast profile's no-attention model, trained once and shipped into a folder of its own."""
    base = tmp_path_factory.mktemp("shipped")
    cache, folder = base / "cache", base / "reference-models"
    run = reproduce_bottleneck("none", seed=0, progress=False, cache_dir=cache)
    entry = ship(BOTTLENECK, "none", 0, run.result["models"]["none"], folder, cache,
                 outputs=shipped.outputs_on_test_split(run, "none"))
    return run, entry, folder, cache


def test_a_shipped_model_is_listed_with_what_made_it_and_what_it_measures(shipped_none):
    run, entry, folder, _ = shipped_none
    record = run.result["models"]["none"]
    assert read_manifest(folder) == {("bottleneck", "none", 0): entry}
    data = (folder / entry.file).read_bytes()
    assert entry.bytes == len(data) and entry.sha256 == shipped.hashlib.sha256(data).hexdigest()
    assert entry.settings_key == settings_key(run.settings["none"])
    assert entry.command == "course reproduce bottleneck --model none --seed 0"
    assert entry.metrics["steps"] == record["steps"] == bottleneck_training().steps
    assert entry.metrics["test"]["BLEU overall"] == record["bleu"]
    assert entry.metrics["test"]["BLEU 31+"] == record["bleu_by_length"]["31+"]
    assert entry.torch == torch.__version__ and entry.profile == "fast"
    assert entry.outputs_sha256 == shipped.outputs_digest(run.hypotheses["none"])
    assert len(run.hypotheses["none"]) == len(run.corpus.test)


def test_a_lesson_loads_the_shipped_model_and_says_so_in_one_line(shipped_none, monkeypatch,
                                                                    capsys, tmp_path):
    run, entry, folder, _ = shipped_none
    monkeypatch.setattr(shipped, "SHIPPED_DIR", folder)
    loaded = reproduce_bottleneck("none", seed=0, progress=False, reuse=True, use_shipped=True,
                                  cache_dir=tmp_path / "empty-cache")
    out = capsys.readouterr().out.strip().splitlines()
    said = [line for line in out if "shipped reference model" in line]
    assert len(said) == 1 and said[0].startswith("bottleneck none (seed 0): loaded the shipped")
    assert f"{entry.metrics['steps']:,} optimiser steps" in said[0] and entry.file in said[0]
    assert "BLEU overall" in said[0] and "TRAIN_YOURSELF = True" in said[0]
    # The weights are the shipped ones, and re-measured they give the shipped numbers.
    for name, tensor in run.model.state_dict().items():
        assert torch.equal(tensor.cpu(), loaded.model.state_dict()[name].cpu()), name
    assert loaded.result["models"]["none"]["bleu"] == entry.metrics["test"]["BLEU overall"]


def test_stale_damaged_and_oversized_files_are_refused(shipped_none, monkeypatch, tmp_path):
    _, entry, folder, cache = shipped_none
    settings = BottleneckSettings.build("none", 0)
    assert shipped_checkpoint("bottleneck", "none", settings, folder)[1] == entry
    # Settings the code no longer builds: refused, naming the command that rebuilds the file.
    other = BottleneckSettings.build("none", 0, train=bottleneck_training().__class__(steps=3))
    with pytest.raises(ShippedModelError, match=r"made with other settings .* rebuild it with "
                                                r"`course reproduce bottleneck --model none "
                                                r"--seed 0 --ship`"):
        shipped_checkpoint("bottleneck", "none", other, folder)
    # Another seed has no shipped model: trained, not refused.
    assert shipped_checkpoint("bottleneck", "none", BottleneckSettings.build("none", 1),
                              folder) is None
    # One changed byte: damaged.
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "manifest.json").write_bytes((folder / "manifest.json").read_bytes())
    data = bytearray((folder / entry.file).read_bytes())
    data[len(data) // 2] ^= 1
    (damaged / entry.file).write_bytes(bytes(data))
    with pytest.raises(ShippedModelError, match="missing or damaged"):
        shipped_checkpoint("bottleneck", "none", settings, damaged)
    # Over budget: not shipped.
    monkeypatch.setattr(shipped, "MAX_FILE_BYTES", entry.bytes - 1)
    with pytest.raises(ValueError, match="would exceed the budget"):
        ship(BOTTLENECK, "none", 0, {"steps": 1, "bleu": 0.0}, tmp_path / "full", cache)


class Boom:
    """Unpickled, it would write a file: the code a hostile checkpoint could carry."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (Path.write_text, (self.path, "owned"))


def test_a_file_that_carries_code_is_not_run(shipped_none, tmp_path, capsys):
    """A shipped file whose sha256 matches its manifest but which pickles a call: loading reads
    tensors only, so the call is refused, not made."""
    _, entry, folder, _ = shipped_none
    evil = tmp_path / "evil"
    evil.mkdir()
    owned = tmp_path / "owned.txt"
    data = pickle.dumps({"format": 1, "model_class": "x", "config": {},
                         "state_dict": Boom(owned), "extra": {}})
    (evil / entry.file).write_bytes(data)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["models"][0].update(sha256=shipped.hashlib.sha256(data).hexdigest(),
                                 bytes=len(data))
    (evil / "manifest.json").write_text(json.dumps(manifest))
    load = shipped.reference_loader("bottleneck", "none", BottleneckSettings.build("none", 0),
                                    translator_class("none"), torch.device("cpu"), evil)
    assert load() is None
    assert not owned.exists()
    assert "ignoring" in capsys.readouterr().err


def test_training_it_yourself_gives_the_shipped_model_bit_for_bit(shipped_none, tmp_path):
    """A fresh process, one thread, the same seed and steps, no cache and no shipped model."""
    _, entry, folder, _ = shipped_none
    script = ("import sys, torch\n"
              "from course_lib.experiments.bottleneck import reproduce_bottleneck\n"
              "run = reproduce_bottleneck('none', seed=0, progress=False, cache_dir=None)\n"
              "torch.save(run.model.state_dict(), sys.argv[1])\n")
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "mine.pt")], check=True,
                   timeout=600, env={**os.environ, "COURSE_PROFILE": "fast"})
    mine = torch.load(tmp_path / "mine.pt", weights_only=True)
    theirs = torch.load(folder / entry.file, weights_only=True)["state_dict"]
    assert mine.keys() == theirs.keys()
    for name in mine:
        assert torch.equal(mine[name], theirs[name]), name


SHIPPED = read_manifest()


def test_the_repository_ships_its_models_within_budget():
    sizes = [entry.bytes for entry in SHIPPED.values()]
    assert all(size <= shipped.MAX_FILE_BYTES for size in sizes)
    assert sum(sizes) <= shipped.MAX_TOTAL_BYTES
    assert all(entry.outputs_sha256 for entry in SHIPPED.values()), \
        "each shipped model records the digest of its test outputs (`--ship` writes it)"
    listed = {entry.file for entry in SHIPPED.values()} | {"manifest.json"}
    if SHIPPED_DIR.is_dir():
        assert {p.name for p in SHIPPED_DIR.iterdir()} == listed  # nothing unlisted


def measured_again(experiment, run, model: str) -> tuple[dict, list[str]]:
    """``model``'s test metrics measured from its weights now, as the run that trained it
    measured them (one thread), and its outputs on the test split: translators translate the
    test split again (and attend over it), captioners are measured by the run itself whenever
    it loads one."""
    record = dict(experiment.records(run.result)[model])
    outputs = None
    if hasattr(run, "vocabs"):  # a translator: its record was stored with it, measure anew
        weights = run.models[model] if hasattr(run, "models") else run.model
        with fixed_threads(1):
            scores = evaluate_translator(weights, run.corpus.test, run.vocabs)
            outputs = scores["hypotheses"]
            record["bleu"] = round(scores["bleu"], 2)
            record["bleu_by_length"] = {k: None if v is None else round(v, 2)
                                        for k, v in scores["bleu_by_length"].items()}
            if record.get("alignment_accuracy") is not None:
                record["alignment_accuracy"] = round(
                    evaluate_alignment(weights, run.corpus.test, run.vocabs), 4)
    metrics = {label.split(": ", 1)[-1]: value
               for label, value in experiment.metrics(model, record) if value is not None}
    return metrics, outputs if outputs is not None else shipped.outputs_on_test_split(run, model)


@pytest.mark.parametrize("key", sorted(SHIPPED), ids=lambda key: f"{key[0]}-{key[1]}")
def test_each_shipped_model_measures_what_its_manifest_and_the_results_say(key, monkeypatch):
    """Loaded on the CPU and measured again on the test split (in the profile it was made in):
    the manifest's numbers, and those of results/seed-N; and its outputs there are, word for
    word, those the manifest records (a change to decoding that alters one word fails)."""
    entry = SHIPPED[key]
    monkeypatch.setenv("COURSE_PROFILE", entry.profile)
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    experiment = REGISTRY[entry.experiment]
    timing = {"step_times": False} if entry.experiment == "transformer" else {}
    run = experiment.reproduce((entry.model,), entry.seed, None, reuse=False, use_shipped=True,
                               progress=False, cache_dir=None, **timing)
    measured, outputs = measured_again(experiment, run, entry.model)
    assert shipped.outputs_digest(outputs) == entry.outputs_sha256
    assert measured == entry.metrics["test"]
    committed = measured_records(entry.experiment, entry.seed)[entry.model]
    assert {label.split(": ", 1)[-1]: value
            for label, value in experiment.metrics(entry.model, committed)
            if value is not None} == measured
    settings = run.settings[entry.model] if isinstance(run.settings, dict) else run.settings
    assert committed["settings"] == json.loads(json.dumps(asdict(settings)))


@pytest.mark.parametrize("experiment, model", shipped.LESSON_MODELS)
def test_every_model_a_lesson_loads_ships_with_the_settings_the_code_builds(experiment, model,
                                                                           monkeypatch):
    """A change to a model's settings (its config, its data, its training) without a new
    shipped file fails here, naming the command that rebuilds it."""
    monkeypatch.setenv("COURSE_PROFILE", "full")
    entry = SHIPPED.get((experiment, model, 0))
    assert entry is not None, f"no shipped {experiment} {model}: run `course reproduce " \
                              f"{experiment} ... --seed 0 --ship`"
    settings = REGISTRY[experiment].settings(model, 0)
    assert entry.settings_key == settings_key(settings), \
        f"the shipped {entry.label} is stale: run `{entry.command} --ship`"


def test_the_switch_and_the_environment_variable(monkeypatch):
    monkeypatch.delenv("COURSE_TRAIN", raising=False)
    assert shipped.use_shipped() is True and shipped.use_shipped(True) is False
    monkeypatch.setenv("COURSE_TRAIN", "1")
    assert shipped.use_shipped() is False


def test_each_lesson_that_would_train_a_shipped_model_has_the_switch():
    """A lesson's call of a reproduce_* function loads the shipped model unless the lesson's
    TRAIN_YOURSELF line says otherwise; only lesson-sized runs (their own ``steps``) train."""
    import re

    import nbformat

    calls = 0
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = [c.source for c in nbformat.read(path, as_version=4).cells
                 if c.cell_type == "code"]
        for source in cells:
            for call in re.findall(r"reproduce_(?:bottleneck|captioning|transformer)\((.*?)\)$",
                                   source, re.S | re.M):
                if "steps=" in call:
                    continue
                calls += 1
                assert "use_shipped=use_shipped(TRAIN_YOURSELF)" in call, (path.name, call)
                assert any("\nTRAIN_YOURSELF = False\n" in f"\n{s}\n" for s in cells[:2]), \
                    f"{path.name}: the switch belongs near the top"
    assert calls >= 5


def test_check_shipped_trains_again_and_compares_bit_for_bit(shipped_none, monkeypatch, tmp_path):
    _, entry, folder, _ = shipped_none
    monkeypatch.setattr(shipped, "SHIPPED_DIR", folder)
    assert shipped.check_shipped(BOTTLENECK, "none", 0) == []
    # A shipped file whose weights were changed (its manifest updated to match): caught.
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    payload = torch.load(folder / entry.file, weights_only=True)
    name = next(iter(payload["state_dict"]))
    payload["state_dict"][name] = payload["state_dict"][name] + 1e-7
    torch.save(payload, tampered / entry.file)
    data = (tampered / entry.file).read_bytes()
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["models"][0].update(sha256=shipped.hashlib.sha256(data).hexdigest(),
                                 bytes=len(data))
    (tampered / "manifest.json").write_text(json.dumps(manifest))
    assert shipped.check_shipped(BOTTLENECK, "none", 0, tampered) == [name]
    with pytest.raises(ValueError, match="no bottleneck bahdanau for seed 0 ships"):
        shipped.check_shipped(BOTTLENECK, "bahdanau", 0, tampered)
