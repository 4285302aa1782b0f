"""nn/efficient.py and lessons/costs.py, lesson 11's masks and measurements: sliding windows and
their reach, forced greedy decoding with and without the KV cache, log-probabilities of outputs,
peak memory and timing."""

import time

import pytest
import torch

from course_lib import timing
from course_lib.data.vocab import EOS_ID, PAD_ID
from course_lib.lessons.costs import (
    attention_cost,
    cache_report,
    decode_timing,
    greedy_steps,
    sdpa_backends,
    sequence_log_prob,
)
from course_lib.models.transformer import DecoderCache, Memory, Transformer, TransformerConfig
from course_lib.nn.attention import local_attention, masked_softmax
from course_lib.nn.decoding import beam_search
from course_lib.nn.efficient import blockwise_attention, reach, window_mask
from course_lib.nn.self_attention import causal_mask, scaled_dot_product_attention
from course_lib.timing import Stopwatch, median_seconds, peak_memory, single_thread


@pytest.fixture(autouse=True)
def one_thread():
    """Many tiny operations: on a busy CPU, threads mostly wait for each other."""
    with single_thread():
        yield


def tiny_model(seed=0, max_len=20):
    torch.manual_seed(seed)
    config = TransformerConfig(12, 14, d_model=16, num_heads=2, num_encoder_layers=1,
                               num_decoder_layers=2, d_ff=32, dropout=0.0, max_len=max_len)
    return Transformer(config).eval()


def sources(batch=3, length=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 12, (batch, length), generator=g)
    lengths = torch.tensor([length, length - 2, length - 1][:batch])
    return src, lengths


# --- window_mask --------------------------------------------------------------------------


def test_window_mask_small_cases():
    band = torch.tensor([[1, 1, 0, 0],
                         [1, 1, 1, 0],
                         [0, 1, 1, 1],
                         [0, 0, 1, 1]], dtype=torch.bool)
    assert torch.equal(window_mask(4, 4, 1), band)
    assert torch.equal(window_mask(4, half_width=1), band)  # keys default to queries
    assert torch.equal(window_mask(4, 4, 1, causal=True), torch.tril(band))
    assert torch.equal(window_mask(3, 3, 0), torch.eye(3, dtype=torch.bool))
    assert torch.equal(window_mask(3, 3, 0, causal=True), torch.eye(3, dtype=torch.bool))


def test_window_mask_is_aligned_bottom_right_like_causal_mask():
    # 2 new queries after 3 cached tokens: they are tokens 3 and 4 of 5.
    expected = torch.tensor([[0, 0, 1, 1, 0],
                             [0, 0, 0, 1, 1]], dtype=torch.bool)
    assert torch.equal(window_mask(2, 5, 1, causal=True), expected)
    assert torch.equal(window_mask(2, 5, 1), torch.tensor([[0, 0, 1, 1, 1],
                                                           [0, 0, 0, 1, 1]], dtype=torch.bool))
    for queries, keys in [(1, 1), (3, 3), (2, 7), (5, 9)]:
        wide = window_mask(queries, keys, keys, causal=True)
        assert torch.equal(wide, causal_mask(queries, keys))
        assert bool(window_mask(queries, keys, keys).all())


def test_a_causal_window_lets_every_token_see_itself_and_w_before():
    mask = window_mask(9, 9, 3, causal=True)
    assert mask.sum(dim=1).tolist() == [1, 2, 3, 4, 4, 4, 4, 4, 4]
    assert torch.equal(mask, window_mask(9, 9, 3) & causal_mask(9))


def test_window_mask_is_luong_local_attention_for_every_query():
    g = torch.Generator().manual_seed(3)
    scores = torch.randn(6, 6, generator=g)  # one query row per position
    mask = window_mask(6, 6, 2)
    for i in range(6):
        expected = local_attention(scores[i:i + 1], torch.tensor([float(i)]), 2)
        torch.testing.assert_close(masked_softmax(scores[i:i + 1], mask[i:i + 1]), expected)


def test_window_mask_device_and_dtype():
    mask = window_mask(3, 4, 1, device="meta")
    assert mask.device.type == "meta" and mask.dtype == torch.bool and mask.shape == (3, 4)


