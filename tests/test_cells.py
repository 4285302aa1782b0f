"""The recurrent cells written out agree with PyTorch's, step after step, and refuse bad shapes."""

import pytest
import torch
from torch import nn

from course_lib.nn.cells import ScratchGRUCell, ScratchLSTMCell, ScratchRNNCell

PAIRS = [(ScratchRNNCell, nn.RNNCell), (ScratchGRUCell, nn.GRUCell),
         (ScratchLSTMCell, nn.LSTMCell)]


@pytest.mark.parametrize("ours_class,torch_class", PAIRS, ids=lambda c: c.__name__)
def test_each_cell_matches_torch_over_several_steps(ours_class, torch_class):
    torch.manual_seed(0)
    ours, reference = ours_class(5, 7), torch_class(5, 7)
    assert {k: v.shape for k, v in ours.state_dict().items()} == \
        {k: v.shape for k, v in reference.state_dict().items()}
    ours.load_state_dict(reference.state_dict())
    x = torch.randn(3, 6, 5)
    state = state_ref = None
    for t in range(6):
        state, state_ref = ours(x[:, t], state), reference(x[:, t], state_ref)
        torch.testing.assert_close(state, state_ref, rtol=1e-5, atol=1e-6)
    # Gradients agree too.
    ours.zero_grad()
    reference.zero_grad()
    out, out_ref = ours(x[:, 0]), reference(x[:, 0])
    first = (lambda o: o[0]) if isinstance(out, tuple) else (lambda o: o)
    first(out).square().sum().backward()
    first(out_ref).square().sum().backward()
    for name, parameter in ours.named_parameters():
        torch.testing.assert_close(parameter.grad, dict(reference.named_parameters())[name].grad,
                                   rtol=1e-5, atol=1e-6)


def test_the_lstm_memory_changes_only_by_gated_addition():
    torch.manual_seed(0)
    cell = ScratchLSTMCell(4, 3)
    with torch.no_grad():  # forget gate fully open, input gate shut: the memory is kept as is
        cell.bias_ih[3:6] = 50.0  # f
        cell.bias_ih[0:3] = -50.0  # i
    c = torch.randn(2, 3)
    _, c_next = cell(torch.randn(2, 4), (torch.randn(2, 3), c))
    torch.testing.assert_close(c_next, c)


@pytest.mark.parametrize("cell_class", [ScratchRNNCell, ScratchGRUCell, ScratchLSTMCell])
def test_cells_name_the_expected_shapes(cell_class):
    cell = cell_class(5, 7)
    with pytest.raises(ValueError, match=r"x of shape \(B, 5\), got \(3, 4\)"):
        cell(torch.zeros(3, 4))
    bad_state = torch.zeros(3, 6)
    state = (bad_state, torch.zeros(3, 7)) if cell_class is ScratchLSTMCell else bad_state
    with pytest.raises(ValueError, match=r"state of shape \(3, 7\), got \(3, 6\)"):
        cell(torch.zeros(3, 5), state)
