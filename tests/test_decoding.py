"""One greedy decoder for every model: ``greedy_search``'s own contract on a bigram table, and
each model's ``greedy_decode`` equal to ``beam_search`` with one hypothesis on the same step."""

import pytest
import torch

from course_lib.data.vocab import BOS_ID, EOS_ID, PAD_ID
from course_lib.models.attention_seq2seq import AttentionSeq2Seq, AttentionSeq2SeqConfig
from course_lib.models.captioner import CaptionerConfig, ShowAttendTell
from course_lib.models.seq2seq import Seq2Seq, Seq2SeqConfig
from course_lib.models.transformer import Transformer, TransformerConfig
from course_lib.nn.decoding import beam_search, greedy_search, log_softmax_step
from course_lib.seeding import seed_everything

SEEDS = (0, 1, 2)


def bigram_step(table: torch.Tensor, calls: list | None = None):
    """A step whose log p(w | previous) is row ``previous`` of ``table`` (V, V); the state
    counts the steps, the extra is the one-hot previous word (B, V)."""

    def step(previous, state):
        if calls is not None:
            calls.append(previous.clone())
        one_hot = torch.nn.functional.one_hot(previous, table.shape[0]).float()  # (B, V)
        return table[previous], state + 1, one_hot

    return step


def chain_table(order, vocab=8):
    """log-probabilities that follow ``order`` (BOS -> order[0] -> order[1] ...) for sure."""
    table = torch.full((vocab, vocab), -5.0)
    for previous, word in zip([BOS_ID, *order], order, strict=False):
        table[previous, word] = -0.1
    return table


