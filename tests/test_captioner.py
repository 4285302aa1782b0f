"""Show, Attend and Tell (course_lib.models.captioner): encoder grid, attention over locations, the
gate, the doubly stochastic penalty, decoding, and a model that learns its training captions."""

import copy
import itertools
import math

import pytest
import torch
from torch.nn import functional as F

from course_lib.data.captions import CaptionBatches, caption_batch, caption_vocab, digit_strips
from course_lib.data.vocab import BOS_ID, EOS_ID, PAD_ID
from course_lib.metrics import localization_accuracy
from course_lib.models.captioner import (
    AttentionLSTMDecoder,
    CaptionerConfig,
    CNNEncoder,
    ShowAttendTell,
    captioning_loss,
    doubly_stochastic_penalty,
)
from course_lib.nn.attention import AdditiveScore
from course_lib.seeding import seed_everything

from .strict_device import stray_tensors_fail


def tiny(vocab=9, in_channels=1, **extra):
    seed_everything(0)
    settings = dict(channels=(4, 8), pool_after=(0, 1), embed_dim=6, hidden_size=12,
                    attention_size=7)
    return ShowAttendTell(CaptionerConfig(vocab, in_channels=in_channels, **{**settings, **extra}))


@pytest.mark.parametrize("pools, grid", [((), (8, 20)), ((2,), (4, 10)), ((0, 1), (2, 5))])
def test_encoder_returns_one_feature_vector_per_grid_cell(pools, grid):
    encoder = CNNEncoder(CaptionerConfig(9, in_channels=3, channels=(4, 8, 6), pool_after=pools,
                                         coords=False))
    features = encoder(torch.rand(2, 3, 8, 20))
    assert encoder.grid_shape(8, 20) == grid
    assert features.shape == (2, grid[0] * grid[1], 6)
    with_coords = CNNEncoder(CaptionerConfig(9, in_channels=3, channels=(4, 8, 6),
                                             pool_after=pools))
    assert with_coords(torch.rand(2, 3, 8, 20)).shape == (2, grid[0] * grid[1], 8)


def test_feature_index_is_row_major_over_the_grid():
    # With no pooling and one 3x3 conv, brightening pixel (3, 4) can change only the features of
    # the cells (r, c) with |r - 3| <= 1 and |c - 4| <= 1, at the indices r * W' + c.
    encoder = CNNEncoder(CaptionerConfig(9, channels=(3,), pool_after=(), coords=False)).eval()
    image = torch.zeros(1, 1, 5, 7)
    base = encoder(image)
    image[0, 0, 3, 4] = 1.0
    change = (encoder(image) - base).abs().sum(-1)[0]  # (L,)
    neighbourhood = {r * 7 + c for r in (2, 3, 4) for c in (3, 4, 5)}
    changed = set(torch.nonzero(change > 1e-6).flatten().tolist())
    assert changed and changed <= neighbourhood


def test_coordinates_let_identical_patches_differ():
    blank = torch.zeros(1, 1, 6, 6)
    with_coords = CNNEncoder(CaptionerConfig(9, channels=(4,), pool_after=())).eval()(blank)
    without = CNNEncoder(CaptionerConfig(9, channels=(4,), pool_after=(),
                                         coords=False)).eval()(blank)
    interior = [1 * 6 + 1, 2 * 6 + 2, 3 * 6 + 3]  # cells whose 3x3 window lies inside the image
    assert torch.allclose(without[0, interior[0]], without[0, interior[1]])
    assert not torch.allclose(with_coords[0, interior[0]], with_coords[0, interior[1]])


