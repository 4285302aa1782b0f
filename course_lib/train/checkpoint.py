"""Checkpoints that hold a model's dataclass config and its weights, and load safely.

Convention: every course model is built from one dataclass config, ``Model(config)``, and names
that class in a ``config_class`` attribute. A checkpoint is a plain dict of tensors and Python
primitives, so it loads with ``torch.load(..., weights_only=True)`` (no pickled code runs)::

    {"format": 1, "model_class": "course_lib.models.toy.ToyClassifier",
     "config": {...asdict(config)...}, "state_dict": {...}, "extra": {...}}
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

FORMAT_VERSION = 1
# Modules whose models moved: a checkpoint that names a class under the old module loads into
# the same class under the new one (the weights and the config are unchanged by the move).
MOVED_MODULES = {
    "course_lib.seq2seq": "course_lib.models.seq2seq",
    "course_lib.attention_seq2seq": "course_lib.models.attention_seq2seq",
    "course_lib.captioning": "course_lib.models.captioner",
    "course_lib.transformer": "course_lib.models.transformer",
    "course_lib.hard_attention": "course_lib.models.pointer",
    "course_lib.toy": "course_lib.models.toy",
}
# Classes renamed in place: a checkpoint that names the old class loads as the new one.
RENAMED_CLASSES = {
    "course_lib.models.pointer.HardAttentionConfig": "course_lib.models.pointer.PointerConfig",
}
PRIMITIVES = (bool, int, float, str, type(None))

M = TypeVar("M", bound=nn.Module)


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded into the model asked for."""


def qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def current_name(saved: str) -> str:
    """The class path a checkpoint's ``model_class`` or ``config_class`` names today
    (:data:`MOVED_MODULES`, :data:`RENAMED_CLASSES`)."""
    module, _, name = saved.rpartition(".")
    moved = f"{MOVED_MODULES.get(module, module)}.{name}"
    return RENAMED_CLASSES.get(moved, moved)


def _check_plain(value: Any, where: str) -> None:
    """Refuse what ``weights_only=True`` could not load back (only primitives and containers)."""
    if isinstance(value, PRIMITIVES) or isinstance(value, torch.Tensor):
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_plain(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, (str, int)):
                raise TypeError(f"{where} has a key of type {type(key).__name__}; use str or int")
            _check_plain(item, f"{where}[{key!r}]")
        return
    raise TypeError(
        f"{where} is a {type(value).__name__}; a checkpoint may hold only tensors, numbers, "
        f"strings, None, lists, tuples and dicts (so that it loads with weights_only=True)."
    )


def save_checkpoint(
    path: str | os.PathLike, model: nn.Module, config: Any, extra: dict | None = None
) -> Path:
    """Save ``model``'s weights (on CPU) with its dataclass ``config`` and optional ``extra``."""
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise TypeError(f"config must be a dataclass instance, got {type(config).__name__}")
    config_dict = dataclasses.asdict(config)
    _check_plain(config_dict, "config")
    extra = dict(extra or {})
    _check_plain(extra, "extra")
    payload = {
        "format": FORMAT_VERSION,
        "model_class": qualified_name(type(model)),
        "config_class": qualified_name(type(config)),
        "config": config_dict,
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "extra": extra,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # two processes never share one
    torch.save(payload, tmp)
    os.replace(tmp, path)  # atomic: a crash never leaves half a checkpoint under the real name
    return path


def read_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """The raw checkpoint dict, loaded on CPU with ``weights_only=True``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises several types for corrupt or foreign files
        raise CheckpointError(f"{path} is not a readable course checkpoint: {error}") from error
    missing = {"format", "model_class", "config", "state_dict"} - set(payload)
    if not isinstance(payload, dict) or missing:
        raise CheckpointError(f"{path} is not a course checkpoint (missing {sorted(missing)})")
    return payload


def load_checkpoint(path: str | os.PathLike, model_class: type[M]) -> tuple[M, dict[str, Any]]:
    """Rebuild ``model_class(config)`` from a checkpoint; returns ``(model, extra)``.

    The model is on the CPU in eval mode; move it with ``model.to(get_device())``. A checkpoint of
    another model, a config that no longer fits the class, or weights of the wrong shapes each
    raise :class:`CheckpointError` saying what differs.
    """
    payload = read_checkpoint(path)
    expected = qualified_name(model_class)
    if current_name(payload["model_class"]) != expected:
        raise CheckpointError(
            f"{path} holds a {payload['model_class']} checkpoint, not a {expected}; "
            f"load it with that class."
        )
    config_class = getattr(model_class, "config_class", None)
    if config_class is None or not dataclasses.is_dataclass(config_class):
        raise TypeError(f"{expected} needs a dataclass `config_class` attribute to be loaded")
    saved_config = payload.get("config_class")
    if saved_config is not None and current_name(saved_config) != qualified_name(config_class):
        raise CheckpointError(f"{path} holds a {saved_config} config, not the "
                              f"{qualified_name(config_class)} that {expected} is built from")
    known = {field.name for field in dataclasses.fields(config_class)}
    unknown = sorted(set(payload["config"]) - known)
    if unknown:
        raise CheckpointError(
            f"{path}: the saved config has fields {unknown} that {config_class.__name__} lacks"
        )
    config = config_class(**payload["config"])
    model = model_class(config)
    try:
        result = model.load_state_dict(payload["state_dict"], strict=False)
    except RuntimeError as error:  # shapes differ
        raise CheckpointError(f"{path} does not fit {expected}: {error}") from error
    problems = []
    if result.missing_keys:
        problems.append(f"missing weights {result.missing_keys}")
    if result.unexpected_keys:
        problems.append(f"unexpected weights {result.unexpected_keys}")
    if problems:
        raise CheckpointError(f"{path} does not fit {expected}: " + "; ".join(problems))
    model.eval()
    return model, payload.get("extra", {})