def random_table(seed, vocab=7):
    """Random log p(w | previous) (V, V) that never chooses PAD (beam search never does)."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(vocab, vocab, generator=g) * 2
    logits[:, PAD_ID] = float("-inf")
    return torch.log_softmax(logits, dim=-1)


# --- greedy_search's contract ------------------------------------------------------------------


def test_rows_get_pad_after_eos_and_the_search_stops_when_all_have_ended():
    table = chain_table([4, 5, EOS_ID, 6])
    calls = []
    result = greedy_search(bigram_step(table, calls), 0, 2, 10, "cpu")
    assert result.tokens.tolist() == [[4, 5, EOS_ID]] * 2
    assert len(calls) == 3  # stopped at the step where every row produced EOS
    assert calls[0].tolist() == [BOS_ID, BOS_ID]
    torch.testing.assert_close(result.scores, torch.full((2,), -0.3))

    # Row 1 ends after 2 words, row 0 never: PAD after row 1's EOS, nothing added to its score,
    # its extras zero; the search goes on to max_len for row 0.
    tables = torch.stack([chain_table([4, 5]), chain_table([6, EOS_ID])])  # (2, V, V)
    tables[0, 5, 5] = -0.1  # row 0 repeats 5 for ever

    def two_rows(previous, state):
        return tables[torch.arange(2), previous], state + 1, previous.float().unsqueeze(1) + 1

    result = greedy_search(two_rows, 0, 2, 10, "cpu")
    assert result.tokens.tolist() == [[4] + [5] * 9, [6, EOS_ID] + [PAD_ID] * 8]
    assert result.extras.shape == (2, 10, 1)  # the previous word + 1: (B, T', 1)
    assert result.extras[1, :, 0].tolist() == [BOS_ID + 1, 7] + [0] * 8
    torch.testing.assert_close(result.scores, torch.tensor([-1.0, -0.2]))


def test_max_len_cuts_every_row_and_stop_at_eos_false_runs_every_step():
    table = chain_table([4, EOS_ID])
    calls = []
    cut = greedy_search(bigram_step(table, calls), 0, 3, 1, "cpu")
    assert cut.tokens.tolist() == [[4]] * 3 and len(calls) == 1
    calls.clear()
    table[EOS_ID, 4] = -0.1  # after EOS, 4 again
    forced = greedy_search(bigram_step(table, calls), 0, 3, 6, "cpu", stop_at_eos=False)
    assert len(calls) == 6  # EOS is a word like any other here, no PAD after it
    assert forced.tokens.tolist() == [[4, EOS_ID] * 3] * 3
    assert forced.extras.ne(0).any(dim=-1).all()  # nothing zeroed after EOS either
    torch.testing.assert_close(forced.scores, torch.full((3,), -0.6))


def test_a_step_that_keeps_nothing_gives_no_extras():
    table = chain_table([5, EOS_ID])

    def step(previous, state):
        return table[previous], state, None

    result = greedy_search(step, None, 2, 4, "cpu")
    assert result.extras is None and result.tokens.tolist() == [[5, EOS_ID]] * 2


@pytest.mark.parametrize("seed", range(6))
def test_greedy_is_a_beam_of_one_on_the_same_step(seed):
    table = random_table(seed)
    greedy = greedy_search(bigram_step(table), 0, 4, 9, "cpu")
    beam = beam_search(bigram_step(table), 0, lambda state, rows: state, 4, 1, 9, "cpu")
    assert torch.equal(greedy.tokens, beam.tokens)
    assert torch.equal(greedy.scores, beam.scores)
    assert torch.equal(greedy.extras, beam.extras)


@pytest.mark.parametrize("value, error, got", [(0, ValueError, "0"), (-2, ValueError, "-2"),
                                               (2.0, TypeError, "2.0"), ("3", TypeError, "str"),
                                               (True, TypeError, "True")])
def test_max_len_and_batch_must_be_positive_ints(value, error, got):
    step = bigram_step(chain_table([EOS_ID]))
    with pytest.raises(error, match=f"max_len must be a.* int, got {got}"):
        greedy_search(step, 0, 2, value, "cpu")
    with pytest.raises(error, match=f"batch must be a.* int, got {got}"):
        greedy_search(step, 0, value, 4, "cpu")


def test_other_bad_arguments_are_named():
    step = bigram_step(chain_table([EOS_ID]))
    with pytest.raises(TypeError, match="step must be a function .* got Tensor"):
        greedy_search(torch.zeros(3), 0, 2, 4, "cpu")
    with pytest.raises(TypeError, match="stop_at_eos must be a bool, got int"):
        greedy_search(step, 0, 2, 4, "cpu", stop_at_eos=1)
    with pytest.raises(ValueError, match=r"step must return .* \(batch, V\) = \(3, V\), got "
                                         r"\(2, 8\)"):
        greedy_search(lambda previous, state: (torch.zeros(2, 8), state, None), 0, 3, 4, "cpu")


def test_on_logits_greedy_takes_their_exact_argmax():
    """Why the translators hand greedy_search their logits: log-softmax subtracts ~log V from
    logits near 0, and rounding there can tie two words the logits tell apart."""
    logits = torch.zeros(1, 9)
    logits[0, 4] = 1e-3
    logits[0, 6] = torch.nextafter(torch.tensor(1e-3), torch.tensor(1.0))  # the best, just
    log_probs = torch.log_softmax(logits, dim=-1)
    assert log_probs[0, 4] == log_probs[0, 6]  # tied: argmax would say 4

    def step(previous, state):
        return logits, state, None

    assert greedy_search(step, 0, 1, 1, "cpu").tokens.item() == 6
    assert greedy_search(log_softmax_step(step), 0, 1, 1, "cpu").tokens.item() == 4


def test_log_softmax_step_normalises_the_logits_in_float32():
    logits = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)
    step = log_softmax_step(lambda previous, state: (logits, state + 1, None))
    log_probs, state, extra = step(torch.tensor([BOS_ID]), 0)
    assert log_probs.dtype == torch.float32 and state == 1 and extra is None
    torch.testing.assert_close(log_probs.exp().sum(), torch.tensor(1.0))


# --- every model's greedy_decode is greedy_search on its step, a beam of one ---------------------


def one_row_each(state, rows):
    """``reorder`` for a beam of one: the surviving hypothesis of input b is row b."""
    assert torch.equal(rows, torch.arange(rows.shape[0]))
    return state


def sources(seed, batch=5, length=7, vocab=20):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, length + 1, (batch,), generator=g)
    lengths[0] = length
    src = torch.randint(4, vocab, (batch, length), generator=g)
    src[torch.arange(length)[None, :] >= lengths[:, None]] = PAD_ID
    return src, lengths


def with_eos_bias(model, layer, amount):
    """Raise EOS's bias by ``amount``, so that some rows end early and others run to max_len."""
    with torch.no_grad():
        layer.bias[EOS_ID] += amount
    return model.eval()


def beam_of_one(step, state, batch, max_len):
    return beam_search(step, state, one_row_each, batch, 1, max_len, "cpu")


def ended_early_and_late(results, max_len):
    """Over the seeds, some outputs stopped before max_len and some reached it."""
    lengths = {result.shape[1] for result in results}
    assert min(lengths) < max_len and max_len in lengths, lengths