def test_read_convs_widen_what_is_read_but_not_what_is_scored():
    # One 3x3 conv, no pooling: a local feature sees 3x3 pixels; one read conv more makes the
    # wide-view channels see 5x5. They follow the local features and coordinates of each cell.
    config = CaptionerConfig(9, channels=(3,), pool_after=(), read_convs=1)
    encoder = CNNEncoder(config).eval()
    assert (encoder.key_size, encoder.feature_size) == (3 + 2, 3 + 2 + 3)
    image = torch.zeros(1, 1, 7, 9)
    base = encoder(image)
    image[0, 0, 3, 4] = 1.0
    change = (encoder(image) - base).abs()[0]  # (L, C)

    def cells(channels):
        return {int(i) for i in torch.nonzero(change[:, channels].sum(-1) > 1e-6).flatten()}

    assert cells(slice(0, 3)) <= {r * 9 + c for r in (2, 3, 4) for c in (3, 4, 5)}
    wide = cells(slice(5, 8))
    assert wide <= {r * 9 + c for r in range(1, 6) for c in range(2, 7)}
    assert any(abs(i // 9 - 3) == 2 or abs(i % 9 - 4) == 2 for i in wide)  # beyond 3x3
    assert torch.equal(change[:, 3:5], torch.zeros_like(change[:, 3:5]))  # coordinates fixed


def test_attention_scores_only_the_key_channels():
    model = tiny(read_convs=1).eval()
    assert model.decoder.score.key_size == model.encoder.key_size < model.encoder.feature_size
    other = copy.deepcopy(model)
    with torch.no_grad():
        for parameter in other.encoder.read.parameters():
            parameter.add_(torch.randn_like(parameter))
    images, previous = torch.rand(2, 1, 8, 20), torch.tensor([BOS_ID, 5])
    state = (torch.zeros(2, 12), torch.zeros(2, 12))  # the same h_{t-1} for both models
    features, prepared = model.encode(images)
    other_features, other_prepared = other.encode(images)
    torch.testing.assert_close(prepared, other_prepared)  # the keys ignore the read convs
    assert not torch.allclose(features, other_features)  # the context reads them
    logits, _, weights, _ = model.decoder.step(previous, state, features, prepared)
    other_logits, _, other_weights, _ = other.decoder.step(previous, state, other_features,
                                                           other_prepared)
    torch.testing.assert_close(weights, other_weights)
    assert not torch.allclose(logits, other_logits)


def test_attention_over_locations_sums_to_one_and_gates_lie_in_0_1():
    model = tiny()
    out = model(torch.rand(3, 1, 8, 20), torch.randint(4, 9, (3, 5)))
    assert out.logits.shape == (3, 5, 9) and out.weights.shape == (3, 5, 10)
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(3, 5))
    assert (out.weights >= 0).all() and ((out.gates > 0) & (out.gates < 1)).all()
    assert tiny(gate=False)(torch.rand(3, 1, 8, 20), torch.randint(4, 9, (3, 5))).gates.eq(1).all()


def test_one_step_is_the_equations_of_show_attend_and_tell():
    model = tiny().eval()
    images, previous = torch.rand(2, 1, 8, 20), torch.tensor([BOS_ID, 5])
    decoder = model.decoder
    assert isinstance(decoder.score, AdditiveScore)  # the score of course_lib.nn.attention
    a = model.encoder(images)  # (B, L, C)
    h0 = torch.tanh(decoder.init_h(a.mean(1)))
    c0 = torch.tanh(decoder.init_c(a.mean(1)))
    W, U, b, v = (decoder.score.W.weight, decoder.score.U.weight, decoder.score.U.bias,
                  decoder.score.v.weight[0])
    e = torch.tanh((h0 @ W.T).unsqueeze(1) + a @ U.T + b) @ v  # (B, L)
    alpha = torch.softmax(e, dim=-1)
    beta = torch.sigmoid(decoder.gate(h0)).squeeze(-1)
    z = beta.unsqueeze(-1) * torch.einsum("bl,blc->bc", alpha, a)
    y = decoder.embedding(previous)
    h1, c1 = decoder.cell(torch.cat([y, z], -1), (h0, c0))
    logits = decoder.out(y + decoder.out_h(h1) + decoder.out_z(z))
    got_logits, (got_h, got_c), got_alpha, got_beta = decoder.step(
        previous, decoder.initial_state(a), a, decoder.score.prepare(a))
    for got, expected in [(got_logits, logits), (got_h, h1), (got_c, c1), (got_alpha, alpha),
                          (got_beta, beta)]:
        torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("mode", ["argmax", "sample"])
def test_hard_attention_at_test_time_reads_one_location(mode):
    model = tiny().eval()
    decoder = model.decoder
    a = model.encoder(torch.rand(2, 1, 8, 20))  # (B, L, C)
    state, prepared, previous = decoder.initial_state(a), decoder.score.prepare(a), \
        torch.tensor([BOS_ID, BOS_ID])
    soft = decoder.step(previous, state, a, prepared)
    hard = decoder.step(previous, state, a, prepared, mode, torch.Generator().manual_seed(3))
    torch.testing.assert_close(hard[2], soft[2])  # the same α is returned
    chosen = soft[2].argmax(-1) if mode == "argmax" \
        else torch.multinomial(soft[2], 1, generator=torch.Generator().manual_seed(3))[:, 0]
    z = soft[3].unsqueeze(-1) * a[torch.arange(2), chosen]  # β · a_chosen, (B, C)
    y = decoder.embedding(previous)
    h1, _ = decoder.cell(torch.cat([y, z], -1), state)
    torch.testing.assert_close(hard[1][0], h1)
    with pytest.raises(ValueError, match="attention must be one of"):
        decoder.step(previous, state, a, prepared, "top2")


def test_gradients_reach_every_parameter():
    data = digit_strips(4, seed=0)
    vocab = caption_vocab([data])
    model = tiny(len(vocab))
    captioning_loss(0.5)(model, caption_batch(data, vocab, range(4))).backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert not missing


def test_doubly_stochastic_penalty_by_hand():
    weights = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 0.5, 0.5], [0.2, 0.3, 0.5]]])  # (1, T=3, L=3)
    mask = torch.tensor([[True, True, False]])  # the third step is padding
    # Σ_t over real steps: [1, 0.5, 0.5] -> mean of (0, 0.25, 0.25) = 1/6.
    torch.testing.assert_close(doubly_stochastic_penalty(weights, mask), torch.tensor([1 / 6]))
    uniform = torch.full((1, 2, 5), 0.2)
    floor = (1 - 2 / 5) ** 2  # the smallest value when T = 2 words share L = 5 locations
    torch.testing.assert_close(doubly_stochastic_penalty(uniform, torch.ones(1, 2).bool()),
                               torch.tensor([floor]))
    with pytest.raises(ValueError, match=r"expected weights \(B, T, L\) and step_mask \(B, T\)"):
        doubly_stochastic_penalty(weights, mask[:, :2])


