"""The encoder–decoder without attention: padding never read, a causal decoder that uses its
context, the five hand-overs (their shapes, parameters and first states), a padded loss, and a
model that learns to copy."""

from dataclasses import replace

import pytest
import torch
from torch import nn

from course_lib.data.vocab import BOS_ID, EOS_ID, PAD_ID
from course_lib.models.seq2seq import (
    CONTEXT_MODES,
    Decoder,
    Encoder,
    Seq2Seq,
    Seq2SeqConfig,
    sequence_loss,
)
from course_lib.train.loop import fit


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_encoder_never_reads_padding(cell, bidirectional):
    torch.manual_seed(0)
    config = Seq2SeqConfig(20, 20, embed_dim=8, hidden_size=16, cell=cell,
                           bidirectional=bidirectional)
    encoder = Encoder(config).eval()
    sentence = torch.tensor([[5, 6, 7]])
    padded = torch.tensor([[5, 6, 7, PAD_ID, PAD_ID], [8, 9, 10, 11, 12]])
    _, alone = encoder(sentence, torch.tensor([3]))
    outputs, batched = encoder(padded, torch.tensor([3, 5]))
    torch.testing.assert_close(batched[0], alone[0], rtol=1e-5, atol=1e-6)
    assert outputs.shape == (2, 5, 16 * (2 if bidirectional else 1))
    assert outputs[0, 3:].abs().max() == 0  # nothing computed at padded positions


@pytest.mark.parametrize("context", CONTEXT_MODES)
def test_decoder_is_causal_and_uses_the_context(context):
    torch.manual_seed(0)
    config = Seq2SeqConfig(10, 12, embed_dim=6, hidden_size=8, context=context)
    decoder = Decoder(config).eval()
    tokens, c = torch.randint(4, 12, (2, 6)), torch.randn(2, 8)
    logits, _ = decoder(tokens, c)
    assert logits.shape == (2, 6, 12)
    changed = tokens.clone()
    changed[:, 4] = 3
    later, _ = decoder(changed, c)
    torch.testing.assert_close(later[:, :4], logits[:, :4])  # no future leakage
    other, _ = decoder(tokens, c + 1)
    assert not torch.allclose(other[:, 0], logits[:, 0])  # the context matters from step one


# The five hand-overs: how c reaches s_0 and whether c is part of every step's input.
E, H, V = 6, 8, 12
GRU = 3 * H  # rows of a GRU's stacked gate blocks (r, z, n)
HANDOVER_TABLE = {  # mode: (s_0, input size of the decoder's GRU, parameters of W_init)
    "copy": ("c", E, 0),
    "init": ("tanh(W_init c + b)", E, H * H + H),
    "every_step": ("0", E + H, 0),
    "first_step": ("0", E + H, 0),
    "both": ("tanh(W_init c + b)", E + H, H * H + H),
}


def test_the_table_lists_every_context_mode():
    assert set(HANDOVER_TABLE) == set(CONTEXT_MODES)


@pytest.mark.parametrize("context", CONTEXT_MODES)
def test_each_hand_over_has_its_shapes_and_parameter_count(context):
    """Input size and parameter count follow from the table: the decoder's embedding, its GRU
    (input weights for E or E + H numbers, hidden weights, two biases), W_init where c goes
    through a layer, and the output layer."""
    first_state, input_size, w_init = HANDOVER_TABLE[context]
    decoder = Decoder(Seq2SeqConfig(10, V, embed_dim=E, hidden_size=H, context=context))
    assert decoder.rnn.input_size == input_size
    expected = (V * E + GRU * input_size + GRU * H + 2 * GRU + w_init + H * V + V)
    assert sum(p.numel() for p in decoder.parameters()) == expected
    logits, state = decoder(torch.randint(4, V, (2, 5)), torch.randn(2, H))
    assert logits.shape == (2, 5, V) and state.shape == (1, 2, H)


def test_copy_starts_the_decoder_from_c_itself_and_init_through_a_layer():
    torch.manual_seed(0)
    c = torch.randn(3, H)
    for cell in ("gru", "lstm"):
        config = Seq2SeqConfig(10, V, embed_dim=E, hidden_size=H, cell=cell, context="copy")
        state = Decoder(config).initial_state(c)
        s_0 = state[0] if cell == "lstm" else state
        assert torch.equal(s_0[0], c)  # s_0 = c, exactly
        if cell == "lstm":
            assert torch.equal(state[1], torch.zeros(1, 3, H))  # the memory cell m_0 = 0
    init = Decoder(Seq2SeqConfig(10, V, embed_dim=E, hidden_size=H, context="init"))
    expected = torch.tanh(c @ init.init.weight.T + init.init.bias)  # tanh(W_init c + b)
    torch.testing.assert_close(init.initial_state(c)[0], expected)
    zeros = Decoder(Seq2SeqConfig(10, V, embed_dim=E, hidden_size=H, context="every_step"))
    assert torch.equal(zeros.initial_state(c)[0], torch.zeros(3, H))


