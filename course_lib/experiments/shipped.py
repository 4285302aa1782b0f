"""The reference models that ship with the course, in ``reference-models/``.

Each is the seed's model behind the published results, saved as ``course reproduce`` saves it
(:func:`course_lib.train.checkpoint.save_checkpoint`: tensors and plain values, loaded with
``weights_only=True``, so loading runs no pickled code). ``reference-models/manifest.json`` lists
them: file, sha256, size, the experiment and model, the seed, the key of the settings that made
it, the command that rebuilds it and its test-split metrics.

A lesson (``reuse=True``) loads a shipped model when its settings key is the key of the
settings the code builds now; a file whose key differs is refused with the command that
rebuilds it, and a file whose bytes differ from its sha256 is refused as damaged.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from course_lib.experiments.runs import MODEL_CACHE, load_saved
from course_lib.paths import COURSE_ROOT
from course_lib.profile import get_profile

SHIPPED_DIR = COURSE_ROOT / "reference-models"
MANIFEST = "manifest.json"


class ShippedModelError(RuntimeError):
    """A shipped model that must not be used: stale settings or damaged bytes."""


def settings_key(settings) -> str:
    """A digest of a settings tree (a dataclass): equal trees, equal keys, on any machine."""
    text = json.dumps(asdict(settings), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class ShippedModel:
    """One manifest entry."""

    experiment: str
    model: str
    seed: int
    file: str
    sha256: str
    bytes: int
    settings_key: str
    command: str
    metrics: dict
    torch: str
    profile: str = "full"
    outputs_sha256: str | None = None  # outputs_digest of its test-split outputs

    @property
    def label(self) -> str:
        return f"{self.experiment} {self.model} (seed {self.seed})"


def outputs_digest(outputs: list[str]) -> str:
    """The sha256 of a model's outputs on its test split, one per line: the same digest, the
    same outputs, word for word."""
    return hashlib.sha256("\n".join(outputs).encode()).hexdigest()


def outputs_on_test_split(run, model: str) -> list[str]:
    """What ``model`` of ``run`` produced on its test split: its greedy translations, or its
    greedy captions (words joined by spaces)."""
    if hasattr(run, "evaluations"):  # a captioning run
        return [" ".join(caption) for caption in run.evaluations[model]["captions"]]
    return run.hypotheses[model] if isinstance(run.hypotheses, dict) else run.hypotheses


def read_manifest(folder: Path | None = None) -> dict[tuple[str, str, int], ShippedModel]:
    """The manifest's entries by ``(experiment, model, seed)``; empty without a manifest."""
    path = Path(folder or SHIPPED_DIR) / MANIFEST
    if not path.is_file():
        return {}
    entries = [ShippedModel(**entry) for entry in json.loads(path.read_text())["models"]]
    return {(e.experiment, e.model, e.seed): e for e in entries}


def write_manifest(entries: dict[tuple[str, str, int], ShippedModel],
                   folder: Path | None = None) -> Path:
    path = Path(folder or SHIPPED_DIR) / MANIFEST
    ordered = [asdict(entries[key]) for key in sorted(entries)]
    path.write_text(json.dumps({"models": ordered}, indent=2) + "\n")
    return path


def shipped_checkpoint(experiment: str, model: str, settings,
                       folder: Path | None = None) -> tuple[Path, ShippedModel] | None:
    """The shipped file of ``experiment``'s ``model`` for ``settings`` (its seed), checked:
    None when none ships for that seed; :class:`ShippedModelError` when the one that ships was
    made with other settings (naming the command that rebuilds it) or its bytes are not the
    manifest's."""
    entry = read_manifest(folder).get((experiment, model, settings.seed))
    if entry is None or entry.profile != get_profile():
        return None
    if entry.settings_key != settings_key(settings):
        raise ShippedModelError(
            f"the shipped {entry.label} was made with other settings than the code builds now "
            f"(key {entry.settings_key}, now {settings_key(settings)}); rebuild it with "
            f"`{entry.command} --ship`, or train it yourself")
    path = Path(folder or SHIPPED_DIR) / entry.file
    if not path.is_file() or path.stat().st_size != entry.bytes or \
            file_sha256(path) != entry.sha256:
        raise ShippedModelError(f"{path} is missing or damaged: its sha256 is not the "
                                f"manifest's; restore it with git, or rebuild it with "
                                f"`{entry.command} --ship`")
    return path, entry


TRAIN_VARIABLE = "COURSE_TRAIN"


def use_shipped(train_yourself: bool = False) -> bool:
    """Whether a lesson loads the shipped models: yes, unless it sets ``TRAIN_YOURSELF`` or
    the environment sets ``COURSE_TRAIN=1`` (every lesson of a run trains its own)."""
    return not (train_yourself or os.environ.get(TRAIN_VARIABLE, "") == "1")


HEADLINE_METRICS = ("BLEU overall", "alignment accuracy", "exact match", "localisation")


def _headline(metrics: dict) -> dict:
    return {name: value for name, value in metrics.items() if name in HEADLINE_METRICS}