def test_loss_is_cross_entropy_plus_lambda_times_the_penalty():
    data = digit_strips(3, seed=1)
    vocab = caption_vocab([data])
    model, batch = tiny(len(vocab)), caption_batch(data, vocab, range(3))
    out = model(batch.images, batch.tgt_in)
    cross_entropy = F.cross_entropy(out.logits.flatten(0, 1), batch.tgt_out.flatten(),
                                    ignore_index=PAD_ID)
    penalty = doubly_stochastic_penalty(out.weights, batch.tgt_out != PAD_ID).mean()
    torch.testing.assert_close(captioning_loss(0.0)(model, batch), cross_entropy)
    torch.testing.assert_close(captioning_loss(2.0)(model, batch), cross_entropy + 2 * penalty)
    with pytest.raises(ValueError, match="regularisation weight must be >= 0"):
        captioning_loss(-1.0)


def test_training_and_decoding_make_every_tensor_on_the_images_device():
    """Device-agnostic without a GPU: a tensor that the code creates without following its
    inputs fails against the CPU inputs, as it would against a GPU (tests/strict_device.py). The
    forward pass alone also runs on ``meta`` and, where there is one, on CUDA
    (tests/test_device_agnostic.py)."""
    data = digit_strips(3, seed=1)
    vocab = caption_vocab([data])
    model, batch = tiny(len(vocab)), caption_batch(data, vocab, range(3))
    generator = torch.Generator().manual_seed(0)
    with stray_tensors_fail():
        # The check does catch a stray tensor, also where PyTorch alone would not (embedding).
        with pytest.raises(RuntimeError, match="meta"):
            model.encoder(batch.images + torch.zeros(batch.images.shape))
        with pytest.raises(RuntimeError, match="meta"):
            model.decoder.embedding(torch.zeros(1, dtype=torch.long))
        captioning_loss(0.5)(model, batch).backward()
        model.eval()
        with torch.no_grad():
            outputs = [model.greedy_decode(batch.images, 6, mode, generator)
                       for mode in ("soft", "argmax", "sample")]
            outputs.append(model.beam_search(batch.images, 3, 6))
    for out in outputs:
        assert out.tokens.device.type == out.weights.device.type == "cpu"
    assert all(p.grad is not None and p.grad.device.type == "cpu" for p in model.parameters())


