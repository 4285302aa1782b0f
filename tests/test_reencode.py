"""The re-encoding encoder–decoder: each step's context is a fresh pass of a GRU over the source
with the decoder state appended to every input, exactly; padding and later words change
nothing earlier."""

import pytest
import torch
from torch import nn

from course_lib.data.vocab import PAD_ID
from course_lib.lessons.contexts import context_costs, context_models
from course_lib.models.reencode import ReencodeConfig, ReencodingSeq2Seq

CONFIG = ReencodeConfig(12, 14, embed_dim=6, hidden_size=8)


def _model():
    torch.manual_seed(0)
    return ReencodingSeq2Seq(CONFIG).eval()


def test_each_context_is_a_gru_pass_over_the_source_with_the_state_appended():
    model = _model()
    cell = nn.GRUCell(6 + 8, 8)
    cell.load_state_dict({name.replace("_l0", ""): value
                          for name, value in model.encoder.state_dict().items()})
    src, tgt = torch.tensor([[4, 7, 5, 9]]), torch.tensor([[1, 6, 8]])
    state, expected = torch.zeros(1, 8), []
    with torch.no_grad():
        for t in range(3):
            h = torch.zeros(1, 8)
            for j in range(4):
                h = cell(torch.cat([model.src_embed(src[:, j]), state], dim=-1), h)
            state = model.decoder(torch.cat([model.tgt_embed(tgt[:, t]), h], dim=-1), state)
            expected.append(model.out(state))
        got = model(src, None, tgt)
    torch.testing.assert_close(got, torch.stack(expected, dim=1), rtol=1e-5, atol=1e-6)


def test_padding_and_later_target_words_change_nothing():
    model = _model()
    src = torch.tensor([[4, 7, 5, PAD_ID, PAD_ID], [4, 7, 5, 9, 10]])
    tgt = torch.tensor([[1, 6, 8, 9], [1, 5, 5, 6]])
    with torch.no_grad():
        batched = model(src, torch.tensor([3, 5]), tgt)
        alone = model(src[:1, :3], None, tgt[:1])
        changed = tgt.clone()
        changed[:, 2] = 11
        later = model(src, torch.tensor([3, 5]), changed)
    torch.testing.assert_close(batched[:1], alone, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(later[:, :2], batched[:, :2])  # steps before the change
    assert not torch.allclose(later[:, 2:], batched[:, 2:])  # the state reaches the re-reading


def test_shapes_are_checked():
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(3, 2\)"):
        _model()(torch.zeros(2, 3, dtype=torch.long), None, torch.zeros(3, 2, dtype=torch.long))


def test_context_costs_count_what_each_design_runs():
    rows = context_costs([3, 6], target=4, batch=2, repeats=1, embed_dim=4, hidden_size=6)
    by = {(row["S"], row["design"]): row for row in rows}
    assert by[(6, "one context")]["sequential steps"] == 6 + 4
    assert by[(6, "re-read per step")]["sequential steps"] == 4 * 6 + 4
    assert by[(6, "attention")]["scores"] == 4 * 6 and by[(6, "one context")]["scores"] == 0
    assert all(row["forward ms"] > 0 for row in rows)
    # The re-reading model really runs its encoder once per output step.
    model = context_models(4, 6)["re-read per step"]
    passes = []
    model.encoder.register_forward_hook(lambda *args: passes.append(1))
    model(torch.randint(4, 20, (2, 6)), None, torch.randint(4, 20, (2, 4)))
    assert len(passes) == 4
