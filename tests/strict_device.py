"""Catching tensors created on the wrong device, without a GPU.

Inside :func:`stray_tensors_fail`, PyTorch's default device is ``meta``, so a tensor that code
creates without following its inputs (``torch.zeros(n)`` instead of ``x.new_zeros(n)`` or
``device=x.device``) lands on ``meta``; and every torch function refuses arguments on two devices.
PyTorch alone does not refuse them all: ``F.embedding`` with ``meta`` indices and CPU weights
quietly returns a CPU tensor.
"""

from contextlib import contextmanager

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves


class _OneDevicePerCall(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        devices = {t.device for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        if len(devices) > 1:
            raise RuntimeError(f"{getattr(func, '__name__', func)} got tensors on "
                               f"{sorted(map(str, devices))}: one was made on the wrong device")
        return func(*args, **kwargs)


@contextmanager
def stray_tensors_fail():
    with torch.device("meta"), _OneDevicePerCall():
        yield