def test_greedy_decoding_agrees_with_teacher_forcing_on_its_own_output():
    model = tiny().eval()
    images = torch.rand(4, 1, 8, 20)
    generated = model.greedy_decode(images, max_len=6)
    tgt_in = torch.cat([torch.full((4, 1), BOS_ID), generated.tokens[:, :-1]], dim=1)
    forced = model(images, tgt_in)
    alive = torch.cat([torch.ones(4, 1, dtype=torch.bool),
                       (generated.tokens[:, :-1] != EOS_ID)
                       & (generated.tokens[:, :-1] != PAD_ID)], dim=1).cumprod(1).bool()
    expected = forced.logits.clone()
    expected[..., PAD_ID] = expected[..., BOS_ID] = -math.inf
    assert torch.equal(expected.argmax(-1)[alive], generated.tokens[alive])
    torch.testing.assert_close(forced.weights[alive], generated.weights[alive])
    assert (generated.weights[~alive] == 0).all()


def test_beam_of_one_is_greedy_and_a_wide_beam_is_exhaustive_search():
    model = tiny(vocab=6).eval()  # words: UNK (3), 4, 5, and EOS
    images = torch.rand(3, 1, 8, 20)
    greedy, beam1 = model.greedy_decode(images, 3), model.beam_search(images, 1, 3)
    assert torch.equal(greedy.tokens, beam1.tokens)
    torch.testing.assert_close(greedy.scores, beam1.scores)
    torch.testing.assert_close(greedy.weights, beam1.weights)
    # Every caption of at most 3 words that ends with EOS, scored by teacher forcing.
    words = [3, 4, 5]
    candidates = [list(c) + [EOS_ID] for n in range(3) for c in itertools.product(words, repeat=n)]
    best = []
    for row in range(3):
        scored = []
        for caption in candidates:
            tgt_in = torch.tensor([[BOS_ID] + caption[:-1]])
            logits = model(images[row:row + 1], tgt_in).logits[0]
            log_probs = torch.log_softmax(logits, -1)  # the model's own log p(y_t)
            scored.append((log_probs[torch.arange(len(caption)), caption].sum().item(), caption))
        best.append(max(scored))
    wide = model.beam_search(images, beam_size=len(candidates), max_len=3)
    for row, (score, caption) in enumerate(best):
        got = [t for t in wide.tokens[row].tolist() if t != PAD_ID]
        assert got == caption and wide.scores[row].item() == pytest.approx(score, abs=1e-4)


