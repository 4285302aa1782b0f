"""Checkpoints: a model saved with its config loads back exactly, with ``weights_only=True``, and
every way a load can go wrong is explained."""

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch import nn

from course_lib.models.toy import ToyClassifier, ToyConfig
from course_lib.train.checkpoint import (
    CheckpointError,
    load_checkpoint,
    read_checkpoint,
    save_checkpoint,
)


@dataclass
class OtherConfig:
    width: int = 3


class OtherModel(nn.Module):
    config_class = OtherConfig

    def __init__(self, config):
        super().__init__()
        self.layer = nn.Linear(config.width, config.width)


def test_round_trip_restores_config_weights_and_outputs(tmp_path):
    torch.manual_seed(0)
    config = ToyConfig(hidden=12, layers=3)
    model = ToyClassifier(config)
    path = save_checkpoint(tmp_path / "sub" / "toy.pt", model, config, extra={"epoch": 4})
    loaded, extra = load_checkpoint(path, ToyClassifier)
    assert loaded.config == config
    assert extra == {"epoch": 4}
    x = torch.randn(5, 2)
    assert torch.equal(loaded(x), model.eval()(x))
    assert not loaded.training


def test_checkpoint_loads_with_weights_only(tmp_path):
    config = ToyConfig()
    path = save_checkpoint(tmp_path / "toy.pt", ToyClassifier(config), config)
    payload = torch.load(path, weights_only=True)  # must not need any pickled class
    assert payload["model_class"] == "course_lib.models.toy.ToyClassifier"
    assert payload["config"] == {"in_features": 2, "hidden": 64, "layers": 2, "classes": 2}
    assert not list(tmp_path.glob("*.tmp"))  # written atomically, nothing left behind


def test_loading_another_models_checkpoint_names_both(tmp_path):
    config = OtherConfig()
    path = save_checkpoint(tmp_path / "other.pt", OtherModel(config), config)
    with pytest.raises(CheckpointError, match=r"holds a .*OtherModel checkpoint, not a "
                                              r"course_lib\.models\.toy\.ToyClassifier"):
        load_checkpoint(path, ToyClassifier)


def test_weights_of_the_wrong_shape_are_explained(tmp_path):
    config = ToyConfig(hidden=8)
    path = save_checkpoint(tmp_path / "toy.pt", ToyClassifier(config), config)
    payload = torch.load(path, weights_only=True)
    payload["config"]["hidden"] = 16  # config and weights now disagree
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match="size mismatch"):
        load_checkpoint(path, ToyClassifier)


def test_missing_weights_and_unknown_config_fields(tmp_path):
    config = ToyConfig()
    path = save_checkpoint(tmp_path / "toy.pt", ToyClassifier(config), config)
    payload = torch.load(path, weights_only=True)
    payload["state_dict"].pop("net.0.weight")
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match=r"missing weights \['net.0.weight'\]"):
        load_checkpoint(path, ToyClassifier)
    payload["config"]["dropout"] = 0.1
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match=r"\['dropout'\].*ToyConfig lacks"):
        load_checkpoint(path, ToyClassifier)


def test_not_a_checkpoint(tmp_path):
    junk = tmp_path / "junk.pt"
    junk.write_text("hello")
    with pytest.raises(CheckpointError, match="not a readable course checkpoint"):
        read_checkpoint(junk)
    torch.save({"weights": torch.ones(1)}, tmp_path / "foreign.pt")
    with pytest.raises(CheckpointError, match="missing"):
        read_checkpoint(tmp_path / "foreign.pt")
    with pytest.raises(FileNotFoundError):
        read_checkpoint(tmp_path / "absent.pt")


def test_config_must_be_a_plain_dataclass(tmp_path):
    model = ToyClassifier(ToyConfig())
    with pytest.raises(TypeError, match="dataclass instance"):
        save_checkpoint(tmp_path / "x.pt", model, {"hidden": 64})
    with pytest.raises(TypeError, match=r"extra\['fn'\] is a builtin_function"):
        save_checkpoint(tmp_path / "x.pt", model, ToyConfig(), extra={"fn": print})


def test_a_checkpoint_saved_before_the_models_moved_still_loads(tmp_path):
    """Models saved when ToyClassifier lived in course_lib.toy load into the class it is now;
    a class path that never existed is still refused."""
    torch.manual_seed(0)
    config = ToyConfig(hidden=6)
    model = ToyClassifier(config)
    path = save_checkpoint(tmp_path / "old.pt", model, config)
    payload = torch.load(path, weights_only=True)
    payload["model_class"] = "course_lib.toy.ToyClassifier"
    torch.save(payload, path)
    loaded, _ = load_checkpoint(path, ToyClassifier)
    x = torch.randn(3, 2)
    assert torch.equal(loaded(x), model.eval()(x))
    payload["model_class"] = "course_lib.nowhere.ToyClassifier"
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match=r"course_lib\.nowhere\.ToyClassifier"):
        load_checkpoint(path, ToyClassifier)



def test_two_processes_saving_the_same_checkpoint_write_different_temporary_files(
        tmp_path, monkeypatch):
    """Notebooks run in parallel in CI, and two lessons may train the same model at once: each
    process writes a temporary file of its own and renames it, so neither can rename (or
    truncate) the other's."""
    import os

    from course_lib.train import checkpoint

    renamed = []
    real_replace = os.replace
    monkeypatch.setattr(checkpoint.os, "replace",
                        lambda source, target: (renamed.append(Path(source).name),
                                                real_replace(source, target)))
    model = ToyClassifier(ToyConfig(hidden=8))
    for pid in (111, 222):
        monkeypatch.setattr(checkpoint.os, "getpid", lambda pid=pid: pid)
        save_checkpoint(tmp_path / "same.pt", model, model.config)
    assert renamed[0] != renamed[1] and "111" in renamed[0] and "222" in renamed[1]
    assert [p.name for p in tmp_path.iterdir()] == ["same.pt"]  # no temporary file left
    load_checkpoint(tmp_path / "same.pt", ToyClassifier)
