"""The argument checks of course_lib.arguments (the table of bad calls across the public API is
test_bad_input.py). ``check_choice``: a value from a fixed set passes through; anything else is a
ValueError that names the argument, lists the choices and shows what came."""

import pytest
import torch

from course_lib.arguments import check_choice
from course_lib.data.captions import caption_set
from course_lib.models.seq2seq import Seq2SeqConfig

IMPLEMENTATIONS = ("explicit", "fused")
LISTED = r"attention must be one of \('explicit', 'fused'\), got "


@pytest.mark.parametrize(("value", "choices"), [
    ("fused", IMPLEMENTATIONS),
    ("explicit", ["explicit", "fused"]),
    ("dot", {"dot": 1, "general": 2}),
    ("b", frozenset({"a", "b"})),
    (1, (0, 1)),
    (None, (None, "m", "p")),
], ids=["tuple", "list", "dict keys", "set", "int", "None allowed"])
def test_a_good_value_passes_through(value, choices):
    assert check_choice("attention", value, choices) is value


@pytest.mark.parametrize(("value", "got"), [
    ("flash", "'flash'"),
    ("Fused", "'Fused'"),
    (1, r"1 \(int\)"),
    (None, "None"),
    (["fused"], r"\['fused'\] \(list\)"),
    ({"fused": 1}, r"\{'fused': 1\} \(dict\)"),
    (torch.tensor([1.0]), r"tensor\(\[1.\]\) \(Tensor\)"),
], ids=["wrong str", "wrong case", "int", "None", "list (unhashable)", "dict (unhashable)",
        "tensor"])
def test_anything_else_is_a_value_error_naming_the_argument_and_the_choices(value, got):
    with pytest.raises(ValueError, match=LISTED + got + "$"):
        check_choice("attention", value, IMPLEMENTATIONS)


def test_a_bool_is_not_taken_for_an_int():
    with pytest.raises(ValueError, match=r"got True \(bool\)"):
        check_choice("n", True, (0, 1))


def test_a_set_of_choices_is_listed_in_sorted_order():
    with pytest.raises(ValueError, match=r"kind must be one of \('a', 'b', 'c'\), got 'd'"):
        check_choice("kind", "d", {"c", "a", "b"})


def test_a_long_value_is_shortened_in_the_message():
    with pytest.raises(ValueError) as error:
        check_choice("attention", "x" * 1000, IMPLEMENTATIONS)
    assert len(str(error.value)) < 200


def test_the_library_uses_it():
    with pytest.raises(ValueError, match=r"cell must be one of \('gru', 'lstm'\), got 'rnn'"):
        Seq2SeqConfig(10, 10, cell="rnn")
    with pytest.raises(ValueError, match=r"name must be one of \('digits', 'shapes'\), got 3"):
        caption_set(3, 2)