def _metrics_text(metrics: dict) -> str:
    shown = [f"{name} {value:.3f}" if abs(value) <= 1 else f"{name} {value:.1f}"
             for name, value in metrics.items() if isinstance(value, (int, float))]
    return ", ".join(shown)


def reference_loader(experiment: str, model: str, settings, model_class: type[torch.nn.Module],
                     device: torch.device, folder: Path | None = None
                     ) -> Callable[[], object]:
    """For :func:`~course_lib.experiments.runs.train_or_load`: the shipped model of
    ``experiment``'s ``model`` for ``settings`` and its saved record, with one line saying what
    was loaded; None (the model is then trained) where none ships for these settings. A stale or
    damaged file is reported, with the command that rebuilds it, and not loaded."""
    def load():
        try:
            found = shipped_checkpoint(experiment, model, settings, folder)
        except ShippedModelError as error:
            print(f"NOTE: {error}; training it instead.", file=sys.stderr)
            return None
        if found is None:
            return None
        path, entry = found
        loaded = load_saved(path, model_class, device)
        if loaded is not None:
            steps = entry.metrics.get("steps")
            print(f"{entry.label}: loaded the shipped reference model, {steps:,} optimiser "
                  f"steps, test {_metrics_text(_headline(entry.metrics['test']))} "
                  f"({SHIPPED_DIR.name}/{entry.file}; TRAIN_YOURSELF = True trains it here)")
        return loaded
    return load


MAX_FILE_BYTES = 5 * 10**6  # each shipped file
MAX_TOTAL_BYTES = 25 * 10**6  # every shipped file together


def ship(experiment, model: str, seed: int, record: dict, folder: Path | None = None,
         cache_dir: Path = MODEL_CACHE, outputs: list[str] | None = None) -> ShippedModel:
    """Copy the model ``course reproduce`` saved for ``experiment``'s ``model`` and ``seed``
    (in the active profile) into ``folder`` and list it in the manifest with ``record``'s
    test metrics and the digest of its ``outputs`` (:func:`outputs_on_test_split`); refuses a
    file over :data:`MAX_FILE_BYTES` or a total over :data:`MAX_TOTAL_BYTES`."""
    folder = Path(folder or SHIPPED_DIR)
    settings = experiment.settings(model, seed)
    source = experiment.checkpoint(model, settings, cache_dir)
    if not source.is_file():
        raise FileNotFoundError(f"no saved model at {source}: run `course reproduce` first")
    data = source.read_bytes()
    entries = read_manifest(folder)
    others = sum(e.bytes for key, e in entries.items() if key != (experiment.name, model, seed))
    if len(data) > MAX_FILE_BYTES or others + len(data) > MAX_TOTAL_BYTES:
        raise ValueError(f"{experiment.name} {model}: {len(data):,} bytes would exceed the "
                         f"budget ({MAX_FILE_BYTES:,} per file, {MAX_TOTAL_BYTES:,} in all; "
                         f"{others:,} shipped already)")
    option = f" --{experiment.model_option} {model}" if len(experiment.models) > 1 else ""
    entry = ShippedModel(
        experiment=experiment.name, model=model, seed=seed,
        file=f"{experiment.name}-{model}-seed{seed}.pt", sha256=hashlib.sha256(data).hexdigest(),
        bytes=len(data), settings_key=settings_key(settings),
        command=f"course reproduce {experiment.name}{option} --seed {seed}",
        metrics={"steps": record["steps"],
                 "test": {label.split(": ", 1)[-1]: value
                          for label, value in experiment.metrics(model, record)
                          if value is not None}},
        torch=torch.__version__, profile=get_profile(),
        outputs_sha256=None if outputs is None else outputs_digest(outputs))
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / entry.file).write_bytes(data)
    entries[experiment.name, model, seed] = entry
    write_manifest(entries, folder)
    return entry


# The models the lessons load (seed 0, full profile): each must ship, with the key of the
# settings the code builds now.
LESSON_MODELS = (("bottleneck", "none"), ("bottleneck", "bahdanau"),
                 ("bottleneck", "luong-general"), ("captioning", "digits"),
                 ("captioning", "shapes"), ("transformer", "transformer"))


def check_shipped(experiment, model: str, seed: int, folder: Path | None = None) -> list[str]:
    """Train ``experiment``'s ``model`` with ``seed`` from scratch (no cache, no shipped model)
    and compare it with the shipped file, tensor by tensor: the names of the tensors that are
    not bit for bit the same (empty when the whole model is)."""
    settings = experiment.settings(model, seed)
    found = shipped_checkpoint(experiment.name, model, settings, folder)
    if found is None:
        raise ValueError(f"no {experiment.name} {model} for seed {seed} ships in the "
                         f"{get_profile()} profile")
    shipped_state = torch.load(found[0], map_location="cpu", weights_only=True)["state_dict"]
    run = experiment.reproduce((model,), seed, None, cache_dir=None)
    trained = run.models[model] if hasattr(run, "models") else run.model
    state = {name: tensor.detach().cpu() for name, tensor in trained.state_dict().items()}
    differ = sorted(set(state) ^ set(shipped_state))
    differ += [name for name in sorted(set(state) & set(shipped_state))
               if not torch.equal(state[name], shipped_state[name])]
    return differ
