"""Positional encodings: self-attention alone cannot tell word order (lesson 08).

Sinusoidal (Vaswani et al., 2017, section 3.5), for position p and pair index i < D / 2:

    PE[p, 2i] = sin(p ω_i),    PE[p, 2i + 1] = cos(p ω_i),    ω_i = 10000^(-2i / D).

Each pair rotates with p at its own speed, so the encoding at p + δ is a fixed rotation of the
one at p, whatever p: ``PE[p + δ] = M_δ PE[p]`` (:func:`offset_rotation`). Learned encodings are
one trained vector per position, a table E_pos (:class:`LearnedPositions`); they know nothing of
offsets and nothing beyond ``max_len``.
"""

from __future__ import annotations

import torch
from torch import nn

from course_lib.arguments import FLOATING, check_device, check_int, check_tensor


def frequencies(d_model: int) -> torch.Tensor:
    """ω_i = 10000^(-2i / D) for i = 0 … D/2 - 1. Shape: (D / 2,)."""
    if d_model < 2 or d_model % 2:
        raise ValueError(f"sinusoidal positions need an even d_model >= 2, got {d_model}")
    return torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """PE[p, 2i] = sin(p ω_i), PE[p, 2i+1] = cos(p ω_i). Shape: (max_len, D), float32."""
    positions = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (max_len, 1)
    angles = positions * frequencies(d_model)  # (max_len, D/2)
    table = torch.stack([angles.sin(), angles.cos()], dim=-1)  # (max_len, D/2, 2)
    return table.reshape(max_len, d_model).float()  # (max_len, D), sin and cos interleaved


def offset_rotation(offset: float, d_model: int) -> torch.Tensor:
    """M_δ (δ = ``offset``) with ``PE[p + δ] = M_δ PE[p]`` for every p: one 2×2 rotation per
    pair, [[cos δω_i, sin δω_i], [-sin δω_i, cos δω_i]], from sin(a + b) and cos(a + b).

    Shape: (D, D), block diagonal, float32."""
    angles = offset * frequencies(d_model)  # (D/2,)
    cos, sin = angles.cos(), angles.sin()
    blocks = torch.stack([torch.stack([cos, sin], -1), torch.stack([-sin, cos], -1)], -2)
    return torch.block_diag(*blocks).float()  # (D/2, 2, 2) blocks -> (D, D)


def _check_input(x: torch.Tensor, module: nn.Module, offset: int) -> None:
    d_model, max_len = module.d_model, module.max_len
    check_tensor("x", x, dtype=FLOATING, shape=("B", "T", d_model))
    table = module.table if isinstance(module.table, torch.Tensor) else module.table.weight
    check_device("x", x, table.device, "the module's table is")
    offset = check_int("offset", offset, minimum=0)
    if offset + x.shape[1] > max_len:
        raise ValueError(f"positions {offset} to {offset + x.shape[1] - 1} are beyond "
                         f"max_len = {max_len}; build the encoding with a larger max_len")


class SinusoidalPositions(nn.Module):
    """``x + PE[offset : offset + T]``; no parameters. Shapes: (B, T, D) -> (B, T, D)."""

    def __init__(self, d_model: int, max_len: int = 512) -> None:
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        _check_input(x, self, offset)
        return x + self.table[offset:offset + x.shape[1]].to(x.dtype)


class LearnedPositions(nn.Module):
    """``x + E_pos[offset : offset + T]`` with E_pos a trained (max_len, D) table (BERT, GPT-2)."""

    def __init__(self, d_model: int, max_len: int = 512) -> None:
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.table = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.table.weight, std=0.02)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        _check_input(x, self, offset)
        return x + self.table.weight[offset:offset + x.shape[1]]


POSITIONS = {"sinusoidal": SinusoidalPositions, "learned": LearnedPositions}
