"""Recurrent cells written out, one step each: the Elman RNN, the GRU and the LSTM.

Parameter names, shapes, gate order and initialisation follow ``torch.nn.RNNCell``,
``torch.nn.GRUCell`` and ``torch.nn.LSTMCell``, so weights copy between each pair and the
outputs agree. Shapes: ``x`` (B, input_size), states (B, hidden_size).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from course_lib.arguments import FLOATING, check_module_input, check_tensor


class _Cell(nn.Module):
    """Weights for ``gates`` blocks of ``hidden_size`` rows, uniform in ±1/√hidden_size."""

    gates = 1

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        rows = self.gates * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(rows, input_size))
        self.weight_hh = nn.Parameter(torch.empty(rows, hidden_size))
        self.bias_ih = nn.Parameter(torch.empty(rows))
        self.bias_hh = nn.Parameter(torch.empty(rows))
        bound = 1 / math.sqrt(hidden_size)
        for parameter in self.parameters():
            nn.init.uniform_(parameter, -bound, bound)

    def _check(self, x: torch.Tensor, **states: torch.Tensor | None) -> None:
        check_tensor("x", x, dtype=FLOATING)
        check_module_input("x", x, self)
        if x.dim() != 2 or x.shape[1] != self.input_size:
            raise ValueError(f"expected x of shape (B, {self.input_size}), got {tuple(x.shape)}")
        for name, state in states.items():
            if state is None:
                continue
            check_tensor(name, state, dtype=FLOATING)
            check_module_input(name, state, self)
            if state.shape != (x.shape[0], self.hidden_size):
                raise ValueError(f"expected {name}, a state of shape ({x.shape[0]}, "
                                 f"{self.hidden_size}), got {tuple(state.shape)}")

    def _zeros(self, x: torch.Tensor) -> torch.Tensor:
        return x.new_zeros(x.shape[0], self.hidden_size)


class ScratchRNNCell(_Cell):
    """The Elman RNN cell: h' = tanh(W_ih x + b_ih + W_hh h + b_hh)."""

    def forward(self, x: torch.Tensor, h: torch.Tensor | None = None) -> torch.Tensor:
        self._check(x, h=h)
        h = self._zeros(x) if h is None else h
        return torch.tanh(x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T
                          + self.bias_hh)


class ScratchGRUCell(_Cell):
    """The GRU cell (Cho et al., 2014), in the form ``torch.nn.GRUCell`` computes::

        r = σ(W_ir x + b_ir + W_hr h + b_hr)              reset gate
        z = σ(W_iz x + b_iz + W_hz h + b_hz)              update gate
        n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))     candidate state
        h' = (1 − z) ⊙ n + z ⊙ h

    The weights of the three gates are stacked in the order r, z, n."""

    gates = 3

    def forward(self, x: torch.Tensor, h: torch.Tensor | None = None) -> torch.Tensor:
        self._check(x, h=h)
        h = self._zeros(x) if h is None else h
        from_x = (x @ self.weight_ih.T + self.bias_ih).chunk(3, dim=-1)  # 3 × (B, H)
        from_h = (h @ self.weight_hh.T + self.bias_hh).chunk(3, dim=-1)  # 3 × (B, H)
        r = torch.sigmoid(from_x[0] + from_h[0])
        z = torch.sigmoid(from_x[1] + from_h[1])
        n = torch.tanh(from_x[2] + r * from_h[2])
        return (1 - z) * n + z * h


class ScratchLSTMCell(_Cell):
    """The LSTM cell (Hochreiter & Schmidhuber, 1997, with the forget gate of Gers et al., 2000),
    in the form ``torch.nn.LSTMCell`` computes::

        i = σ(W_ii x + b_ii + W_hi h + b_hi)      input gate: how much of g to write
        f = σ(W_if x + b_if + W_hf h + b_hf)      forget gate: how much of m to keep
        g = tanh(W_ig x + b_ig + W_hg h + b_hg)   candidate content
        o = σ(W_io x + b_io + W_ho h + b_ho)      output gate: how much of the memory to show
        m' = f ⊙ m + i ⊙ g,    h' = o ⊙ tanh(m')

    The weights of the four gates are stacked in the order i, f, g, o. The memory cell m (PyTorch's
    c; the course keeps c for the context) changes only by gated addition, which is what lets
    information (and gradient) survive many steps. The state is the pair ``(h, m)``."""

    gates = 4

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        h, c = (None, None) if state is None else state
        self._check(x, **{"state[0]": h, "state[1]": c})
        h = self._zeros(x) if h is None else h
        c = self._zeros(x) if c is None else c
        gates = x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T + self.bias_hh
        i, f, g, o = gates.chunk(4, dim=-1)  # 4 × (B, H)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c
