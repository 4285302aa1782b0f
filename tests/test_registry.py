"""The registry of experiments: one declaration adds an experiment to `course reproduce` (its
help, choices, estimates and runs), to `course results` and to the results page; the drivers
name no experiment themselves; a declaration that contradicts itself is refused."""

import ast
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pytest

from course_lib.course.cli import main
from course_lib.experiments.catalogue import REGISTRY
from course_lib.experiments.registry import Experiment, Registry
from course_lib.experiments.reproduce import budget_text, estimate_seconds, planned_runs
from course_lib.experiments.runs import RunOptions, run_metadata, write_json
from course_lib.experiments.targets import Target, constant, record_value

PACKAGE = Path(__file__).resolve().parent.parent / "course_lib"


@dataclass(frozen=True)
class ToySettings:
    seed: int
    width: int
    steps: int


TOY_STEPS = {"tiny": 5, "small": 10}


def toy_settings(name: str, seed: int) -> ToySettings:
    return ToySettings(seed, {"tiny": 2, "small": 4}[name], TOY_STEPS[name])


@dataclass
class ToyRun:
    result: dict

    def table(self) -> str:
        return "\n".join(f"| {name} | {r['score']} |" for name, r in self.result["models"].items())


def reproduce_toy(models, seed, out_dir=None, *, options=None, **switches):
    """A stand-in experiment: each model's "score" is a function of its settings."""
    options = RunOptions.of(options, **switches)
    names = (models,) if isinstance(models, str) else tuple(models)
    records = {}
    for name in names:
        settings = replace(toy_settings(name, seed), steps=options.steps or TOY_STEPS[name])
        records[name] = {"score": round(0.1 * settings.width + 0.01 * seed, 3),
                         "steps": settings.steps, "epochs": 1, "wall_s": 6.0 * settings.width,
                         "settings": asdict(settings)}
    result = {"models": records, **run_metadata(seed, "cpu", options.torch_threads)}
    if out_dir is not None:
        write_json(result, Path(out_dir) / f"{TOY.result_stem(names)}.json")
    return ToyRun(result)


TOY = Experiment(
    name="toy", summary="a toy experiment declared by a test", models=("tiny", "small"),
    settings=toy_settings, steps=TOY_STEPS.__getitem__, reproduce=reproduce_toy,
    step_seconds={"tiny": 3.0, "small": 6.0}, evaluation_seconds=1.0,
    metrics=lambda name, record: [(f"{name}: score", record["score"])],
    targets=(Target("toy: tiny scores", record_value("toy", "tiny", "score"), constant(0.15),
                    "≥ 0.15"),))


@pytest.fixture
def toy():
    with REGISTRY.added(TOY):
        yield TOY
    assert "toy" not in REGISTRY.names()


def test_a_declared_experiment_is_in_the_help_and_the_choices(toy, capsys):
    with pytest.raises(SystemExit) as done:
        main(["reproduce", "--help"])
    assert done.value.code == 0
    help_text = capsys.readouterr().out
    assert "{bottleneck,captioning,transformer,toy,all}" not in help_text  # names as a metavar
    assert "toy" in help_text and "a toy experiment declared by a test" in help_text
    assert "--model: tiny, small" in help_text
    assert main(["reproduce", "toy", "--dataset", "tiny"]) == 2
    assert "--dataset is for captioning; use --model" in capsys.readouterr().err


def test_an_unregistered_experiment_is_not_a_choice(capsys):
    with pytest.raises(SystemExit) as done:
        main(["reproduce", "toy"])
    assert done.value.code == 2 and "invalid choice: 'toy'" in capsys.readouterr().err


def test_a_declared_experiment_is_estimated_from_its_steps(toy, monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "full")
    assert planned_runs("toy") == [("tiny", 5), ("small", 10)]
    assert planned_runs("toy", "small") == [("small", 10)]
    assert estimate_seconds("toy") == 5 * 3.0 + 1.0 + 10 * 6.0 + 1.0
    assert budget_text("toy", "tiny").startswith("5 optimiser steps, about 1 minute on ")
    with pytest.raises(ValueError, match="unknown model 'huge' for toy; available: tiny, small"):
        planned_runs("toy", "huge")