@pytest.mark.parametrize("context", ["init", "both"])
def test_seq2seq_greedy_decode_is_a_beam_of_one(context):
    decoded = []
    for seed in SEEDS:
        seed_everything(seed)
        model = Seq2Seq(Seq2SeqConfig(20, 9, 6, 10, "lstm" if seed else "gru", context=context))
        model = with_eos_bias(model, model.decoder.out, seed)
        src, lengths = sources(seed)
        greedy = model.greedy_decode(src, lengths, max_len=8)
        step, state = model.decoding_step(model.encode(src, lengths))
        assert torch.equal(greedy, beam_of_one(log_softmax_step(step), state, 5, 8).tokens)
        decoded.append(greedy)
    ended_early_and_late(decoded, 8)


@pytest.mark.parametrize("variant", [dict(attention="bahdanau"),
                                     dict(attention="luong", score="general", local="p")])
def test_attention_seq2seq_greedy_decode_is_a_beam_of_one(variant):
    decoded = []
    for seed in SEEDS:
        seed_everything(seed)
        model = AttentionSeq2Seq(AttentionSeq2SeqConfig(20, 9, 6, 10, window=2, **variant))
        model = with_eos_bias(model, model.out, seed)
        src, lengths = sources(seed + 3)
        ids, weights = model.greedy_decode(src, lengths, 8, return_attention=True)
        step, state = model.decoding_step(*model.encode(src, lengths))
        beam = beam_of_one(log_softmax_step(step), state, 5, 8)
        assert torch.equal(ids, beam.tokens) and torch.equal(weights, beam.extras)
        assert torch.equal(model.greedy_decode(src, lengths, 8), ids)
        decoded.append(ids)
    ended_early_and_late(decoded, 8)


@pytest.mark.parametrize("attention", ["soft", "argmax", "sample"])
def test_captioner_greedy_decode_is_a_beam_of_one(attention):
    decoded = []
    for seed in SEEDS:
        seed_everything(seed)
        model = ShowAttendTell(CaptionerConfig(9, channels=(4, 8), embed_dim=6, hidden_size=12,
                                               attention_size=7))
        model = with_eos_bias(model, model.decoder.out, seed)
        images = torch.rand(4, 1, 8, 20, generator=torch.Generator().manual_seed(seed))
        greedy = model.greedy_decode(images, 7, attention, torch.Generator().manual_seed(seed))
        with torch.no_grad():
            step, state = model.decoding_step(*model.encode(images), attention,
                                              torch.Generator().manual_seed(seed))
            beam = beam_of_one(step, state, 4, 7)
        assert torch.equal(greedy.tokens, beam.tokens)
        assert torch.equal(greedy.scores, beam.scores)
        assert torch.equal(greedy.weights, beam.extras)
        decoded.append(greedy.tokens)
    ended_early_and_late(decoded, 7)


@pytest.mark.parametrize("use_cache", [True, False])
def test_transformer_greedy_decode_is_a_beam_of_one(use_cache):
    decoded = []
    for seed in SEEDS:
        seed_everything(seed)
        model = Transformer(TransformerConfig(20, 9, d_model=16, num_heads=2, num_encoder_layers=1,
                                              num_decoder_layers=2, d_ff=24, dropout=0.0,
                                              max_len=16))
        model = with_eos_bias(model, model.out, seed * 4)
        src, lengths = sources(seed + 6)
        greedy = model.greedy_decode(src, lengths, max_len=9, use_cache=use_cache)
        with torch.no_grad():
            step, state = model.decoding_step(model.encode(src, lengths), use_cache)
            beam = beam_of_one(log_softmax_step(step), state, 5, 9)
        assert torch.equal(greedy, beam.tokens)
        assert torch.equal(greedy, model.beam_search(src, lengths, beam_size=1, max_len=9))
        decoded.append(greedy)
    ended_early_and_late(decoded, 9)


@pytest.mark.parametrize("value, got", [(0, "0"), (2.5, "2.5"), ("8", "str")])
def test_every_greedy_decode_names_max_len(value, got):
    seed_everything(0)
    src, lengths = sources(0)
    images = torch.rand(2, 1, 8, 20)
    calls = [
        lambda: Seq2Seq(Seq2SeqConfig(20, 9, 6, 10)).greedy_decode(src, lengths, value),
        lambda: AttentionSeq2Seq(AttentionSeq2SeqConfig(20, 9, 6, 10)).greedy_decode(
            src, lengths, value),
        lambda: ShowAttendTell(CaptionerConfig(9, channels=(4,), pool_after=(0,),
                                               hidden_size=8)).greedy_decode(images, value),
        lambda: Transformer(TransformerConfig(20, 9, d_model=8, num_heads=2,
                                              num_encoder_layers=1, num_decoder_layers=1,
                                              d_ff=8)).greedy_decode(src, lengths, value),
    ]
    for call in calls:
        with pytest.raises((TypeError, ValueError), match=f"max_len must be a.* int, got {got}"):
            call()
