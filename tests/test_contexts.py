"""Lesson 03's cost of a wider context vector: the counts are the model's, exactly, and the
recurrent matrices grow with the square of the width while the whole model grows less."""

import pytest

from course_lib.lessons.contexts import width_costs
from course_lib.models.seq2seq import Seq2SeqConfig

V_SRC, V_TGT, E, H, B, S, T = 11, 13, 6, 10, 3, 5, 4


def forward_multiply_adds(h: int) -> int:
    """The matrix products of one forward pass of the hand-over 'both' model, by hand: the
    encoder GRU (3h × (E + h) per token), the decoder GRU (its input is [E[y]; c]), W_init and
    the output layer."""
    return (B * S * 3 * h * (E + h) + B * T * 3 * h * (E + 2 * h) + B * h * h
            + B * T * V_TGT * h)


def test_width_costs_count_the_model_exactly():
    rows = width_costs(Seq2SeqConfig(V_SRC, V_TGT, E, H), batch=B, source=S, target=T,
                       repeats=1)
    assert [row["H"] for row in rows] == [H, 2 * H]
    for row in rows:
        h = row["H"]
        assert row["recurrent matrices"] == 2 * 3 * h * h  # encoder and decoder W_hh
        # backward: two products per forward product (the gradients of both factors), except
        # for the encoder's first step, whose zero initial state needs no gradient
        assert row["multiply-adds per step"] == 3 * forward_multiply_adds(h) - B * 3 * h * h
        assert row["seconds per step"] > 0
    small, wide = rows
    assert wide["recurrent matrices"] == 4 * small["recurrent matrices"]
    assert 2 < wide["parameters"] / small["parameters"] < 4


def test_width_costs_need_a_wider_model():
    with pytest.raises(ValueError, match="factor must be an int >= 2"):
        width_costs(Seq2SeqConfig(V_SRC, V_TGT, E, H), factor=1)