@pytest.mark.parametrize("args, error", [
    ((0, 3, 1), ValueError), ((4, 3, 1), ValueError), ((3, 3, -1), ValueError),
    ((3, 3, 1.5), TypeError), ((3.0, 3, 1), TypeError)])
def test_window_mask_rejects_bad_input(args, error):
    with pytest.raises(error, match="queries|half_width|integers"):
        window_mask(*args)


# --- reach --------------------------------------------------------------------------------


@pytest.mark.parametrize("half_width, layers", [(1, 1), (2, 3), (3, 2), (1, 5)])
def test_the_receptive_field_of_a_causal_window_grows_as_layers_times_width(half_width, layers):
    length = 20
    reached = reach(window_mask(length, length, half_width, causal=True), layers)
    span = half_width * layers
    assert torch.equal(reached, window_mask(length, length, span, causal=True))
    assert int(reached[-1].sum()) == span + 1


def test_reach_of_full_masks_and_without_a_diagonal():
    assert torch.equal(reach(causal_mask(6), 4), causal_mask(6))
    assert torch.equal(reach(window_mask(7, 7, 1), 2), window_mask(7, 7, 2))
    # Attending only to the previous token: the residual keeps each position's own input.
    previous = torch.zeros(5, 5, dtype=torch.bool)
    previous[1:, :-1] = torch.eye(4, dtype=torch.bool)
    assert torch.equal(reach(previous, 2), window_mask(5, 5, 2, causal=True))


def test_reach_rejects_bad_input():
    with pytest.raises(ValueError, match="square"):
        reach(torch.ones(3, 4, dtype=torch.bool), 2)
    with pytest.raises(TypeError, match="mask must be a torch.bool tensor"):
        reach(torch.ones(3, 3), 2)
    with pytest.raises(ValueError, match="layers"):
        reach(causal_mask(3), 0)


# --- decoding -----------------------------------------------------------------------------


def test_greedy_steps_with_and_without_the_cache_choose_the_same_words():
    model = tiny_model()
    src, lengths = sources()
    cached = greedy_steps(model, src, lengths, 12, use_cache=True)
    uncached = greedy_steps(model, src, lengths, 12, use_cache=False)
    assert cached.tokens.shape == (3, 12) and cached.tokens.dtype == torch.long
    assert torch.equal(cached.tokens, uncached.tokens)
    assert len(cached.step_s) == 12 and all(s > 0 for s in cached.step_s + uncached.step_s)


def test_greedy_steps_agree_with_greedy_decode_up_to_eos():
    for seed in range(3):
        model = tiny_model(seed)
        src, lengths = sources(seed=seed)
        forced = greedy_steps(model, src, lengths, 12).tokens
        decoded = model.greedy_decode(src, lengths, max_len=12)
        for row in range(src.shape[0]):
            words = decoded[row][decoded[row] != PAD_ID]
            assert torch.equal(forced[row, :len(words)], words)
            if len(words) < 12:  # greedy_decode stopped at EOS; greedy_steps went on
                assert words[-1] == EOS_ID


def test_greedy_steps_rejects_more_steps_than_positions():
    model = tiny_model(max_len=8)
    src, lengths = sources()
    assert greedy_steps(model, src, lengths, 8).tokens.shape == (3, 8)
    with pytest.raises(ValueError, match="max_len = 8"):
        greedy_steps(model, src, lengths, 9)
    with pytest.raises(ValueError, match="steps"):
        greedy_steps(model, src, lengths, 0)


def test_decode_timing_structure():
    model = tiny_model()
    src, lengths = sources()
    rows = decode_timing(model, src, lengths, [2, 5], repeats=2)
    assert [row["tokens"] for row in rows] == [2, 5]
    for row in rows:
        assert set(row) == {"tokens", "cached_s", "uncached_s", "speedup", "same_tokens",
                            "cached_step_s", "uncached_step_s"}
        assert row["same_tokens"] is True
        assert row["cached_s"] > 0 and row["uncached_s"] > 0
        assert row["speedup"] == row["uncached_s"] / row["cached_s"]
        for key in ("cached_step_s", "uncached_step_s"):
            assert len(row[key]) == row["tokens"] and all(s > 0 for s in row[key])
    with pytest.raises(ValueError, match="repeats"):
        decode_timing(model, src, lengths, [2], repeats=0)


