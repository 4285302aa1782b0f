"""Bahdanau and Luong encoder-decoders (course_lib.models.attention_seq2seq)."""

import pytest
import torch

from course_lib.data.sequence_tasks import exact_match, sequence_task
from course_lib.data.vocab import PAD_ID
from course_lib.models.attention_seq2seq import AttentionSeq2Seq, AttentionSeq2SeqConfig
from course_lib.models.seq2seq import translation_loss
from course_lib.seeding import seed_everything
from course_lib.train.checkpoint import load_checkpoint, save_checkpoint

VARIANTS = {
    "bahdanau": dict(attention="bahdanau", score="additive"),
    "luong-dot": dict(attention="luong", score="dot", scaled=True),
    "luong-general": dict(attention="luong", score="general", scaled=True),
    "luong-concat": dict(attention="luong", score="concat"),
    "luong-local-m": dict(attention="luong", score="general", local="m", window=2, scaled=True),
    "luong-local-p": dict(attention="luong", score="general", local="p", window=3, scaled=True),
}
GLOBAL = [k for k, v in VARIANTS.items() if not v.get("local")]


def build(name, vocab=14, hidden=16, **extra):
    seed_everything(0)
    return AttentionSeq2Seq(AttentionSeq2SeqConfig(vocab, vocab, embed_dim=8, hidden_size=hidden,
                                                   **{**VARIANTS[name], **extra}))


@pytest.fixture(scope="module")
def batch():
    return sequence_task("reverse", n=6, min_len=2, max_len=7, seed=1)


@pytest.mark.parametrize("name", VARIANTS)
def test_shapes_and_weights_of_every_step(name, batch):
    model = build(name)
    logits, weights = model(batch.src, batch.src_lengths, batch.tgt_in)
    B, S = batch.src.shape
    T = batch.tgt_in.shape[1]
    assert logits.shape == (B, T, 14) and weights.shape == (B, T, S)
    assert torch.isfinite(logits).all() and (weights >= 0).all()
    padded = (batch.src == PAD_ID).unsqueeze(1).expand(-1, T, -1)
    assert (weights[padded] == 0).all()  # padding gets exactly zero weight
    if name != "luong-local-p":  # softmax rows; local-p multiplies by a Gaussian (sum <= 1)
        torch.testing.assert_close(weights.sum(-1), torch.ones(B, T))
    else:
        assert (weights.sum(-1) <= 1 + 1e-6).all()


@pytest.mark.parametrize("name", ["luong-local-m", "luong-local-p"])
def test_local_windows_put_zero_weight_outside(name):
    batch = sequence_task("copy", n=4, min_len=12, max_len=14, seed=2)
    model = build(name)
    _, weights = model(batch.src, batch.src_lengths, batch.tgt_in)
    D = model.config.window
    nonzero_per_row = (weights > 0).sum(-1)  # (B, T)
    assert (nonzero_per_row <= 2 * D + 1).all() and (nonzero_per_row >= 1).all()
    if name == "luong-local-m":  # window centred on min(t, S_b - 1)
        for t in range(weights.shape[1]):
            for b in range(4):
                centre = min(t, int(batch.src_lengths[b]) - 1)
                outside = (torch.arange(weights.shape[2]) - centre).abs() > D
                assert (weights[b, t, outside] == 0).all()
    else:  # a window of width 2D + 1 around some real-valued p_t
        for row in weights.reshape(-1, weights.shape[-1]):
            positions = row.nonzero().squeeze(-1)
            assert positions.max() - positions.min() <= 2 * D


def test_bahdanau_queries_with_the_previous_state_luong_with_the_current():
    """Bahdanau's first step attends before reading any target word: its weights cannot depend
    on y_0. Luong's first query is h_1, computed from y_0, so they do."""
    batch = sequence_task("reverse", n=3, seed=3)
    other = batch.tgt_in.clone()
    other[:, 0] = 5  # a different first input token
    for name, depends in (("bahdanau", False), ("luong-general", True)):
        model = build(name)
        _, first = model(batch.src, batch.src_lengths, batch.tgt_in)
        _, second = model(batch.src, batch.src_lengths, other)
        assert torch.equal(first[:, 0], second[:, 0]) is not depends, name