def test_the_model_learns_its_training_captions_exactly():
    data = digit_strips(16, seed=5)
    vocab = caption_vocab([data])
    model = tiny(len(vocab), channels=(8, 16), hidden_size=48, attention_size=24)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = captioning_loss(0.0)
    batches = CaptionBatches(data, vocab, 16, seed=0)
    for _ in range(300):
        for batch in batches:
            optimizer.zero_grad()
            loss_fn(model, batch).backward()
            optimizer.step()
    model.eval()
    generated = model.greedy_decode(data.images, max_len=8).tokens
    captions = [vocab.decode(row) for row in generated]
    assert captions == data.captions


def test_config_and_inputs_are_checked():
    with pytest.raises(ValueError, match=r"pool_after must list distinct conv indices in \[0, 1\)"):
        CaptionerConfig(9, channels=(4,), pool_after=(0, 1))
    with pytest.raises(ValueError, match="channels must be a non-empty tuple"):
        CaptionerConfig(9, channels=())
    with pytest.raises(ValueError, match="read_convs must be a non-negative int, got -1"):
        CaptionerConfig(9, read_convs=-1)
    with pytest.raises(ValueError, match=r"key_size must lie in \[1, feature_size = 4\], got 5"):
        AttentionLSTMDecoder(tiny().config, feature_size=4, key_size=5)
    with pytest.raises(ValueError, match=r"expected images \(B, 1, H, W\), got \(2, 3, 8, 8\)"):
        tiny()(torch.rand(2, 3, 8, 8), torch.ones(2, 3).long())
    with pytest.raises(ValueError, match="too small for 2"):
        tiny()(torch.rand(2, 1, 3, 3), torch.ones(2, 3).long())
    with pytest.raises(ValueError, match=r"expected tgt_in of shape \(2, T\)"):
        tiny()(torch.rand(2, 1, 8, 8), torch.ones(3, 3).long())


# --- localisation accuracy ------------------------------------------------------------------


def peaked(cells, length=8):
    """Attention rows, each all on one cell of a 2x4 grid (8 locations)."""
    matrix = torch.zeros(len(cells), length)
    matrix[torch.arange(len(cells)), torch.tensor(cells)] = 1.0
    return matrix


def test_localization_counts_peaks_inside_the_named_box():
    # A 20x40 image on a 2x4 grid: cells are 10x10; cell 5 = row 1, col 1, centre (15, 15).
    boxes = [(10, 10, 20, 20), (30, 0, 40, 10)]
    kwargs = dict(grid=(2, 4), image_size=(20, 40), content_words={"one", "two"})
    hit = localization_accuracy([peaked([5, 3])], [["one", "two"]], [["one", "two"]], [boxes],
                                **kwargs)
    assert hit == 1.0
    swapped = localization_accuracy([peaked([3, 5])], [["one", "two"]], [["one", "two"]],
                                    [boxes], **kwargs)
    assert swapped == 0.0
    # A wrong word names nothing in the image: a miss, whatever the attention.
    wrong = localization_accuracy([peaked([5, 3])], [["two", "two"]], [["one", "two"]], [boxes],
                                  **kwargs)
    assert wrong == 0.5
    # Function words are not scored; extra words beyond the reference are misses.
    extra = localization_accuracy([peaked([0, 5, 3, 3])], [["a", "one", "two", "one"]],
                                  [["a", "one", "two"]], [[None, *boxes]], **kwargs)
    assert extra == pytest.approx(2 / 3)


def test_localization_refuses_mismatched_inputs():
    kwargs = dict(grid=(2, 4), image_size=(20, 40), content_words={"one"})
    with pytest.raises(ValueError, match="expected one entry per caption"):
        localization_accuracy([peaked([1])], [["one"], ["one"]], [["one"]], [[None]], **kwargs)
    with pytest.raises(ValueError, match=r"attention matrix for 1 generated words on a 2x4"):
        localization_accuracy([torch.ones(1, 6)], [["one"]], [["one"]], [[None]], **kwargs)
    with pytest.raises(ValueError, match="no generated content words"):
        localization_accuracy([peaked([1])], [["a"]], [["a"]], [[None]], **kwargs)