def test_cache_report_shows_the_cache_growing():
    model = tiny_model()
    src, lengths = sources()
    memory = model.encode(src, lengths)
    cache = model.new_cache()
    assert [row["self K (= V) shape"] for row in cache_report(cache)] == [None, None]
    words = torch.full((3, 1), 1)
    with torch.no_grad():
        for _ in range(4):
            model.decode(words, memory, cache)
    rows = cache_report(cache)
    assert [row["layer"] for row in rows] == [0, 1]
    for row in rows:
        assert row["self K (= V) shape"] == (3, 2, 4, 8)
        assert row["cross K (= V) shape"] == (3, 2, 6, 8)
        assert row["bytes"] == 2 * (3 * 2 * 4 * 8 + 3 * 2 * 6 * 8) * 4


def test_sequence_log_prob_equals_the_scores_of_beam_search():
    model = tiny_model(1)
    src, lengths = sources(seed=1)
    beam, batch = 3, src.shape[0]
    with torch.no_grad():
        encoded = model.encode(src, lengths)
        memory = Memory(encoded.states.repeat_interleave(beam, dim=0),
                        encoded.mask.repeat_interleave(beam, dim=0))

        def step(previous, cache):
            logits = model.decode(previous.unsqueeze(1), memory, cache)[:, -1]
            return torch.log_softmax(logits.float(), dim=-1), cache, None

        result = beam_search(step, model.new_cache(), DecoderCache.reorder, batch, beam, 10,
                             src.device)
    torch.testing.assert_close(sequence_log_prob(model, src, lengths, result.tokens),
                               result.scores, atol=1e-4, rtol=1e-5)


def test_sequence_log_prob_ignores_pad_and_scores_greedy_words():
    model = tiny_model(2)
    src, lengths = sources(seed=2)
    tokens = greedy_steps(model, src, lengths, 6).tokens
    with torch.no_grad():
        logits = model(src, lengths, torch.cat([torch.ones(3, 1, dtype=torch.long),
                                                tokens[:, :-1]], dim=1))
    expected = torch.log_softmax(logits, -1).max(dim=-1).values.sum(dim=1)  # greedy = argmax
    scores = sequence_log_prob(model, src, lengths, tokens)
    torch.testing.assert_close(scores, expected)
    padded = torch.cat([tokens, torch.full((3, 2), PAD_ID)], dim=1)
    torch.testing.assert_close(sequence_log_prob(model, src, lengths, padded), scores)
    assert bool((scores < 0).all())
    with pytest.raises(ValueError, match="tokens"):
        sequence_log_prob(model, src, lengths, tokens[:2])


# --- memory and time ----------------------------------------------------------------------


def test_peak_memory_counts_live_tensors_exactly():
    assert peak_memory(lambda: torch.ones(1000) + 1) == 8000  # both alive at the addition
    assert peak_memory(lambda: torch.ones(10, 10).view(100).t()) == 400  # views are free
    x = torch.ones(10)
    assert peak_memory(lambda: x.add_(1)) == 0  # in place, on a tensor from outside
    # The temporary ones(1000) is freed as soon as the addition returns, before the sum.
    assert peak_memory(lambda: (torch.ones(1000) + 1).sum()) == 8000

    def all_kept():
        a = torch.ones(1000)
        b = a + 1
        return a, b, b.sum()

    assert peak_memory(all_kept) == 8004

    def freed_on_the_way():
        a = torch.ones(1000)
        b = a * 2
        del a
        return b * 2  # a was freed: never more than two of them at once

    assert peak_memory(freed_on_the_way) == 8000


def test_explicit_attention_holds_the_weights_and_fused_does_not():
    q, k, v = (torch.randn(1, 2, 128, 16) for _ in range(3))
    weights = 2 * 128 * 128 * 4
    output = 2 * 128 * 16 * 4
    explicit = peak_memory(lambda: scaled_dot_product_attention(q, k, v)[0])
    fused = peak_memory(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v))
    assert explicit >= 2 * weights + output  # scores and weights alive at once
    assert output <= fused < weights
    meta = [x.to("meta") for x in (q, k, v)]
    assert peak_memory(lambda: scaled_dot_product_attention(*meta)[0]) == explicit


