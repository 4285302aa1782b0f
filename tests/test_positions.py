"""Positional encodings: the sinusoid formula, the relative-offset property, bad input."""

import math

import pytest
import torch

from course_lib.nn.positions import (
    LearnedPositions,
    SinusoidalPositions,
    offset_rotation,
    sinusoidal_table,
)


def test_table_entries_are_the_formula():
    table = sinusoidal_table(50, 16)
    for p, i in [(0, 0), (7, 0), (7, 3), (49, 7)]:
        omega = 10000 ** (-2 * i / 16)
        assert table[p, 2 * i].item() == pytest.approx(math.sin(p * omega), abs=1e-6)
        assert table[p, 2 * i + 1].item() == pytest.approx(math.cos(p * omega), abs=1e-6)


@pytest.mark.parametrize("offset", [1, 5, 17])
def test_an_offset_is_one_rotation_whatever_the_position(offset):
    table = sinusoidal_table(100, 32)
    rotation = offset_rotation(offset, 32)
    shifted = table[:100 - offset] @ rotation.T  # row p: M_δ PE[p]
    torch.testing.assert_close(shifted, table[offset:], atol=1e-5, rtol=0)
    # A rotation: lengths kept, so PE[p]·PE[p+k] depends on k only.
    dots = (table[:100 - offset] * table[offset:]).sum(-1)
    torch.testing.assert_close(dots, dots[:1].expand_as(dots), atol=1e-4, rtol=0)
    torch.testing.assert_close(rotation @ rotation.T, torch.eye(32), atol=1e-6, rtol=0)


@pytest.mark.parametrize("kind", [SinusoidalPositions, LearnedPositions])
def test_positions_are_added_from_the_offset(kind):
    module = kind(8, 20)
    x = torch.zeros(2, 3, 8)
    out = module(x, offset=4)
    table = module.table if kind is SinusoidalPositions else module.table.weight
    torch.testing.assert_close(out, table[4:7].expand(2, 3, 8))


@pytest.mark.parametrize("kind", [SinusoidalPositions, LearnedPositions])
def test_positions_reject_bad_input(kind):
    module = kind(8, 10)
    with pytest.raises(ValueError, match=r"\(B, T, 8\)"):
        module(torch.zeros(2, 3, 6))
    with pytest.raises(ValueError, match="beyond max_len = 10"):
        module(torch.zeros(1, 4, 8), offset=8)
    with pytest.raises(ValueError, match="even d_model"):
        sinusoidal_table(5, 7)
