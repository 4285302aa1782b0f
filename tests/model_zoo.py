"""Every nn.Module in course_lib, with tiny inputs, for the device-agnostic tests.

A new model class in course_lib must be added here: tests/test_device_agnostic.py fails for any
nn.Module subclass of the package that this table does not cover.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from course_lib.seq2seq import Decoder, Encoder, ScratchRNNCell, Seq2Seq, Seq2SeqConfig
from course_lib.toy import ToyClassifier, ToyConfig

SEQ = Seq2SeqConfig(12, 14, embed_dim=6, hidden_size=8)
SEQ_LSTM_BI = Seq2SeqConfig(12, 14, embed_dim=6, hidden_size=8, cell="lstm", bidirectional=True)


def tokens(device, shape, high):
    return torch.randint(4, high, shape).to(device)


@dataclass
class ZooEntry:
    model_class: type[nn.Module]
    build: Callable[[], nn.Module]
    inputs: Callable[[torch.device], tuple]


ZOO = [
    ZooEntry(ToyClassifier, lambda: ToyClassifier(ToyConfig(hidden=8)),
             lambda device: (torch.randn(4, 2, device=device),)),
    ZooEntry(ScratchRNNCell, lambda: ScratchRNNCell(5, 7),
             lambda device: (torch.randn(3, 5, device=device), torch.zeros(3, 7, device=device))),
    # Packed sequences need their lengths on the CPU, so the meta check runs unpadded batches.
    ZooEntry(Encoder, lambda: Encoder(SEQ_LSTM_BI), lambda device: (tokens(device, (2, 5), 12),)),
    ZooEntry(Decoder, lambda: Decoder(SEQ),
             lambda device: (tokens(device, (2, 4), 14), torch.randn(2, 8, device=device))),
    ZooEntry(Seq2Seq, lambda: Seq2Seq(SEQ),
             lambda device: (tokens(device, (2, 5), 12), None, tokens(device, (2, 4), 14))),
]
