"""Every nn.Module in course_lib, with tiny inputs, for the device-agnostic tests.

A new model class in course_lib must be added here: tests/test_device_agnostic.py fails for any
nn.Module subclass of the package that this table does not cover.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from course_lib.toy import ToyClassifier, ToyConfig


@dataclass
class ZooEntry:
    model_class: type[nn.Module]
    build: Callable[[], nn.Module]
    inputs: Callable[[torch.device], tuple]


ZOO = [
    ZooEntry(ToyClassifier, lambda: ToyClassifier(ToyConfig(hidden=8)),
             lambda device: (torch.randn(4, 2, device=device),)),
]