def test_copy_needs_a_state_of_the_decoder_s_size():
    with pytest.raises(ValueError, match="copy.*2H"):
        Seq2SeqConfig(10, V, hidden_size=H, bidirectional=True, context="copy")
    decoder = Decoder(Seq2SeqConfig(10, V, embed_dim=E, hidden_size=H, context="copy"))
    with pytest.raises(ValueError, match=r"copy.*s_0 = c.*H = 8, got a context of 5"):
        decoder(torch.randint(4, V, (2, 3)), torch.randn(2, 5))
    with pytest.raises(ValueError, match=r"s_0 = c.*H = 8"):
        decoder.initial_state(torch.randn(2, 5))
    both = Decoder(Seq2SeqConfig(10, V, embed_dim=E, hidden_size=H, context="both"))
    with pytest.raises(ValueError, match="hidden size H = 8"):
        both(torch.randint(4, V, (2, 3)), torch.randn(2, 5))


@pytest.mark.parametrize("context", CONTEXT_MODES)
def test_only_a_context_that_sets_the_first_state_has_w_init(context):
    """Every parameter a decoder holds is one it uses: W_init maps c to s_0, so the modes that
    start from zeros or from c itself have none, and a parameter count shows the real size of
    each mode."""
    config = Seq2SeqConfig(10, 12, embed_dim=6, hidden_size=8, context=context)
    decoder = Decoder(config)
    names = {name for name, _ in decoder.named_parameters()}
    has_init = {"init.weight", "init.bias"} <= names
    assert has_init == (context in ("init", "both"))
    logits, _ = decoder(torch.randint(4, 12, (2, 5)), torch.randn(2, 8))
    logits.sum().backward()
    unused = [name for name, p in decoder.named_parameters()
              if p.grad is None and not name.startswith("embed")]
    assert unused == []


def test_first_step_reads_the_context_once_and_steps_agree_with_the_whole_sequence():
    torch.manual_seed(0)
    config = Seq2SeqConfig(10, 12, embed_dim=6, hidden_size=8, context="first_step")
    decoder = Decoder(config).eval()
    tokens, c = torch.randint(4, 12, (2, 6)), torch.randn(2, 8)
    logits, _ = decoder(tokens, c)
    # After the first step the context's slot holds zeros: the same as an every-step decoder
    # (same weights) fed c at step one and zeros after.
    every = Decoder(replace(config, context="every_step")).eval()
    every.load_state_dict(decoder.state_dict())
    first, state = every(tokens[:, :1], c)
    rest, _ = every(tokens[:, 1:], torch.zeros_like(c), state)
    torch.testing.assert_close(logits, torch.cat([first, rest], dim=1))
    # Generating one step at a time (start=t) gives the same logits.
    state, stepped = None, []
    for t in range(tokens.shape[1]):
        step_logits, state = decoder(tokens[:, t:t + 1], c, state, start=t)
        stepped.append(step_logits)
    torch.testing.assert_close(torch.cat(stepped, dim=1), logits)


def test_sequence_loss_ignores_padding():
    logits = torch.randn(2, 3, 5)
    targets = torch.tensor([[1, 2, PAD_ID], [3, PAD_ID, PAD_ID]])
    real = targets != PAD_ID
    expected = nn.functional.cross_entropy(logits[real], targets[real])
    torch.testing.assert_close(sequence_loss(logits, targets), expected)
    with pytest.raises(ValueError, match="disagree"):
        sequence_loss(logits, targets[:, :2])


def copy_batches(n_batches=40, seed=0):
    """Sequences of 2-4 symbols (ids 4-7); the target is the same sequence."""
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n_batches):
        lengths = torch.randint(2, 5, (32,), generator=g)
        src = torch.full((32, 4), PAD_ID)
        for row, n in enumerate(lengths):
            src[row, :n] = torch.randint(4, 8, (int(n),), generator=g)
        eos = torch.full((32, 1), PAD_ID)
        tgt_out = torch.cat([src, eos], dim=1)
        tgt_out[torch.arange(32), lengths] = EOS_ID
        tgt_in = torch.cat([torch.full((32, 1), BOS_ID), tgt_out[:, :-1]], dim=1)
        tgt_in[tgt_in == EOS_ID] = PAD_ID
        batches.append((src, lengths, tgt_in, tgt_out))
    return batches


@pytest.mark.parametrize("context", CONTEXT_MODES)
def test_model_learns_to_copy_short_sequences_exactly(context):
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(8, 8, embed_dim=16, hidden_size=128, context=context))
    batches = copy_batches(40)
    fit(model, torch.optim.Adam(model.parameters(), lr=5e-3), batches,
        lambda m, b: sequence_loss(m(b[0], b[1], b[2]), b[3]), epochs=15, device="cpu",
        clip_grad_norm=1.0, progress=False)
    src, lengths, _, tgt_out = copy_batches(1, seed=99)[0]
    generated = model.greedy_decode(src, lengths, max_len=8)
    for row in range(32):
        n = int(lengths[row])
        assert generated[row, :n + 1].tolist() == tgt_out[row, :n + 1].tolist()
        assert (generated[row, n + 1:] == PAD_ID).all()  # nothing after EOS


def test_greedy_decode_stops_at_max_len_and_config_is_checked():
    model = Seq2Seq(Seq2SeqConfig(10, 10, embed_dim=4, hidden_size=8)).eval()
    out = model.greedy_decode(torch.randint(4, 10, (3, 4)), max_len=7)
    assert out.shape[0] == 3 and out.shape[1] <= 7
    with pytest.raises(ValueError, match="context"):
        Seq2SeqConfig(10, 10, context="sometimes")
    with pytest.raises(ValueError, match="cell"):
        Seq2SeqConfig(10, 10, cell="transformer")