def test_a_declared_experiment_runs_and_reaches_the_results_page(toy, tmp_path, monkeypatch,
                                                                 capsys):
    monkeypatch.setenv("COURSE_PROFILE", "full")  # the page reports the full profile only
    assert main(["reproduce", "toy", "--seed", "2", "--out-dir", str(tmp_path)]) == 0
    assert main(["reproduce", "toy", "--model", "small", "--seed", "3",
                 "--out-dir", str(tmp_path)]) == 0
    written = json.loads((tmp_path / "seed-2" / "toy.json").read_text())
    assert written["models"]["small"]["settings"] == asdict(toy_settings("small", 2))
    assert (tmp_path / "seed-3" / "toy-small.json").is_file()
    assert "| tiny | 0.22 |" in capsys.readouterr().out
    page = tmp_path / "page.md"
    assert main(["results", "--results-dir", str(tmp_path), "--page", str(page)]) == 0
    text = page.read_text()
    assert "Seeds measured: 2, 3." in text
    assert "| toy: tiny scores | ≥ 0.15 | 0.220 ✓ | – | +0.070 | holds on the 1 seed" in text
    assert "| small: score | 2 | 0.425 | 0.420 | 0.430 |" in text
    assert "| small | 10 | 1 | 0.4 | 0.4 | 0.4 |" in text
    assert ("- **toy, small**: `course reproduce toy --model MODEL --seed N`. Settings (seed 3):"
            " `width=4`, `steps=10`.") in text


def test_the_drivers_name_no_experiment():
    # The command line, `course reproduce`, the results page and the targets read the
    # registry: none of them spells an experiment's name.
    names = set(REGISTRY.names())
    for module in ("course/cli.py", "experiments/reproduce.py", "experiments/results_page.py",
                   "experiments/targets.py", "experiments/registry.py", "experiments/runs.py"):
        tree = ast.parse((PACKAGE / module).read_text())
        spelled = {node.value for node in ast.walk(tree)
                   if isinstance(node, ast.Constant) and node.value in names}
        assert not spelled, f"{module} names the experiments {sorted(spelled)}"


def test_the_course_registry_holds_its_targets_and_runs_the_transformer_last():
    assert REGISTRY.names() == ("bottleneck", "captioning", "transformer")
    assert len(REGISTRY.targets()) == 13
    assert [[e.name for e in phase] for phase in REGISTRY.phases()] == [
        ["bottleneck", "captioning"], ["transformer"]]
    for experiment in REGISTRY:
        assert all(experiment.steps(name) > 0 for name in experiment.models), experiment.name


def declaration(**changes) -> Experiment:
    fields = {**{f: getattr(TOY, f) for f in ("name", "summary", "models", "settings", "steps",
                                               "reproduce", "step_seconds",
                                               "evaluation_seconds", "metrics")}, **changes}
    return Experiment(**fields)


@pytest.mark.parametrize("changes, message", [
    ({"name": "all"}, "a word other than 'all'"),
    ({"name": "two words"}, "a word other than 'all'"),
    ({"models": ()}, "declares no models"),
    ({"default_models": ("huge",)}, r"names models it does not declare: \['huge'\]"),
    ({"step_seconds": {"tiny": 1.0}}, r"gives no step_seconds for \['small'\]"),
    ({"step_seconds": {"tiny": 1.0, "small": 1.0, "huge": 1.0}},
     r"names models it does not declare: \['huge'\]"),
    ({"model_option": "net"}, "model_option must be 'model' or 'dataset'"),
])
def test_a_declaration_that_contradicts_itself_is_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        declaration(**changes)


def test_a_registry_refuses_a_second_name_and_an_unknown_predecessor():
    registry = Registry()
    registry.add(TOY)
    with pytest.raises(ValueError, match="already registered"):
        registry.add(TOY)
    with pytest.raises(ValueError, match=r"comes after \['nothing'\]"):
        registry.add(declaration(name="later", after=("nothing",)))
    later = registry.add(declaration(name="later", after=("toy",)))
    assert [[e.name for e in phase] for phase in registry.phases()] == [["toy"], ["later"]]
    assert later.command == "course reproduce later --model MODEL --seed N"
    with pytest.raises(ValueError, match="unknown experiment 'missing'; available: toy, later"):
        registry["missing"]


def test_the_registry_names_the_result_files_and_a_run_takes_one_options_object(toy, tmp_path):
    # One model of an experiment that declares several writes NAME-MODEL.json, several (or the
    # one model of a one-model experiment) NAME.json: the declaration decides, not the type of
    # the argument that named the models.
    assert toy.result_stem(("small",)) == "toy-small"
    assert toy.result_stem(("tiny", "small")) == "toy"
    assert declaration(models=("only",), step_seconds={"only": 1.0}).result_stem(("only",)) \
        == "toy"
    with pytest.raises(ValueError, match="at least one model"):
        toy.result_stem(())
    reproduce_toy(["small"], 1, tmp_path)
    assert (tmp_path / "toy-small.json").is_file()
    # The switches of a run are one frozen object; a keyword names one of its fields.
    options = RunOptions(steps=3, threads=2)
    assert RunOptions.of(options, reuse=True) == replace(options, reuse=True)
    assert reproduce_toy("tiny", 0, options=options).result["models"]["tiny"]["steps"] == 3
    with pytest.raises(TypeError, match="unknown run option 'settings'"):
        RunOptions.of(settings=None)
    with pytest.raises(ValueError, match="steps must be a positive int or None, got 0"):
        RunOptions(steps=0)