@pytest.mark.parametrize("name", VARIANTS)
def test_gradients_reach_every_parameter(name, batch):
    model = build(name)
    translation_loss(model, batch).backward()
    missing = [n for n, p in model.named_parameters()
               if p.grad is None or not torch.isfinite(p.grad).all() or p.grad.abs().sum() == 0]
    assert not missing, missing


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_greedy_decoding_agrees_with_teacher_forcing_on_its_own_output(cell, batch):
    model = build("luong-general", cell=cell).eval()
    ids, weights = model.greedy_decode(batch.src, batch.src_lengths, max_len=9,
                                       return_attention=True)
    tgt_in = torch.cat([torch.full((ids.shape[0], 1), 1), ids[:, :-1]], dim=1)  # BOS + ids
    logits, forced = model(batch.src, batch.src_lengths, tgt_in)
    assert torch.equal(logits.argmax(-1)[:, 0], ids[:, 0])
    alive = (ids != PAD_ID)
    torch.testing.assert_close(weights[alive], forced[alive])


def test_config_rejects_inconsistent_settings():
    with pytest.raises(ValueError, match="Bahdanau attention uses the additive score"):
        AttentionSeq2SeqConfig(5, 5, attention="bahdanau", score="dot")
    with pytest.raises(ValueError, match="Luong attention scores"):
        AttentionSeq2SeqConfig(5, 5, attention="luong", score="additive")
    with pytest.raises(ValueError, match="hidden_size must be even"):
        AttentionSeq2SeqConfig(5, 5, hidden_size=15)
    with pytest.raises(ValueError, match="local must be"):
        AttentionSeq2SeqConfig(5, 5, attention="luong", score="dot", local="q")
    with pytest.raises(ValueError, match="scaled=True divides dot or general scores"):
        AttentionSeq2SeqConfig(5, 5, attention="luong", score="concat", scaled=True)
    with pytest.raises(ValueError, match=r"expected tgt_in of shape \(2, T\)"):
        build("bahdanau")(torch.ones(2, 3, dtype=torch.long), None, torch.ones(3, 2).long())


def test_checkpoint_round_trip(tmp_path, batch):
    model = build("luong-local-p").eval()
    save_checkpoint(tmp_path / "m.pt", model, model.config)
    again, _ = load_checkpoint(tmp_path / "m.pt", AttentionSeq2Seq)
    again.eval()
    assert again.config == model.config
    torch.testing.assert_close(again(batch.src, batch.src_lengths, batch.tgt_in)[0],
                               model(batch.src, batch.src_lengths, batch.tgt_in)[0])


@pytest.mark.parametrize("name", VARIANTS)
def test_every_decoder_learns_its_task_exactly(name):
    """A learning test: held-out sequences, decoded greedily, must all be exactly right.

    Local-m centres its window on p_t = t, which suits monotonic alignments only, so it learns
    to copy; every other decoder learns to reverse.
    """
    task = "copy" if name == "luong-local-m" else "reverse"
    model = build(name, hidden=64)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    held_out = sequence_task(task, n=200, min_len=3, max_len=7, seed=10_000)
    score = 0.0
    for step in range(1000):
        model.train()
        loss = translation_loss(model, sequence_task(task, n=64, min_len=3, max_len=7,
                                                     seed=step))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 50 == 49:
            model.eval()
            generated = model.greedy_decode(held_out.src, held_out.src_lengths, max_len=10)
            score = exact_match(generated, held_out.tgt_out)
            if score == 1.0:
                break
    assert score == 1.0, f"{name}: {score:.3f} of held-out {task} outputs exactly right"