def test_peak_memory_rejects_bad_arguments():
    with pytest.raises(ValueError, match="CUDA"):
        peak_memory(lambda: torch.ones(3), how="allocator", device=torch.device("meta"))
    with pytest.raises(ValueError, match="how"):
        peak_memory(lambda: torch.ones(3), how="rss")


def test_median_seconds():
    calls = []

    def work():
        calls.append(1)
        time.sleep(0.005)

    assert median_seconds(work, repeats=3, warmup=2) >= 0.005
    assert len(calls) == 5
    with pytest.raises(ValueError, match="repeats"):
        median_seconds(work, repeats=0)


def test_stopwatch_times_the_block_with_the_device_synchronized(monkeypatch):
    events = []
    monkeypatch.setattr(timing, "synchronize", lambda device: events.append(("sync", device)))
    watch = Stopwatch("meta")
    with pytest.raises(RuntimeError, match="still running"):
        _ = watch.seconds
    with watch:
        events.append(("block", None))
        time.sleep(0.005)
    assert events == [("sync", "meta"), ("block", None), ("sync", "meta")]
    assert 0.005 <= watch.seconds < 5.0
    with pytest.raises(ValueError), Stopwatch() as failing:
        raise ValueError("boom")
    assert failing.seconds >= 0.0  # a block that raised is still timed


def test_attention_cost_rows():
    rows = attention_cost([8, 32], batch=2, heads=2, head_dim=4, repeats=1)
    assert [row["length"] for row in rows] == [8, 32]
    for row in rows:
        length = row["length"]
        assert row["weights_bytes"] == 2 * 2 * length * length * 4
        assert row["explicit_bytes"] >= 2 * row["weights_bytes"]
        assert row["fused_bytes"] < row["explicit_bytes"]
        assert row["explicit_s"] > 0 and row["fused_s"] > 0
    causal = attention_cost([16], heads=1, head_dim=4, repeats=1, causal=True)[0]
    assert causal["explicit_bytes"] >= 2 * causal["weights_bytes"]
    with pytest.raises(ValueError, match="lengths"):
        attention_cost([0])


def test_sdpa_backends_on_the_inputs_device():
    q, k, v = (torch.randn(1, 2, 8, 4) for _ in range(3))
    found = sdpa_backends(q, k, v)
    assert set(found) <= {"FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"}
    assert found["MATH"] is True  # the reference kernel runs everywhere
    assert all(isinstance(ok, bool) for ok in found.values())


def test_blockwise_attention_is_exact_and_holds_one_block_of_scores():
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 3, 40, 8, generator=g)
    k = torch.randn(2, 3, 50, 8, generator=g) * 4  # large scores: the running max matters
    v = torch.randn(2, 3, 50, 6, generator=g)
    expected = scaled_dot_product_attention(q, k, v)[0]
    for block in (1, 7, 16, 50, 64):
        torch.testing.assert_close(blockwise_attention(q, k, v, block), expected,
                                   atol=1e-5, rtol=1e-5)
    q, k, v = (torch.randn(1, 1, 256, 8, generator=g) for _ in range(3))
    explicit = peak_memory(lambda: scaled_dot_product_attention(q, k, v)[0])
    blockwise = peak_memory(lambda: blockwise_attention(q, k, v, 16))
    weights = 256 * 256 * 4
    assert explicit >= 2 * weights
    assert blockwise < weights / 2  # a few (256, 16) blocks and (256, 8) outputs at a time
    with pytest.raises(ValueError, match="block_size"):
        blockwise_attention(q, k, v, 0)
    with pytest.raises(ValueError, match="expected query"):
        blockwise_attention(q, k[..., :4], v)
    with pytest.raises(TypeError, match="value has dtype torch.float64 but query has"):
        blockwise_attention(q, k, v.double())  # the checks of every attention function


def test_single_thread_restores_the_thread_count():
    torch.set_num_threads(2)  # the fixture restores the original count afterwards
    before = torch.get_num_threads()
    assert before == 2
    with single_thread(torch.device("cpu")):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with single_thread(torch.device("meta")):
        assert torch.get_num_threads() == before  # other devices are left alone
    with pytest.raises(RuntimeError), single_thread():
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before
